"""Kueue: a prebuilt Workload per unit, PodSets that follow roles, ranks that keep a replica in
its slice, and only the PodSet groups Kueue can place (a leader and workers)."""

from __future__ import annotations

from typing import Any

import pytest

from support.builders import group, role
from tandem.api.loading import Inputs
from tandem.backends.kueue_podsets import MAX_PODSET_NAME
from tandem.backends.registry import get_backend
from tandem.errors import InputError

from backends.readback import rank
from backends.schemas import SCHEMAS, SKIP_REASON, assert_valid
from backends.variants import typed

KUEUE = get_backend("kueue")
PREFIX = "kueue.x-k8s.io/"


def rendered(small_cluster: Inputs, raw: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(Workloads, Pods) of `raw` rendered for Kueue on the small cluster."""
    objects = KUEUE.render(typed(raw), small_cluster.topologies["default"], (), raw)
    return [o for o in objects if o["kind"] == "Workload"], [o for o in objects if o["kind"] == "Pod"]


def test_roles_with_identical_templates_stay_two_podsets_of_a_prebuilt_workload(small_cluster: Inputs) -> None:
    """Kueue recomputes role-hash from the pod spec unless the pod adopts a prebuilt Workload."""
    raw = group("twin", [role("prefill", 2, 2, gpus=1), role("decode", 1, 1, gpus=1)], replicas=2)
    assert raw["spec"]["roles"][0]["template"] == raw["spec"]["roles"][1]["template"]
    workloads, pods = rendered(small_cluster, raw)
    assert [w["metadata"]["name"] for w in workloads] == ["twin-0", "twin-1"]
    (first, _) = workloads
    assert [(ps["name"], ps["count"]) for ps in first["spec"]["podSets"]] == [("decode", 1), ("prefill", 2)]  # name order
    assert first["spec"]["queueName"] == "default" and "minCount" not in str(first["spec"])
    for pod in pods:
        labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
        assert labels[PREFIX + "prebuilt-workload-name"] == labels[PREFIX + "pod-group-name"] == f"twin-{labels['tandem.dev/unit']}"
        assert annotations[PREFIX + "role-hash"] == labels["tandem.dev/role"]
        assert annotations[PREFIX + "pod-group-total-count"] == "3"


def test_ranks_keep_each_replica_in_one_slice(small_cluster: Inputs) -> None:
    raw = group("sl", [role("decode", 3, 3, gpus=1, pods=4, required="host")], required="block")
    (workload,), pods = rendered(small_cluster, raw)
    (pod_set,) = workload["spec"]["podSets"]
    assert pod_set["count"] == 12
    assert pod_set["topologyRequest"] == {
        "required": "network.tandem.dev/block",
        "podSetSliceRequiredTopology": "kubernetes.io/hostname",
        "podSetSliceSize": 4,
        "podIndexLabel": PREFIX + "pod-group-pod-index",
    }
    assert sorted(rank(pod) for pod in pods) == list(range(12))
    for pod in pods:
        labels = pod["metadata"]["labels"]
        assert rank(pod) // 4 == int(labels["tandem.dev/replica"])  # slice k is replica k
        assert rank(pod) % 4 == int(labels["tandem.dev/pod-index"])


def test_leaders_and_workers_with_their_own_template_are_two_ranked_podsets(small_cluster: Inputs) -> None:
    raw = group("lw", [role("decode", 2, 2, gpus=1, pods=3)])
    raw["spec"]["roles"][0]["workerTemplate"] = {"spec": {"containers": [{"name": "w", "image": "vllm"}]}}
    (workload,), pods = rendered(small_cluster, raw)
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [("decode", 2), ("decode-workers", 4)]
    leaders = {int(p["metadata"]["labels"]["tandem.dev/replica"]): rank(p) for p in pods if p["metadata"]["labels"]["tandem.dev/pod-index"] == "0"}
    assert leaders == {0: 0, 1: 1}
    workers = sorted((rank(p), p["metadata"]["labels"]["tandem.dev/replica"]) for p in pods if p["metadata"]["labels"]["tandem.dev/pod-index"] != "0")
    assert workers == [(0, "0"), (1, "0"), (2, "1"), (3, "1")]


def test_a_leader_and_workers_share_one_domain_and_slicing_in_it_needs_a_feature_gate(small_cluster: Inputs) -> None:
    topology = small_cluster.topologies["default"]
    raw = group("rd", [role("router", 1, 1, gpus=0), role("decode", 2, 2, gpus=1, pods=2, required="host")], required="rack")
    assert KUEUE.validate(typed(raw), topology) == []
    warnings = KUEUE.warnings(typed(raw), topology)
    assert [w.path for w in warnings] == ["spec.roles[1].topology.pack.required"]
    assert "TASGroupedPodSetSlicing" in warnings[0].message
    (workload,), pods = rendered(small_cluster, raw)
    requests = {ps["name"]: ps["topologyRequest"] for ps in workload["spec"]["podSets"]}
    assert {r["podSetGroupName"] for r in requests.values()} == {"rd-0"}
    assert {r["required"] for r in requests.values()} == {"network.tandem.dev/rack"}
    assert all(p["metadata"]["annotations"][PREFIX + "podset-group-name"] == "rd-0" for p in pods)
    # One index sequence over the group, as Kueue reads a leader and workers: the router is 0,
    # the decode pods 1..4, replica by replica.
    indexes = {(p["metadata"]["labels"]["tandem.dev/role"], p["metadata"]["labels"]["tandem.dev/replica"], p["metadata"]["labels"]["tandem.dev/pod-index"]): rank(p) for p in pods}
    assert indexes == {("router", "0", "0"): 0, ("decode", "0", "0"): 1, ("decode", "0", "1"): 2, ("decode", "1", "0"): 3, ("decode", "1", "1"): 4}
    # Without the replica pack there is no slice, and nothing to warn about.
    del raw["spec"]["roles"][1]["topology"]
    assert KUEUE.warnings(typed(raw), topology) == []


@pytest.mark.parametrize(
    "roles",
    [
        [role("prefill", 2, 2, gpus=1), role("decode", 2, 2, gpus=1)],  # two PodSets, neither a single pod
        [role("a", 1, 1, gpus=1), role("b", 1, 1, gpus=1), role("c", 1, 1, gpus=1)],  # three PodSets
    ],
    ids=["two-multi-pod-podsets", "three-podsets"],
)
def test_a_required_unit_pack_over_podsets_kueue_cannot_group_is_rejected(small_cluster: Inputs, roles: list) -> None:
    topology = small_cluster.topologies["default"]
    raw = group("ng", roles, required="rack")
    problems = KUEUE.validate(typed(raw), topology)
    assert [p.path for p in problems] == ["spec.topology.pack.required"]
    assert "exactly two PodSets, one of them a single pod" in problems[0].message and "#12274" in problems[0].message
    with pytest.raises(InputError):
        KUEUE.render(typed(raw), topology)
    for other in ("volcano", "kai", "native"):
        assert get_backend(other).validate(typed(raw), topology) == [], other
    # A preferred pack over the same roles is accepted, kept PodSet by PodSet, with a warning.
    preferred = group("ng", roles, preferred="rack")
    assert KUEUE.validate(typed(preferred), topology) == []
    assert [w.path for w in KUEUE.warnings(typed(preferred), topology)] == ["spec.topology.pack.preferred"]
    (workload,), _ = rendered(small_cluster, preferred)
    assert all(ps["topologyRequest"] == {"preferred": "network.tandem.dev/rack", "podIndexLabel": PREFIX + "pod-group-pod-index"} for ps in workload["spec"]["podSets"])


def test_a_unit_of_one_podset_needs_no_group(small_cluster: Inputs) -> None:
    raw = group("one", [role("prefill", 3, 3, gpus=1)], required="rack")
    (workload,), pods = rendered(small_cluster, raw)
    (pod_set,) = workload["spec"]["podSets"]
    assert "podSetGroupName" not in pod_set["topologyRequest"]
    assert all(PREFIX + "podset-group-name" not in p["metadata"]["annotations"] for p in pods)


def test_priority_and_preferred_affinity(small_cluster: Inputs) -> None:
    topology = small_cluster.topologies["default"]
    raw = group("pr", [role("prefill", 1, 1, gpus=1), role("decode", 1, 1, gpus=1)], priority=7)
    raw["spec"]["affinity"] = [{"from": "prefill", "to": "decode", "level": "rack", "mode": "Preferred"}]
    assert KUEUE.validate(typed(raw), topology) == []
    (warning,) = [w for w in KUEUE.warnings(typed(raw), topology) if w.path == "spec.affinity[0]"]
    assert "dropped: Kueue TAS ignores pod affinity" in warning.message
    (workload,), pods = rendered(small_cluster, raw)
    assert workload["spec"]["priorityClassRef"] == {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "tandem-priority-7"}
    assert workload["spec"]["priority"] == 7
    assert all("affinity" not in p["spec"] and p["spec"]["priorityClassName"] == "tandem-priority-7" for p in pods)


def test_podset_names_are_dns_labels_and_never_clash(small_cluster: Inputs) -> None:
    long = "r" * 55  # the longest role name a pod name `nm-0-<role>-0-1` (at most 63) allows
    raw = group("n", [role(long, 1, 1, gpus=1, pods=2)])
    raw["spec"]["roles"][0]["workerTemplate"] = {"spec": {"containers": [{"name": "w", "image": "vllm"}]}}
    (workload,), _ = rendered(small_cluster, raw)
    names = [ps["name"] for ps in workload["spec"]["podSets"]]
    assert len(set(names)) == 2 and all(len(name) <= MAX_PODSET_NAME for name in names)
    clash = group("cl", [role("a", 1, 1, gpus=1, pods=2), role("a-workers", 1, 1, gpus=1)])
    clash["spec"]["roles"][0]["workerTemplate"] = {"spec": {"containers": [{"name": "w", "image": "vllm"}]}}
    problems = KUEUE.validate(typed(clash))
    assert [p.path for p in problems] == ["spec.roles[1].name"] and "would both be PodSet 'a-workers'" in problems[0].message


@pytest.mark.skipif(not SCHEMAS.exists(), reason=SKIP_REASON)
def test_the_rendered_workloads_validate_against_the_kueue_crd(small_cluster: Inputs) -> None:
    raw = group("rd", [role("router", 1, 1, gpus=0), role("decode", 2, 2, gpus=1, pods=2, required="host")], required="rack", priority=3)
    objects = KUEUE.render(typed(raw), small_cluster.topologies["default"], small_cluster.nodes, raw)
    assert {o["kind"] for o in objects} == {"Topology", "PriorityClass", "Workload", "Pod"}
    assert_valid(objects)
    spoiled = next(o for o in objects if o["kind"] == "Workload")
    spoiled["spec"]["podSets"][0]["topologyRequest"]["notAField"] = "x"
    with pytest.raises(AssertionError):
        assert_valid([spoiled])
