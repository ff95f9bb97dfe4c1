"""What a backend cannot honour is refused with the field path that asks for it; the same group
is accepted by a backend that supports it. Approximations are accepted with a warning."""

from __future__ import annotations

import json

import pytest

from support.builders import cluster, group, role
from tandem.api.loading import Inputs
from tandem.api.resources import ClusterTopology
from tandem.backends.base import Approximate, Backend, BackendOptions, Full, Unsupported
from tandem.backends.features import FEATURE_IDS, FEATURES, feature
from tandem.backends.registry import get_backend, matrix_backends
from tandem.errors import InputError

from backends.schemas import KUBE_SCHEMAS
from backends.variants import feature_examples, load, typed

BACKENDS = matrix_backends()
UNSUPPORTED = [(b, f) for b in BACKENDS for f in FEATURES if isinstance(b.capabilities()[f.id], Unsupported)]


def test_every_backend_states_every_feature() -> None:
    for backend in BACKENDS:
        assert set(backend.capabilities()) == set(FEATURE_IDS), backend.label
    assert all(isinstance(s, Full) for s in BACKENDS[0].capabilities().values()), "native is the reference"


def test_every_unsupported_feature_has_an_example_that_uses_it(small_cluster: Inputs) -> None:
    examples = feature_examples()
    topology = small_cluster.topologies["default"]
    for f in {f.id for _, f in UNSUPPORTED}:
        assert f in examples, f"no example group for {f}"
        assert feature(f).detect(typed(examples[f]), topology), f"the example for {f} does not use it"


@pytest.mark.parametrize(("backend", "feature_id"), [(b, f.id) for b, f in UNSUPPORTED], ids=lambda x: getattr(x, "label", x))
def test_an_unsupported_feature_is_rejected_with_its_field_path(backend: Backend, feature_id: str, small_cluster: Inputs) -> None:
    topology = small_cluster.topologies["default"]
    raw = feature_examples()[feature_id]
    grp = typed(raw)
    used = feature(feature_id)
    support = backend.support_for(used, grp, topology)
    assert isinstance(support, Unsupported)
    problems = backend.validate(grp, topology)
    paths = {usage.path for usage in used.detect(grp, topology)}
    mine = [p for p in problems if p.path in paths and f"cannot honour {used.title}" in p.message]
    assert mine, f"{backend.label} did not reject {feature_id}: {problems}"
    assert all(support.reason in p.message and f"backend {backend.label!r}" in p.message for p in mine)
    with pytest.raises(InputError) as caught:
        backend.render(grp, topology, small_cluster.nodes, raw)
    assert {p.path for p in caught.value.problems} >= paths

    # The same group is accepted by every backend that supports what it uses.
    supporters = []
    for other in BACKENDS:
        uses = [f for f in FEATURES if f.detect(grp, topology)]
        if all(not isinstance(other.support_for(f, grp, topology), Unsupported) for f in uses):
            assert other.validate(grp, topology) == [], other.label
            other.render(grp, topology, small_cluster.nodes, raw)
            supporters.append(other.label)
    assert "native" in supporters
    full_elsewhere = [b for b in BACKENDS[1:] if isinstance(b.capabilities()[feature_id], Full)]
    if full_elsewhere:
        assert len(supporters) > 1, f"only native accepts the {feature_id} example; expected one of {[b.label for b in full_elsewhere]}"


def test_approximations_are_accepted_with_a_warning_naming_the_field(small_cluster: Inputs) -> None:
    topology = small_cluster.topologies["default"]
    examples = feature_examples()
    for backend in BACKENDS:
        for f in FEATURES:
            support = backend.capabilities()[f.id]
            if not isinstance(support, Approximate) or f.id not in examples:
                continue
            grp = typed(examples[f.id])
            if not isinstance(backend.support_for(f, grp, topology), Approximate):
                continue
            paths = {usage.path for usage in f.detect(grp, topology)}
            warnings = [w for w in backend.warnings(grp, topology) if w.path in paths]
            assert warnings and all(support.warning in w.message for w in warnings), (backend.label, f.id)
            assert not [p for p in backend.validate(grp, topology) if p.path in paths], (backend.label, f.id)


