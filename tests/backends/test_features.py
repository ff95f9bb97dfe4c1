"""A group is judged only on the features it actually uses: implied packs and affinities are not uses."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, given, settings

from support.fuzz import examples
from support.builders import group, role
from support.strategies import worlds
from tandem.api.loading import Inputs
from tandem.api.resources import ClusterTopology
from tandem.backends.base import Unsupported
from tandem.backends.features import FEATURES, feature
from tandem.backends.registry import matrix_backends

from backends.variants import load, typed

BACKENDS = matrix_backends()


def used(raw: dict[str, Any], feature_id: str, topology: ClusterTopology | None) -> list[str]:
    return [usage.path for usage in feature(feature_id).detect(typed(raw), topology)]


def test_replica_packs_count_only_for_multi_pod_replicas_narrower_than_the_unit(small_cluster: Inputs) -> None:
    topology = small_cluster.topologies["default"]
    single = group("a", [role("decode", 2, 1, gpus=1, pods=1, required="host")], required="rack")
    assert used(single, "role-pack-required", topology) == []
    same = group("a", [role("decode", 2, 1, gpus=1, pods=2, required="rack")], required="rack")
    assert used(same, "role-pack-required", topology) == []
    narrower = group("a", [role("decode", 2, 1, gpus=1, pods=2, required="host")], required="rack")
    assert used(narrower, "role-pack-required", topology) == ["spec.roles[0].topology.pack.required"]
    unpacked_unit = group("a", [role("decode", 2, 1, gpus=1, pods=2, required="block")])
    assert used(unpacked_unit, "role-pack-required", topology) == ["spec.roles[0].topology.pack.required"]
    preferred_implied = group("a", [role("decode", 2, 1, gpus=1, pods=2, required="host", preferred="host")])
    assert used(preferred_implied, "role-pack-preferred", topology) == []


def test_without_the_topology_a_different_level_counts_as_a_use() -> None:
    broader_unknown = group("a", [role("decode", 2, 1, gpus=1, pods=2, required="block")], required="rack")
    assert used(broader_unknown, "role-pack-required", None) == ["spec.roles[0].topology.pack.required"]


def test_unit_preferred_equal_to_required_is_not_a_use(small_cluster: Inputs) -> None:
    topology = small_cluster.topologies["default"]
    assert used(group("a", [role("p", 1, gpus=1)], required="rack", preferred="rack"), "unit-pack-preferred", topology) == []
    assert used(group("a", [role("p", 1, gpus=1)], required="block", preferred="rack"), "unit-pack-preferred", topology) == [
        "spec.topology.pack.preferred"
    ]


def test_an_affinity_the_unit_pack_already_keeps_is_not_a_use(small_cluster: Inputs, example_inputs: Inputs) -> None:
    topology = small_cluster.topologies["default"]
    rule = {"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}
    roles = [role("prefill", 1, 1, gpus=1), role("decode", 1, 1, gpus=1)]
    assert used(group("a", roles, required="rack", affinity=[rule]), "affinity-required", topology) == []
    assert used(group("a", roles, required="host", affinity=[rule]), "affinity-required", topology) == []
    assert used(group("a", roles, required="block", affinity=[rule]), "affinity-required", topology) == ["spec.affinity[0]"]
    assert used(group("a", roles, affinity=[rule]), "affinity-required", topology) == ["spec.affinity[0]"]
    llama_8b = next(g for g in example_inputs.groups if g.metadata.name == "llama-8b")
    assert feature("affinity-required").detect(llama_8b, example_inputs.topologies["default"]) == []


def test_gangs_and_timeouts_count_only_when_they_matter(small_cluster: Inputs) -> None:
    one_needed = group("a", [role("prefill", 1, 1, gpus=1), role("router", 1, 0, gpus=0)])
    assert used(one_needed, "unit-gang", None) == []
    assert used(group("a", [role("p", 1, 1), role("d", 1, 1)]), "unit-gang", None) == ["spec.roles"]
    assert used(group("a", [role("d", 2, 2, pods=4)]), "replica-gang", None) == []
    assert used(group("a", [role("d", 2, 1, pods=4)]), "replica-gang", None) == ["spec.roles[0].podsPerReplica"]
    assert used(group("a", [role("d", 2, 1, pods=4)]), "complete-replica-minimum", None) == ["spec.roles[0].minReplicas"]
    default_timeout = group("a", [role("p", 1)])
    assert used(default_timeout, "gang-timeout", None) == []
    default_timeout["spec"]["scheduler"] = {"gangTimeoutSeconds": 300}
    assert used(default_timeout, "gang-timeout", None) == ["spec.scheduler.gangTimeoutSeconds"]


_STEP = re.compile(r"\.([A-Za-z]+)|\[(\d+)\]")


def _parent_exists(raw: dict[str, Any], path: str) -> bool:
    """The field a path names may be defaulted (absent), but its parent must be in the document."""
    if not path.startswith("spec"):
        return False
    steps = _STEP.findall(path)
    node: Any = raw
    for name, index in [("spec", "")] + steps[:-1]:
        if index:
            if not isinstance(node, list) or int(index) >= len(node):
                return False
            node = node[int(index)]
        else:
            if not isinstance(node, dict) or name not in node:
                return False
            node = node[name]
    return True


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(worlds(max_groups=2))
def test_every_problem_names_a_field_of_the_group_and_native_takes_everything(world: list[dict]) -> None:
    inputs = load(world)
    topology = inputs.topologies["default"]
    for grp in inputs.groups:
        raw = inputs.manifests[(grp.metadata.namespace, grp.metadata.name)]
        for backend in BACKENDS:
            problems = backend.validate(grp, topology)
            if backend.name == "native":
                assert problems == [] and backend.warnings(grp, topology) == []
            for finding in problems + backend.warnings(grp, topology):
                assert finding.path.startswith("spec."), finding
                assert _parent_exists(raw, finding.path), finding
                assert backend.label in finding.message
            assert backend.validate(grp, topology) == problems  # deterministic
            uses = {f.id for f in FEATURES if f.detect(grp, topology)}
            refused = {f.id for f in FEATURES if f.id in uses and isinstance(backend.support_for(f, grp, topology), Unsupported)}
            assert bool(refused) == bool(problems) or backend.extra_problems(grp, topology)
