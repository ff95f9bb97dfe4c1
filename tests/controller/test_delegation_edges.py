"""Delegated groups at their edges (issue 27): what a server default, a stale condition, a
hand-over whose new replicas take the indexes the old ones left, a gang create that fails,
a name two groups could share, a queue longer than the step timeout, a memo across passes
and more than the listed units do to a delegated group. Each was a defect once."""

from __future__ import annotations

import copy
from typing import Any

from support.builders import group, role
from support.controller_world import kubelet
from support.delegated_world import Served, delegated_store, toy_scheduler
from tandem.api.naming import ADMITTED, BACKEND_LABEL
from tandem.backends.delegated_kinds import DELEGATED_KINDS
from tandem.cluster.memory import MemoryStore
from tandem.controller import DelegationSettings, reconcile
from tandem.controller.memo import Memo

ALL = DelegationSettings(backends=tuple(DELEGATED_KINDS))
KUEUE_WL = "Workload.kueue.x-k8s.io"
VOLCANO_PG = "PodGroup.scheduling.volcano.sh"
KAI_PG = "PodGroup.scheduling.run.ai"


def _group(backend: str, prefill: int = 2, decode: int = 1, minimum=(1, 1), name: str = "llama", **kw: Any) -> dict[str, Any]:
    g = group(name, [role("prefill", prefill, minimum[0], gpus=8), role("decode", decode, minimum[1], gpus=8, pods=2)], **kw)
    g["spec"]["scheduler"] = {"backend": backend}
    return g


def _stored(store: MemoryStore, name: str = "llama") -> dict[str, Any]:
    return store.get("InferenceGroup", "serving", name)


def test_a_kueue_workload_defaulted_by_the_api_server_is_not_deleted_again_and_again():
    """Kueue's Workload CRD (v1beta2) defaults spec.active to true; the stored Workload then
    differs from the rendered one, and tandem must not delete it for that."""
    store = delegated_store(_group("kueue"))
    reconcile(store, 0.0, delegation=ALL)
    (workload,) = store.list(KUEUE_WL)
    workload["spec"]["active"] = True  # what the API server stores (CRD default)
    store.update(workload)
    report = reconcile(store, 1.0, delegation=ALL)
    assert not [c for c in report.changes if "delete" in str(c).lower() and "Workload" in str(c)], report.changes
    assert store.list(KUEUE_WL), "the Workload Kueue must admit was deleted for a field the API server defaulted"


def _pass(world, store, now, hold=()):
    reconcile(world, now, delegation=ALL)
    kubelet(store)
    toy_scheduler(store, hold)


def _live(store):
    return [p for p in store.list("Pod") if not p["metadata"].get("deletionTimestamp")]


def _gangs(store):
    return {key: sorted(o["metadata"]["name"] for o in store.list(key)) for kinds in DELEGATED_KINDS.values() for key in (k.key for k in kinds) if store.list(key)}


def _switch(store, backend):
    raw = _stored(store)
    raw["spec"]["scheduler"] = {"backend": backend}
    store.update(raw)


import pytest


@pytest.mark.parametrize("path", [("volcano", "native"), ("native", "volcano"), ("volcano", "kai", "volcano"), ("volcano", "native", "volcano"),
                                  ("native", "kai", "native"), ("kueue", "volcano"), ("workload-api", "native"), ("volcano", "workload-api", "kai")])
def test_a_hand_over_and_back_leaves_nothing_behind(path):
    store = delegated_store(_group(path[0], replicas=2))
    now = 0.0
    for _ in range(30):
        _pass(store, store, now); now += 1
    for step, backend in enumerate(path[1:]):
        _switch(store, backend)
        for _ in range(3 if step < len(path) - 2 else 80):  # switch again mid-way, then let it finish
            _pass(store, store, now); now += 1
    final = path[-1]
    pods = _live(store)
    assert {p["metadata"]["labels"].get(BACKEND_LABEL, "native") for p in pods} == {final}
    gangs = _gangs(store)
    if final == "native":
        assert gangs == {}, gangs
    else:
        assert set(gangs) <= {k.key for k in DELEGATED_KINDS[final]}, gangs
    assert _stored(store)["status"]["state"] == "Ready", _stored(store)["status"]