def test_llama_70b_decode_replica_pack_needs_a_backend_that_packs_replicas(example_inputs: Inputs) -> None:
    """GREP-537: Koordinator cannot pack a subset of a GangGroup; Volcano and KAI can."""
    grp = next(g for g in example_inputs.groups if g.metadata.name == "llama-70b")
    topology = example_inputs.topologies["default"]
    koordinator = get_backend("koordinator").validate(grp, topology)
    assert "spec.roles[1].topology.pack.required" in {p.path for p in koordinator}
    assert get_backend("volcano").validate(grp, topology) == []
    kai = get_backend("kai").validate(grp, topology)
    assert "spec.roles[1].topology.pack.required" not in {p.path for p in kai}


def test_a_priority_beyond_user_priority_classes_is_refused_by_every_scheduler_but_native(small_cluster: Inputs) -> None:
    grp = typed(group("hi", [role("prefill", 1, 1, gpus=1)], priority=1_500_000_000))
    for backend in BACKENDS:
        paths = [p.path for p in backend.validate(grp)]
        assert paths == ([] if backend.name == "native" else ["spec.priority"]), backend.label


def test_levels_need_the_cluster_topology() -> None:
    grp = typed(group("lv", [role("prefill", 2, 2, gpus=1)], required="rack"))
    for backend in BACKENDS[1:]:
        with pytest.raises(InputError) as caught:
            backend.render(grp, None)
        assert "spec.topologyName" in [p.path for p in caught.value.problems], backend.label
        assert any("ClusterTopology 'default' is needed" in p.message for p in caught.value.problems)


def _topology(name: str, *levels: tuple[str, str]) -> ClusterTopology:
    """A ClusterTopology with the given (level, node label) pairs, broadest first."""
    spec = {"levels": [{"name": level, "nodeLabel": label} for level, label in levels]}
    return load([{"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": name}, "spec": spec}]).topologies[name]


# tandem's own validation refuses a hostname level above another (api/validation.py), so this one
# is built past it: a scheduler still says its own rule for a topology that did not come through it.
HOSTNAME_FIRST = ClusterTopology.model_validate(
    {"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": "odd"},
     "spec": {"levels": [{"name": "host", "nodeLabel": "kubernetes.io/hostname"}, {"name": "gpu", "nodeLabel": "example.com/gpu-slot"}]}}
)
RESERVED_LAYER = _topology("k", ("node-topology", "example.com/pod"), ("host", "kubernetes.io/hostname"))


@pytest.mark.parametrize(
    ("name", "topology", "paths", "says"),
    [
        ("kai", HOSTNAME_FIRST, ["spec.levels[0].nodeLabel"], "KAI accepts the kubernetes.io/hostname label only at the lowest level"),
        ("kueue", HOSTNAME_FIRST, ["spec.levels[0].nodeLabel"], "Kueue accepts the kubernetes.io/hostname label only at the lowest level"),
        ("koordinator", RESERVED_LAYER, ["spec.levels[0].name", "spec.levels[1].name"], "reserved layer 'NodeTopologyLayer'"),
    ],
    ids=["kai", "kueue", "koordinator"],
)
def test_topologies_a_scheduler_cannot_represent_are_refused(name: str, topology: ClusterTopology, paths: list[str], says: str) -> None:
    with pytest.raises(InputError) as caught:
        get_backend(name).render_topology(topology, [])
    assert [p.path for p in caught.value.problems] == paths
    assert says in caught.value.problems[0].message
    # A group on that topology is refused at the field that names it, once per refused level.
    grp = typed(group("t", [role("prefill", 1, 1, gpus=1)], topology=topology.metadata.name))
    assert [p.path for p in get_backend(name).validate(grp, topology)] == ["spec.topologyName"] * len(paths)


def test_volcano_needs_labelled_nodes_for_its_hypernodes() -> None:
    inputs = load(cluster("rack=2,host=2"))
    with pytest.raises(InputError) as caught:
        get_backend("volcano").render_topology(inputs.topologies["default"], [])
    assert [p.path for p in caught.value.problems] == ["spec.levels"]


