"""Kueue: a unit's minimums are one base pod group and each extra replica a pod group of its own,
so a unit starts at its minimums and grows replica by replica, though Kueue admits a Workload
whole and never changes its PodSets."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st
import pytest

from support.builders import group, role
from support.fuzz import examples
from tandem.api.loading import Inputs
from tandem.backends.base import Approximate, Full, step_view
from tandem.backends.pods import unit_pods
from tandem.backends.registry import get_backend

from backends.readback import group_offsets, rank
from backends.schemas import SCHEMAS, SKIP_REASON, assert_valid
from backends.variants import typed

KUEUE = get_backend("kueue")
PREFIX = "kueue.x-k8s.io/"
GATE = {"name": PREFIX + "admission"}


def _split(objects: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """(Workloads by name, Pods)."""
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "Workload"}, [o for o in objects if o["kind"] == "Pod"]


def _counts(workload: dict[str, Any]) -> list[tuple[str, int]]:
    return [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]]


def _members(pods: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Pod group name -> its pods' names."""
    out: dict[str, list[str]] = {}
    for pod in pods:
        out.setdefault(pod["metadata"]["labels"][PREFIX + "pod-group-name"], []).append(pod["metadata"]["name"])
    return out


def test_minimums_are_the_base_pod_group_and_each_extra_replica_its_own() -> None:
    raw = group("g", [role("prefill", 3, 1, gpus=1), role("decode", 2, 2, gpus=1, pods=2)])
    grp = typed(raw)
    assert KUEUE.validate(grp) == []  # per-role minimums below the target are no longer refused
    workloads, pods = _split(KUEUE.render(grp, None, (), raw))
    assert list(workloads) == ["g-0", "g-0-prefill-1", "g-0-prefill-2"]
    assert _counts(workloads["g-0"]) == [("decode", 4), ("prefill", 1)]
    assert _counts(workloads["g-0-prefill-1"]) == _counts(workloads["g-0-prefill-2"]) == [("prefill", 1)]
    assert workloads["g-0-prefill-2"]["metadata"]["labels"] == {
        "tandem.dev/group": "g", "tandem.dev/replica": "2", "tandem.dev/role": "prefill", "tandem.dev/unit": "0"
    }
    assert _members(pods) == {
        "g-0": ["g-0-prefill-0-0", "g-0-decode-0-0", "g-0-decode-0-1", "g-0-decode-1-0", "g-0-decode-1-1"],
        "g-0-prefill-1": ["g-0-prefill-1-0"],
        "g-0-prefill-2": ["g-0-prefill-2-0"],
    }
    for pod in pods:
        labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
        name = labels[PREFIX + "pod-group-name"]
        assert labels[PREFIX + "prebuilt-workload-name"] == name
        assert annotations[PREFIX + "pod-group-total-count"] == str(sum(count for _, count in _counts(workloads[name])))
        assert pod["spec"]["schedulingGates"] == [GATE]
    # Ranks restart in each pod group: each extra's one pod is 0.
    assert {pod["metadata"]["name"]: rank(pod) for pod in pods if pod["metadata"]["labels"]["tandem.dev/role"] == "prefill"} == {
        "g-0-prefill-0-0": 0, "g-0-prefill-1-0": 0, "g-0-prefill-2-0": 0
    }


def test_a_role_without_a_minimum_is_not_in_the_base_and_a_unit_without_minimums_has_none() -> None:
    raw = group("r", [role("router", 1, 1, gpus=0), role("decode", 2, 0, gpus=1, pods=2)])
    workloads, _ = _split(KUEUE.render(typed(raw), None, (), raw))
    assert {name: _counts(w) for name, w in workloads.items()} == {
        "r-0": [("router", 1)],
        "r-0-decode-0": [("decode", 2)],
        "r-0-decode-1": [("decode", 2)],
    }
    none = group("n", [role("decode", 2, 0, gpus=1)], replicas=2)
    workloads, pods = _split(KUEUE.render(typed(none), None, (), none))
    assert list(workloads) == ["n-0-decode-0", "n-0-decode-1", "n-1-decode-0", "n-1-decode-1"]
    assert all(pod["metadata"]["annotations"][PREFIX + "pod-group-total-count"] == "1" for pod in pods)


def test_an_extra_with_its_own_worker_template_is_a_leader_and_workers_of_its_own(small_cluster: Inputs) -> None:
    raw = group("lw", [role("decode", 2, 1, gpus=1, pods=3)], preferred="rack")
    raw["spec"]["roles"][0]["workerTemplate"] = {"spec": {"containers": [{"name": "w", "image": "vllm"}]}}
    workloads, pods = _split(KUEUE.render(typed(raw), small_cluster.topologies["default"], (), raw))
    assert {name: _counts(w) for name, w in workloads.items()} == {
        "lw-0": [("decode", 1), ("decode-workers", 2)],
        "lw-0-decode-1": [("decode", 1), ("decode-workers", 2)],
    }
    for name, workload in workloads.items():
        assert {ps["topologyRequest"]["podSetGroupName"] for ps in workload["spec"]["podSets"]} == {name}
    extra = {p["metadata"]["labels"]["tandem.dev/pod-index"]: rank(p) for p in pods if p["metadata"]["labels"]["tandem.dev/replica"] == "1"}
    assert extra == {"0": 0, "1": 1, "2": 2}  # leader 0, workers after it, restarting in the extra's group