@pytest.mark.parametrize("to", ["kai", "native", "workload-api"])
def test_a_hand_over_the_new_scheduler_never_serves_then_undone(to):
    store = delegated_store(_group("volcano", replicas=2))
    now = 0.0
    for _ in range(30):
        _pass(store, store, now); now += 1
    _switch(store, to)
    for _ in range(6):
        _pass(store, store, now, hold=(to,)); now += 1
    _switch(store, "volcano")
    for _ in range(60):
        _pass(store, store, now); now += 1
    assert {p["metadata"]["labels"].get(BACKEND_LABEL, "native") for p in _live(store)} == {"volcano"}
    assert set(_gangs(store)) == {VOLCANO_PG}, _gangs(store)
    assert _stored(store)["status"]["state"] == "Ready"


def test_a_waiting_unit_beyond_the_listed_words_gets_no_warning_every_pass():
    """Over LISTED_UNITS units waiting, the units beyond keep no words in the status; the
    scheduler's unchanged words must not be told again each pass."""
    g = group("big", [role("prefill", 1, 1, gpus=1)], replicas=103)
    g["spec"]["scheduler"] = {"backend": "volcano"}
    store = delegated_store(g)
    memo = Memo()
    reconcile(store, 0.0, delegation=ALL, memo=memo)
    for pg in store.list(VOLCANO_PG):
        pg["status"] = {"phase": "Pending", "conditions": [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": "queue full"}]}
        store.update_status(pg)
    counts = []
    for now in range(1, 6):
        reconcile(store, float(now), delegation=ALL, memo=memo)
        counts.append(sum(e.get("count", 1) for e in store.list("Event") if e["reason"] == "Unschedulable"))
    assert counts[-1] == counts[1], f"Unschedulable events keep coming: {counts}"


class _FailingGangCreates:
    """The store, whose creates of `kind` fail (the API server down for that CRD, a 5xx)."""

    def __init__(self, store, kind):
        self.store, self.kind = store, kind

    def create(self, obj):
        from tandem.errors import InternalError
        if f"{obj['kind']}.{obj['apiVersion'].rpartition('/')[0]}" == self.kind:
            raise InternalError("injected")
        return self.store.create(obj)

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_pods_are_not_handed_to_the_scheduler_when_their_gang_object_could_not_be_made():
    store = delegated_store(_group("volcano"))
    reconcile(_FailingGangCreates(store, VOLCANO_PG), 0.0, delegation=ALL)
    assert store.list(VOLCANO_PG) == []
    handed = [p["metadata"]["name"] for p in store.list("Pod") if not p["spec"].get("schedulingGates")]
    assert handed == [], f"ungated pods whose PodGroup does not exist: {handed}"


def _kueue_admits(store):
    """Kueue's part, crudely: a pod whose Workload exists loses Kueue's admission gate."""
    present = {w["metadata"]["name"] for w in store.list(KUEUE_WL)}
    for pod in store.list("Pod"):
        gates = pod["spec"].get("schedulingGates") or []
        wl = pod["metadata"]["labels"].get("kueue.x-k8s.io/prebuilt-workload-name")
        if wl in present and any(g["name"] == "kueue.x-k8s.io/admission" for g in gates):
            kept = [g for g in gates if g["name"] != "kueue.x-k8s.io/admission"]
            store.patch("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"], {"spec": {"schedulingGates": kept or None}})


def test_two_groups_gang_objects_never_share_a_name():
    """Kueue names a unit's base Workload `<group>-<unit>` and an extra replica's
    `<group>-<unit>-<role>-<replica>`: group `llama-0-prefill`'s unit 1 and group `llama`'s
    prefill replica 1 of unit 0 are both `llama-0-prefill-1`."""
    a = _group("kueue", prefill=2, decode=1, minimum=(1, 1))  # prefill replica 1 is an extra: its own Workload
    b = _group("kueue", prefill=1, decode=1, minimum=(1, 1), name="llama-0-prefill", replicas=2)
    store = delegated_store(a, b)
    for now in range(30):
        reconcile(store, float(now), delegation=ALL)
        _kueue_admits(store)
        kubelet(store)
        toy_scheduler(store)
    names = sorted(w["metadata"]["name"] for w in store.list(KUEUE_WL))
    owners = {}
    for pod in store.list("Pod"):
        wl = pod["metadata"]["labels"].get("kueue.x-k8s.io/prebuilt-workload-name")
        owners.setdefault(wl, set()).add(pod["metadata"]["labels"]["tandem.dev/group"])
    shared = {wl: groups for wl, groups in owners.items() if len(groups) > 1}
    assert not shared, f"pods of two groups join one Workload: {shared} (Workloads: {names})"


def test_with_a_memo_a_settled_delegated_group_hears_its_scheduler_and_its_crds():
    store = delegated_store(_group("volcano"))
    world = Served(store, {VOLCANO_PG, "PriorityClass"})
    memo = Memo()
    now = 0.0
    for _ in range(3):  # the scheduler holds: the unit waits
        reconcile(world, now, delegation=ALL, memo=memo); now += 1
    assert memo.settled, "settled while it waits"
    (pg,) = store.list(VOLCANO_PG)
    pg["status"] = {"phase": "Pending", "conditions": [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": "no room"}]}
    store.update_status(pg)
    reconcile(world, now, delegation=ALL, memo=memo); now += 1
    assert _stored(store)["status"]["units"][0]["state"] == "Unschedulable"
    world.kinds = frozenset()  # the CRD goes (its objects with it)
    for obj in store.list(VOLCANO_PG):
        store.delete(VOLCANO_PG, obj["metadata"]["namespace"], obj["metadata"]["name"])
    pods = sorted(p["metadata"]["name"] for p in store.list("Pod"))
    for _ in range(3):
        reconcile(world, now, delegation=ALL, memo=memo); now += 1
    accepted = next(c for c in _stored(store)["status"]["conditions"] if c["type"] == "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "BackendNotServed")
    assert sorted(p["metadata"]["name"] for p in store.list("Pod")) == pods, "its pods are left alone"
    world.kinds = frozenset({VOLCANO_PG, "PriorityClass"})
    for _ in range(30):
        reconcile(world, now, delegation=ALL, memo=memo); kubelet(store); toy_scheduler(store); now += 1
    assert store.list(VOLCANO_PG), "its PodGroup is made again"
    assert _stored(store)["status"]["state"] == "Ready"
    assert next(c for c in _stored(store)["status"]["conditions"] if c["type"] == "Accepted")["status"] == "True"


def standins(store: MemoryStore, now: float) -> bool:
    """The repository's scheduler stand-ins (tandem.schedulers), as the local API server runs them."""
    from tandem.schedulers.apply import apply_decision
    from tandem.schedulers.run import schedule
    from tandem.schedulers.shared import World
    world = World(pods=store.list("Pod"), nodes=store.list("Node"),
                  gangs={b: [o for k in DELEGATED_KINDS[b] for o in store.list(k.key)] for b in DELEGATED_KINDS}, now=now)
    wrote = apply_decision(store, schedule(world)) | bool(kubelet(store))
    for pod in store.list("Pod"):
        if pod["spec"].get("nodeName") and (pod.get("status") or {}).get("phase") != "Running":
            pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            store.update_status(pod)
            wrote = True
    return wrote


@pytest.mark.parametrize("first,to", [("volcano", "kai"), ("native", "kai"), ("kai", "kai"), ("volcano", "workload-api"), ("kai", "koordinator"), ("kai", "volcano")])
def test_a_rolling_update_to_kai_is_placed_by_kais_gang_rules(first, to):
    """After an update the new replicas take the lowest indexes the old ones left free
    (replica 1 beside an old replica 0); the KAI PodGroup must not ask for pods of leaf
    `prefill.0`, which no KAI pod is in."""
    g = _group(first, prefill=1, decode=1, minimum=(1, 1))
    store = delegated_store(g, shape="block=1,rack=1,host=8")
    now = 0.0
    for _ in range(20):
        reconcile(store, now, delegation=ALL); standins(store, now); now += 1
    assert _stored(store)["status"]["state"] == "Ready"
    raw = _stored(store)
    raw["spec"]["scheduler"] = {"backend": to}
    raw["spec"]["roles"][0]["template"]["metadata"] = {"annotations": {"changed": "yes"}}  # a new revision either way
    store.update(raw)
    for _ in range(40):
        reconcile(store, now, delegation=ALL); standins(store, now); now += 1
    pods = _live(store)
    assert {p["metadata"]["labels"][BACKEND_LABEL] for p in pods} == {to}, [(p["metadata"]["name"], p["metadata"]["labels"][BACKEND_LABEL], p["spec"].get("nodeName")) for p in pods]
    assert _stored(store)["status"]["state"] == "Ready"


def test_a_volcano_unschedulable_condition_left_beside_a_later_scheduled_one_is_not_read_as_a_refusal():
    """Volcano keeps each PodGroup condition per type: once placed, an old `Unschedulable`
    True stays beside a newer `Scheduled` True (session.go UpdatePodGroupCondition; the
    stand-in imitates it). A later scale-up must not be called Unschedulable in those old words."""
    g = _group("volcano", prefill=1, decode=1, minimum=(1, 1))
    store = delegated_store(g)
    now = 0.0
    for _ in range(20):
        reconcile(store, now, delegation=ALL); kubelet(store); toy_scheduler(store); now += 1
    (pg,) = store.list(VOLCANO_PG)
    pg["status"] = {"phase": "Running", "conditions": [
        {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": "3/3 tasks in gang unschedulable: old news",
         "transitionID": "1", "lastTransitionTime": "1970-01-01T00:00:01Z"},
        {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled", "transitionID": "2",
         "lastTransitionTime": "1970-01-01T00:00:05Z"}]}
    store.update(pg)
    raw = _stored(store)
    raw["spec"]["roles"][0]["replicas"] = 2  # one more prefill replica; Volcano has not got to it yet
    store.update(raw)
    for _ in range(3):
        reconcile(store, now, delegation=ALL); now += 1
    unit = _stored(store)["status"]["units"][0]
    assert unit["state"] != "Unschedulable", unit
    assert not [e for e in store.list("Event") if e["reason"] == "Unschedulable"]


@pytest.mark.parametrize("backend,key", [("kueue", KUEUE_WL), ("volcano", VOLCANO_PG)])
def test_a_unit_queued_by_its_scheduler_keeps_its_place_in_the_queue(backend, key):
    """A delegated unit that waits in its scheduler's queue (Kueue QuotaReserved False,
    Volcano Inqueue) past the step timeout: its gang object, whose creation time is its
    place in the queue, should not be deleted and made anew."""
    g = _group(backend)
    g["spec"]["coordination"] = {"rollout": {"stepTimeoutSeconds": 60}}
    store = delegated_store(g)
    reconcile(store, 0.0, delegation=ALL)
    (gang,) = store.list(key)
    first = gang["metadata"]["uid"]
    for now in range(1, 400, 5):
        for obj in store.list(key):
            obj["status"] = {"phase": "Inqueue", "conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "insufficient unused quota"}]}
            store.update_status(obj) if store.has_status(key) else store.update(obj)
        reconcile(store, float(now), delegation=ALL)
    uids = [o["metadata"]["uid"] for o in store.list(key)]
    assert uids == [first], f"the queued gang was made anew: {uids} (first {first}); unit: {_stored(store)['status']['units'][0]['reason']}"