def test_backend_specific_limits() -> None:
    nine = typed(group("many", [role(f"r{i}", 1, 1, gpus=0) for i in range(9)]))
    for version in ("v1alpha3", "v1beta1", "v1alpha2", "v1alpha1"):
        problems = get_backend("workload-api", BackendOptions(workload_api_version=version)).validate(nine)
        assert "spec.roles" in [p.path for p in problems] and any("at most 8 roles" in p.message for p in problems)
    assert get_backend("volcano").validate(nine) == []

    raw = group("lw", [role("decode", 1, 1, gpus=1, pods=2, required="host")], required="rack")
    raw["spec"]["roles"][0]["workerTemplate"] = {"spec": {"containers": [{"name": "w", "image": "vllm"}]}}
    problems = get_backend("kueue").validate(typed(raw))
    assert [p.path for p in problems] == ["spec.roles[0].workerTemplate"]
    del raw["spec"]["roles"][0]["topology"]
    assert get_backend("kueue").validate(typed(raw)) == []

    with pytest.raises(InputError) as caught:
        get_backend("workload-api", BackendOptions(workload_api_version="v2"))
    assert caught.value.problems[0].path == "--workload-api-version"
    with pytest.raises(InputError) as caught:
        get_backend("slurm")
    assert caught.value.problems[0].path == "--backend"


def test_flat_workload_api_keeps_a_unit_pack_only_for_a_single_role(small_cluster: Inputs) -> None:
    topology = small_cluster.topologies["default"]
    flat = get_backend("workload-api", BackendOptions(workload_api_version="v1beta1"))
    single = typed(group("one", [role("prefill", 2, 2, gpus=1)], required="rack"))
    assert flat.validate(single, topology) == []
    (pod_group,) = [o for o in flat.render(single, topology) if o["kind"] == "PodGroup"]
    assert pod_group["spec"]["schedulingConstraints"] == {"topology": [{"key": "network.tandem.dev/rack"}]}
    two = typed(group("two", [role("prefill", 1, 1, gpus=1), role("decode", 1, 0, gpus=1)], required="rack"))
    assert [p.path for p in flat.validate(two, topology)] == ["spec.topology.pack.required"]
    oldest = get_backend("workload-api", BackendOptions(workload_api_version="v1alpha1"))
    assert [p.path for p in oldest.validate(single, topology)] == ["spec.topology.pack.required"]


def test_kai_says_what_its_pinned_podgroup_api_does_with_an_extra_replica() -> None:
    reason = get_backend("kai").capabilities()["replica-gang"]
    assert isinstance(reason, Unsupported)
    assert "72de64fc" in reason.reason and "pod by pod" in reason.reason and "minMember is mandatory" not in reason.reason


def test_flat_workload_api_versions_say_why_their_pod_groups_are_independent_gangs() -> None:
    """The reasons match kubernetes-validate's 1.37 schemas: v1beta1 has the hierarchy's fields
    but the CompositePodGroup kind only exists as v1alpha3; 1.36's v1alpha2 has no hierarchy."""
    def reason(version: str) -> str:
        support = get_backend("workload-api", BackendOptions(workload_api_version=version)).capabilities()["unit-gang"]
        assert isinstance(support, Unsupported)
        return support.reason

    assert "CompositePodGroup, is a v1alpha3-only kind" in reason("v1beta1") and "parentCompositePodGroupName" in reason("v1beta1")
    assert "v1alpha2 has no pod-group hierarchy" in reason("v1alpha2")
    strict = KUBE_SCHEMAS / "v1.37.0-local-strict"
    assert (strict / "compositepodgroup-scheduling-v1alpha3.json").exists()
    assert not (strict / "compositepodgroup-scheduling-v1beta1.json").exists()
    definitions = definitions_of("1.37")
    assert "compositePodGroupTemplates" in definitions["io.k8s.api.scheduling.v1beta1.WorkloadSpec"]["properties"]
    assert "parentCompositePodGroupName" in definitions["io.k8s.api.scheduling.v1beta1.PodGroupSpec"]["properties"]
    assert "compositePodGroupTemplates" not in definitions_of("1.36")["io.k8s.api.scheduling.v1alpha2.WorkloadSpec"]["properties"]


def definitions_of(kube: str) -> dict:
    return json.loads((KUBE_SCHEMAS / f"v{kube}.0-local-strict" / "_definitions.json").read_text(encoding="utf-8"))["$defs"]
