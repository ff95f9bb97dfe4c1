"""Provisioning (issue 25, item 8): the pure decision (`controller/provisioning.py`) and the
pass that carries it (`reconcile` over the memory store, with the toy kubelet).

A unit the engine could not place asks for its missing minimum with one ProvisioningRequest;
a failure is reported once and retried after a backoff; the request goes when the minimum is
bound, when the unit goes, or when provisioning is off; nothing at all without the option.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings, strategies as st

from support.builders import cluster, group, role
from support.fuzz import examples
from support.controller_world import kubelet
from tandem.api.loading import load_texts
from tandem.api.naming import GROUP_LABEL, UNIT_LABEL
from tandem.api.resources import InferenceGroup
from tandem.api.timestamps import rfc3339
from tandem.cluster.memory import MemoryStore
from tandem.controller import ProvisioningSettings, reconcile
from tandem.cluster.writes import RecordEvent
from tandem.controller.actions import CreateObject, DeleteObject, PatchObject
from tandem.controller.provisioning import (
    ATOMIC_SCALE_UP,
    ATTEMPT_LABEL,
    REPORTED_ANNOTATION,
    UnitNeed,
    backoff_seconds,
    plan_provisioning,
)

ON = ProvisioningSettings(enabled=True, default_class=ATOMIC_SCALE_UP)
NOW = 10_000.0


def _group(replicas: int = 2) -> tuple[dict[str, Any], InferenceGroup]:
    raw = group("llama", [role("prefill", 2, 1, gpus=8), role("decode", 1, 1, gpus=8, pods=3)], replicas=replicas, required="rack")
    raw["spec"]["roles"][1]["workerTemplate"] = {"spec": {"containers": [{"name": "worker", "image": "vllm-w", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}
    raw["metadata"]["uid"] = "g-1"
    import json

    typed = load_texts([("g", json.dumps(raw))]).groups[0]
    return raw, typed


def _need(index: int, unschedulable: bool = True, waiting: bool = True, prefill: int = 1, decode: int = 1) -> UnitNeed:
    return UnitNeed(index, unschedulable, waiting, (("prefill", prefill), ("decode", decode)))


def _made(plan: Any, kind: str) -> list[dict[str, Any]]:
    return [a.obj for a in plan.actions if isinstance(a, CreateObject) and a.obj["kind"] == kind]


def _existing(plan: Any) -> list[dict[str, Any]]:
    """What the plan created, as the API would hold it (uids, no status)."""
    out = []
    for i, obj in enumerate(_made(plan, "PodTemplate") + _made(plan, "ProvisioningRequest")):
        obj = copy.deepcopy(obj)
        obj["metadata"]["uid"] = f"u-{i}"
        out.append(obj)
    return out


def _with_condition(request: dict[str, Any], kind: str, status: str = "True", at: float = NOW, reason: str = "Why", message: str = "") -> dict[str, Any]:
    request = copy.deepcopy(request)
    request.setdefault("status", {}).setdefault("conditions", []).append(
        {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": rfc3339(at)}
    )
    return request


def test_a_unit_that_does_not_fit_gets_one_request_for_its_minimum_with_its_templates_first():
    raw, typed = _group()
    plan = plan_provisioning(raw, typed, [_need(0), _need(1, unschedulable=False, waiting=False, prefill=0, decode=0)], [], ON, NOW)
    kinds = [a.obj["kind"] for a in plan.actions if isinstance(a, CreateObject)]
    assert kinds == ["PodTemplate", "PodTemplate", "PodTemplate", "ProvisioningRequest"], "the templates before the request that names them"
    request = _made(plan, "ProvisioningRequest")[0]
    assert request["apiVersion"] == "autoscaling.x-k8s.io/v1"
    assert request["metadata"]["name"] == "llama-0-provision-1"
    assert request["metadata"]["labels"] == {GROUP_LABEL: "llama", UNIT_LABEL: "0", ATTEMPT_LABEL: "1"}
    assert request["metadata"]["ownerReferences"][0]["uid"] == "g-1"
    assert request["spec"] == {
        "provisioningClassName": ATOMIC_SCALE_UP,
        "podSets": [
            {"podTemplateRef": {"name": "llama-0-provision-1.prefill"}, "count": 1},
            {"podTemplateRef": {"name": "llama-0-provision-1.decode"}, "count": 1},
            {"podTemplateRef": {"name": "llama-0-provision-1.decode.workers"}, "count": 2},
        ],
    }
    workers = next(t for t in _made(plan, "PodTemplate") if t["metadata"]["name"].endswith(".workers"))
    assert workers["template"]["spec"]["containers"][0]["image"] == "vllm-w"
    assert workers["template"]["metadata"]["labels"][GROUP_LABEL] == "llama"
    assert [e.reason for e in plan.actions if isinstance(e, RecordEvent)] == ["ProvisioningRequestCreated"]
    assert plan.reasons[0].startswith("waiting for nodes: ProvisioningRequest llama-0-provision-1")
    assert 1 not in plan.reasons


def test_nothing_is_made_when_provisioning_is_off_and_a_group_naming_a_class_is_told_why():
    raw, typed = _group()
    assert plan_provisioning(raw, typed, [_need(0)], [], ProvisioningSettings(), NOW).actions == []
    raw["spec"]["scheduler"] = {"provisioningClassName": ATOMIC_SCALE_UP}
    typed = typed.model_copy(update={"spec": typed.spec.model_copy(update={"scheduler": typed.spec.scheduler.model_copy(update={"provisioning_class_name": ATOMIC_SCALE_UP})})})
    plan = plan_provisioning(raw, typed, [_need(0)], [], ProvisioningSettings(), NOW)
    assert plan.actions == [] and "--provisioning" in plan.reasons[0]
    assert plan_provisioning(raw, typed, [_need(0)], [], ProvisioningSettings(enabled=True), NOW).actions, "on, with the group's own class"


def test_a_request_is_kept_while_pending_and_goes_with_its_templates_once_the_minimum_is_bound():
    raw, typed = _group()
    existing = _existing(plan_provisioning(raw, typed, [_need(0)], [], ON, NOW))
    waiting = plan_provisioning(raw, typed, [_need(0, unschedulable=False)], existing, ON, NOW + 5)
    assert waiting.actions == [] and "waiting for the autoscaler" in waiting.reasons[0]
    provisioned = [_with_condition(o, "Provisioned", message="3 nodes") if o["kind"] == "ProvisioningRequest" else o for o in existing]
    assert "Provisioned: 3 nodes" in plan_provisioning(raw, typed, [_need(0)], provisioned, ON, NOW + 5).reasons[0]
    placed_now = plan_provisioning(raw, typed, [_need(0, unschedulable=False, waiting=False)], provisioned, ON, NOW + 6)
    assert placed_now.actions == [], "placed but not bound yet: the booking is kept"
    done = plan_provisioning(raw, typed, [_need(0, unschedulable=False, waiting=False, prefill=0, decode=0)], provisioned, ON, NOW + 7)
    assert sorted((a.kind, a.name) for a in done.actions if isinstance(a, DeleteObject)) == [
        ("PodTemplate", "llama-0-provision-1.decode"),
        ("PodTemplate", "llama-0-provision-1.decode.workers"),
        ("PodTemplate", "llama-0-provision-1.prefill"),
        ("ProvisioningRequest", "llama-0-provision-1"),
    ]
    gone = plan_provisioning(raw, typed, [], provisioned, ON, NOW + 7)
    assert any(isinstance(a, DeleteObject) and a.kind == "ProvisioningRequest" for a in gone.actions), "a unit scaled away takes its request"


def test_a_failure_is_reported_once_and_retried_after_the_backoff():
    raw, typed = _group()
    existing = _existing(plan_provisioning(raw, typed, [_need(0)], [], ON, NOW))
    failed = [_with_condition(o, "Failed", at=NOW + 10, reason="CapacityIsNotFound", message="no GPUs") if o["kind"] == "ProvisioningRequest" else o for o in existing]
    first = plan_provisioning(raw, typed, [_need(0, unschedulable=False)], failed, ON, NOW + 11)
    events = [a for a in first.actions if isinstance(a, RecordEvent)]
    assert [(e.type, e.reason) for e in events] == [("Warning", "ProvisioningFailed")] and "CapacityIsNotFound: no GPUs" in events[0].message
    mark = next(a for a in first.actions if isinstance(a, PatchObject)).patch["metadata"]["annotations"][REPORTED_ANNOTATION]
    assert first.deadlines == [NOW + 10 + backoff_seconds(1)]
    assert "next attempt at" in first.reasons[0]
    for request in failed:
        if request["kind"] == "ProvisioningRequest":
            request["metadata"].setdefault("annotations", {})[REPORTED_ANNOTATION] = mark
    again = plan_provisioning(raw, typed, [_need(0, unschedulable=False)], failed, ON, NOW + 12)
    assert again.actions == [], "reported once"
    retry = plan_provisioning(raw, typed, [_need(0, unschedulable=False)], failed, ON, NOW + 10 + backoff_seconds(1))
    assert [(a.kind, a.name) for a in retry.actions if isinstance(a, DeleteObject)][0] == ("ProvisioningRequest", "llama-0-provision-1")
    assert [r["metadata"]["name"] for r in _made(retry, "ProvisioningRequest")] == ["llama-0-provision-2"]
    deleted = {a.name for a in retry.actions if isinstance(a, DeleteObject) and a.kind == "PodTemplate"}
    assert deleted == {"llama-0-provision-1.prefill", "llama-0-provision-1.decode", "llama-0-provision-1.decode.workers"}


def test_a_request_that_no_longer_matches_the_unit_is_replaced_at_once():
    raw, typed = _group()
    existing = _existing(plan_provisioning(raw, typed, [_need(0)], [], ON, NOW))
    fewer = plan_provisioning(raw, typed, [_need(0, unschedulable=False, prefill=0)], existing, ON, NOW + 1)
    assert [r["spec"]["podSets"] for r in _made(fewer, "ProvisioningRequest")] == [[
        {"podTemplateRef": {"name": "llama-0-provision-2.decode"}, "count": 1},
        {"podTemplateRef": {"name": "llama-0-provision-2.decode.workers"}, "count": 2},
    ]]
    assert ("ProvisioningRequest", "llama-0-provision-1") in {(a.kind, a.name) for a in fewer.actions if isinstance(a, DeleteObject)}


def test_the_backoff_doubles_from_a_minute_to_half_an_hour():
    assert [backoff_seconds(n) for n in (1, 2, 3, 6, 7, 100)] == [60, 120, 240, 1800, 1800, 1800]


needs = st.lists(
    st.tuples(st.booleans(), st.booleans(), st.integers(0, 2), st.integers(0, 1)), min_size=0, max_size=4
).map(lambda rows: [UnitNeed(i, u, w, (("prefill", p), ("decode", d))) for i, (u, w, p, d) in enumerate(rows)])
conditions = st.sampled_from([None, "Accepted", "Provisioned", "Failed", "BookingExpired", "CapacityRevoked"])


@settings(max_examples=examples(150), deadline=None)
@given(needs, st.lists(conditions, max_size=4), st.floats(0, 4000), st.booleans())
def test_every_unit_ends_with_at_most_one_request_and_only_while_it_needs_nodes(units, states, later, enabled):
    """Whatever the units and their requests' conditions: after the plan, a unit holds at most
    one request (none once its minimum is bound or it is gone), each request's templates exist
    and are made before it, a new request only for a unit that waits, and nothing when off."""
    raw, typed = _group(replicas=4)
    start = plan_provisioning(raw, typed, [UnitNeed(i, True, True, (("prefill", 1), ("decode", 1))) for i in range(4)], [], ON, NOW)
    existing = []
    for obj in _existing(start):
        index = int(obj["metadata"]["labels"][UNIT_LABEL])
        state = states[index] if index < len(states) else None
        existing.append(_with_condition(obj, state, at=NOW) if obj["kind"] == "ProvisioningRequest" and state else obj)
    settings_ = ON if enabled else ProvisioningSettings()
    plan = plan_provisioning(raw, typed, units, existing, settings_, NOW + later)
    if not enabled:
        assert plan.actions == []
        return
    live = {(o["kind"], o["metadata"]["name"]): o for o in existing}
    for action in plan.actions:
        if isinstance(action, CreateObject):
            meta = action.obj["metadata"]
            if action.obj["kind"] == "ProvisioningRequest":
                for pod_set in action.obj["spec"]["podSets"]:
                    assert ("PodTemplate", pod_set["podTemplateRef"]["name"]) in live, "its templates exist before it"
                    assert pod_set["count"] >= 1
            assert (action.obj["kind"], meta["name"]) not in live, "never made twice"
            live[(action.obj["kind"], meta["name"])] = action.obj
        elif isinstance(action, DeleteObject):
            assert (action.kind, action.name) in live
            del live[(action.kind, action.name)]
    by_unit: dict[int, list[str]] = {}
    for (kind, name), obj in live.items():
        if kind == "ProvisioningRequest":
            by_unit.setdefault(int(obj["metadata"]["labels"][UNIT_LABEL]), []).append(name)
    needed = {u.index: u for u in units}
    for index, names in by_unit.items():
        assert len(names) == 1, f"unit {index} holds {names}"
        assert index in needed and not needed[index].placed, f"unit {index} holds a request it does not need"
    for (kind, name), obj in live.items():
        if kind == "PodTemplate":
            assert any(
                k == "ProvisioningRequest" and any(s["podTemplateRef"]["name"] == name for s in r["spec"]["podSets"]) for (k, _), r in live.items()
            ), f"template {name} outlives its request"
    made = {int(a.obj["metadata"]["labels"][UNIT_LABEL]) for a in plan.actions if isinstance(a, CreateObject) and a.obj["kind"] == "ProvisioningRequest"}
    assert all(needed[i].waiting or needed[i].unschedulable for i in made), "a request only for a unit still waiting"


# ----------------------------------------------------------------------------- the pass


def _store(gpus_free_nodes: int = 1) -> MemoryStore:
    store = MemoryStore()
    store.register_kind("ProvisioningRequest", cluster_scoped=False, status=True)
    for obj in cluster(f"rack=1,host={gpus_free_nodes}"):
        store.create(obj)
    store.create(group("short", [role("prefill", 1, 1, gpus=8), role("decode", 1, 1, gpus=8, pods=2)], required="rack"))
    return store


def _passes(store: MemoryStore, start: float, count: int, provisioning: ProvisioningSettings) -> float:
    now = start
    for _ in range(count):
        reconcile(store, now, provisioning=provisioning)
        kubelet(store)
        now += 1.0
    return now


def test_the_pass_asks_for_nodes_and_places_the_unit_when_they_come():
    store = _store()
    now = _passes(store, 0.0, 3, ON)
    [request] = store.list("ProvisioningRequest", "serving")
    assert [(s["podTemplateRef"]["name"], s["count"]) for s in request["spec"]["podSets"]] == [
        ("short-0-provision-1.prefill", 1), ("short-0-provision-1.decode", 2)], "no workerTemplate: leader and worker are one pod set"
    assert len(store.list("PodTemplate", "serving")) == 2
    unit = store.get("InferenceGroup", "serving", "short")["status"]["units"][0]
    assert "ProvisioningRequest short-0-provision-1" in unit["reason"]
    for i in range(3):  # the autoscaler's nodes arrive, in a rack of their own
        store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"new-{i}", "labels": {"network.tandem.dev/rack": "new", "kubernetes.io/hostname": f"new-{i}"}},
                      "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}})
    store.patch_status("ProvisioningRequest", "serving", request["metadata"]["name"], {"status": {"conditions": [
        {"type": "Provisioned", "status": "True", "reason": "Provisioned", "message": "", "lastTransitionTime": rfc3339(now)}]}})
    _passes(store, now, 4, ON)
    pods = store.list("Pod", "serving")
    assert len(pods) == 3 and {p["spec"].get("nodeName") for p in pods} == {"new-0", "new-1", "new-2"}
    assert store.list("ProvisioningRequest", "serving") == [] and store.list("PodTemplate", "serving") == []
    assert "ProvisioningRequest" not in store.get("InferenceGroup", "serving", "short")["status"]["units"][0].get("reason", "")


def test_the_pass_makes_nothing_by_default():
    store = _store()
    _passes(store, 0.0, 4, ProvisioningSettings())
    assert store.list("ProvisioningRequest") == [] and store.list("PodTemplate") == []
    # one node of 8 GPUs could never hold the unit's 24: without provisioning it is not created (NeverFits)
    assert any(e["reason"] == "NeverFits" for e in store.list("Event", "serving")), "the unit does not fit"