def test_the_admission_warning_says_what_kueue_makes_of_minimums_before_extras(small_cluster: Inputs) -> None:
    topology = small_cluster.topologies["default"]
    support = KUEUE.capabilities()["minimums-before-extras"]
    assert isinstance(support, Approximate)
    for words in ("base pod group", "admitted whole", "each extra replica is its own pod group admitted separately",
                  "orders them by its queue", "cannot keep an extra in the base's domain"):
        assert words in support.warning
    assert isinstance(KUEUE.capabilities()["role-minimums"], Full)
    raw = group("w", [role("router", 1, 1, gpus=0), role("decode", 3, 1, gpus=1, pods=2)], required="rack")
    warnings = {w.path: w.message for w in KUEUE.warnings(typed(raw), topology)}
    assert support.warning in warnings["spec.roles[1].replicas"]
    # The unit's required pack holds the base; each extra is packed at that level on its own.
    assert "cannot keep an extra in the base's domain" in warnings["spec.topology.pack.required"]
    workloads, _ = _split(KUEUE.render(typed(raw), topology, (), raw))
    assert [ps["topologyRequest"] for ps in workloads["w-0-decode-2"]["spec"]["podSets"]] == [
        {"required": "network.tandem.dev/rack", "podIndexLabel": PREFIX + "pod-group-pod-index"}
    ]
    whole = group("w", [role("router", 1, 1, gpus=0), role("decode", 3, 3, gpus=1, pods=2)], required="rack")
    assert [w.path for w in KUEUE.warnings(typed(whole), topology)] == []  # no extras: nothing approximated


@pytest.mark.skipif(not SCHEMAS.exists(), reason=SKIP_REASON)
def test_base_and_extra_workloads_validate_against_the_kueue_crd(small_cluster: Inputs) -> None:
    raw = group("rd", [role("router", 1, 1, gpus=0), role("decode", 3, 1, gpus=1, pods=2, required="host")], required="rack", priority=3)
    objects = KUEUE.render(typed(raw), small_cluster.topologies["default"], small_cluster.nodes, raw)
    assert Counter(o["kind"] for o in objects)["Workload"] == 3
    assert_valid(objects)


# ----------------------------------------------------------------------------- the operator's step views


STEP_GROUP = group(
    "st",
    [role("router", 1, 1, gpus=0), role("prefill", 4, 2, gpus=1), role("decode", 3, 1, gpus=1, pods=2, required="host")],
    required="rack",
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    admitted=st.fixed_dictionaries({"router": st.integers(0, 1), "prefill": st.integers(0, 4), "decode": st.integers(0, 3)}),
    holes=st.fixed_dictionaries({"router": st.just(0), "prefill": st.integers(0, 2), "decode": st.integers(0, 1)}),
)
def test_each_step_views_pods_join_exactly_the_workloads_rendered_for_it(
    small_cluster: Inputs, admitted: dict[str, int], holes: dict[str, int]
) -> None:
    """What the operator does per unit: `unit_objects(step_view(...))` and `prepare_pod` with the
    same view. Every pod names a Workload rendered for it, which counts exactly its pods: the base
    holds each role's admitted minimum, every other admitted index (up to the extent) an extra."""
    topology = small_cluster.topologies["default"]
    target = typed(STEP_GROUP)
    extent = {name: count + holes[name] if count else 0 for name, count in admitted.items()}
    extent = {name: min(reach, target.role(name).replicas) for name, reach in extent.items()}
    view = step_view(target, admitted, extent)
    workloads = {w["metadata"]["name"]: w for w in KUEUE.unit_objects(view, topology, 1, STEP_GROUP)}
    pods = [KUEUE.prepare_pod(pod, view, topology) for pod in unit_pods(view, 1, STEP_GROUP)]
    members = _members(pods)
    assert set(members) == set(workloads)
    for name, workload in workloads.items():
        in_group = [p for p in pods if p["metadata"]["labels"][PREFIX + "pod-group-name"] == name]
        assert sum(count for _, count in _counts(workload)) == len(in_group)
        assert {p["metadata"]["annotations"][PREFIX + "pod-group-total-count"] for p in in_group} == {str(len(in_group))}
        offsets = group_offsets(workload["spec"]["podSets"])
        for podset, count in _counts(workload):  # ranks restart in each Workload's PodSets, below the total count
            ranks = sorted(rank(p) - offsets[podset] for p in in_group if p["metadata"]["annotations"][PREFIX + "role-hash"] == podset)
            assert ranks == list(range(count))
        assert all(rank(p) < len(in_group) for p in in_group)
    base = workloads.get("st-1")
    minimums = {r.name: min(r.minimum, admitted[r.name]) for r in target.spec.roles}
    assert (base is not None) == any(minimums.values())
    if base is not None:
        assert dict(_counts(base)) == {name: count * target.role(name).pods_per_replica for name, count in minimums.items() if count}
    extras = sorted(name for name in workloads if name != "st-1")
    assert extras == sorted(f"st-1-{name}-{i}" for name in admitted for i in range(minimums[name], extent[name]))
    if SCHEMAS.exists():
        assert_valid(list(workloads.values()) + pods)
