"""Delegated groups (issue 27): tandem coordinates, the group's scheduler places.

Driven over the memory store with the real pass (`reconcile`), tandem's toy kubelet for
native pods and a toy scheduler for delegated ones (`support.delegated_world`).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from support.builders import group, role
from support.controller_world import kubelet, over_committed
from support.delegated_world import Served, delegated_store, toy_scheduler
from support.fuzz import examples
from tandem.api.naming import ADMITTED, BACKEND_LABEL, GATE, HOSTNAME_LABEL, REVISION_LABEL
from tandem.backends.delegated_kinds import DELEGATED_KINDS
from tandem.cluster.memory import MemoryStore
from tandem.controller import DelegationSettings, reconcile

ALL = DelegationSettings(backends=tuple(DELEGATED_KINDS))
VOLCANO_PODGROUP = "PodGroup.scheduling.volcano.sh"
KAI_PODGROUP = "PodGroup.scheduling.run.ai"


def _group(backend: str, prefill: int = 2, decode: int = 1, minimum: tuple[int, int] | None = (1, 1), name: str = "llama", **kw: Any) -> dict[str, Any]:
    g = group(name, [role("prefill", prefill, None if minimum is None else minimum[0], gpus=8), role("decode", decode, None if minimum is None else minimum[1], gpus=8, pods=2)], **kw)
    g["spec"]["scheduler"] = {"backend": backend}
    return g


def _run(world: Any, store: MemoryStore, now: float = 0.0, passes: int = 30, settings: DelegationSettings = ALL, hold: tuple[str, ...] = ()) -> float:
    for _ in range(passes):
        report = reconcile(world, now, delegation=settings)
        moved = kubelet(store) + toy_scheduler(store, hold)
        now += 1.0
        if moved == 0 and report.writes == 0 and not report.errors:
            break
    return now


def _stored(store: MemoryStore) -> dict[str, Any]:
    return store.get("InferenceGroup", "serving", "llama")


def _condition(store: MemoryStore, kind: str) -> dict[str, Any]:
    return next(c for c in _stored(store)["status"]["conditions"] if c["type"] == kind)


def test_a_volcano_group_gets_its_podgroups_and_pods_made_for_volcano_without_tandems_gate_or_node_choice():
    store = delegated_store(_group("volcano", replicas=2))
    report = reconcile(store, 0.0, delegation=ALL)
    assert not report.errors
    groups = store.list(VOLCANO_PODGROUP)
    assert sorted(g["metadata"]["name"] for g in groups) == ["llama-0", "llama-1"]
    owner = _stored(store)["metadata"]["uid"]
    for podgroup in groups:
        assert [r["uid"] for r in podgroup["metadata"]["ownerReferences"]] == [owner]
        assert podgroup["spec"]["minMember"] == 1 + 2  # the admitted minimum: one prefill pod, one two-pod decode
        assert podgroup["spec"]["queue"] == "default"
    pods = store.list("Pod")
    assert pods
    for pod in pods:
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["metadata"]["labels"][BACKEND_LABEL] == "volcano"
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"].startswith("llama-")
        assert not any(g["name"] == GATE for g in pod["spec"].get("schedulingGates", []))
        assert HOSTNAME_LABEL not in (pod["spec"].get("nodeSelector") or {})
    # the gang objects come before the pods they gather, in one pass
    _run(store, store)
    assert _stored(store)["status"]["state"] == "Ready"
    assert all(p["spec"].get("nodeName") for p in store.list("Pod"))


def test_the_gang_objects_follow_each_admitted_step_not_the_target():
    g = _group("kai", prefill=2, decode=1, minimum=(1, 1))
    g["spec"]["coordination"] = {"scaling": {"maxSkew": 1}}
    store = delegated_store(g)
    now = _run(store, store)
    raw = _stored(store)
    raw["spec"]["roles"][0]["replicas"] = 6
    store.update(raw)
    seen = []
    for _ in range(40):
        reconcile(store, now, delegation=ALL)
        admitted = {p["metadata"]["labels"]["tandem.dev/replica"] for p in store.list("Pod")
                    if p["metadata"]["labels"]["tandem.dev/role"] == "prefill" and (p["metadata"].get("annotations") or {}).get(ADMITTED) == "true"}
        spec = store.list(KAI_PODGROUP)[0]["spec"]
        leaves = {s["name"] for s in spec["subGroups"] if s.get("parent") == "prefill"}
        assert leaves == {f"prefill.{r}" for r in admitted}, "a replica's subgroup exists exactly while coordination admits it"
        assert spec["minMember"] == 1 + 2  # the minimum, never the target
        seen.append(len(leaves))
        toy_scheduler(store)
        now += 1.0
    assert seen[-1] == 6
    assert sorted(set(seen)) == sorted(set(seen), key=seen.index) and len(set(seen)) > 2, f"grew step by step: {seen}"


def test_a_group_naming_a_backend_the_operator_was_not_given_is_not_accepted_and_nothing_is_made():
    store = delegated_store(_group("kai"))
    reconcile(store, 0.0, delegation=DelegationSettings(backends=("volcano",)))
    accepted = _condition(store, "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "BackendNotEnabled")
    assert "--backends kai" in accepted["message"]
    assert store.list("Pod") == [] and store.list(KAI_PODGROUP) == []


def test_a_backend_whose_crds_are_not_served_is_named_and_the_group_waits_until_they_are():
    store = delegated_store(_group("volcano"))
    world = Served(store, ())
    reconcile(world, 0.0, delegation=ALL)
    accepted = _condition(store, "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "BackendNotServed")
    assert "podgroups.scheduling.volcano.sh" in accepted["message"]
    assert store.list("Pod") == []
    world.kinds = frozenset({VOLCANO_PODGROUP})  # the CRD is installed
    _run(world, store, 1.0)
    assert _condition(store, "Accepted")["status"] == "True"
    assert _stored(store)["status"]["state"] == "Ready"


def test_the_schedulers_words_become_the_units_state_the_groups_condition_and_one_event():
    store = delegated_store(_group("volcano"))
    reconcile(store, 0.0, delegation=ALL)
    podgroup = store.list(VOLCANO_PODGROUP)[0]
    said = "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; Pending: 3 Unschedulable"
    podgroup["status"] = {"phase": "Pending", "conditions": [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": said}]}
    store.update_status(podgroup)
    for now in (1.0, 2.0):
        reconcile(store, now, delegation=ALL)
    unit = _stored(store)["status"]["units"][0]
    assert unit["state"] == "Unschedulable" and said in unit["reason"]
    scheduled = _condition(store, "Scheduled")
    assert scheduled["status"] == "False" and said in scheduled["message"]
    warnings = [e for e in store.list("Event") if e["reason"] == "Unschedulable"]
    assert len(warnings) == 1 and warnings[0]["count"] == 1 and said in warnings[0]["message"]


def test_tandems_engine_counts_the_nodes_delegated_pods_hold():
    store = delegated_store(_group("volcano", prefill=2, decode=1, minimum=None), shape="block=1,rack=1,host=4")
    _run(store, store)
    held = {p["spec"]["nodeName"] for p in store.list("Pod")}
    assert len(held) == 4  # 2 prefill + a two-pod decode fill the four 8-GPU hosts
    native = _group("native", prefill=1, decode=1, minimum=None, name="other")
    store.create(native)
    _run(store, store, 100.0)
    other = store.get("InferenceGroup", "serving", "other")
    assert other["status"]["state"] == "Unschedulable"
    assert not over_committed(store)


def test_changing_the_backend_hands_the_group_over_unit_by_unit():
    store = delegated_store(_group("volcano", replicas=2))
    now = _run(store, store)
    before = {p["metadata"]["labels"][REVISION_LABEL] for p in store.list("Pod")}
    raw = _stored(store)
    raw["spec"]["scheduler"] = {"backend": "kai"}
    store.update(raw)
    mixed = False
    for _ in range(60):
        reconcile(store, now, delegation=ALL)
        backends = {p["metadata"]["labels"][BACKEND_LABEL] for p in store.list("Pod") if not p["metadata"].get("deletionTimestamp")}
        mixed |= backends == {"volcano", "kai"}
        kubelet(store)
        toy_scheduler(store)
        now += 1.0
    pods = store.list("Pod")
    assert {p["metadata"]["labels"][BACKEND_LABEL] for p in pods} == {"kai"}
    assert {p["spec"]["schedulerName"] for p in pods} == {"kai-scheduler"}
    assert not before & {p["metadata"]["labels"][REVISION_LABEL] for p in pods}
    assert mixed, "the hand-over went replica by replica, as a rolling update"
    assert store.list(VOLCANO_PODGROUP) == []
    assert sorted(g["metadata"]["name"] for g in store.list(KAI_PODGROUP)) == ["llama-0", "llama-1"]
    assert _stored(store)["status"]["state"] == "Ready"


@pytest.mark.parametrize("backend", ["kai", "koordinator", "workload-api"])
def test_every_patchable_or_immutable_backend_ends_ready_with_its_gang_objects_owned(backend):
    store = delegated_store(_group(backend, replicas=2))
    _run(store, store)
    assert _stored(store)["status"]["state"] == "Ready"
    owner = _stored(store)["metadata"]["uid"]
    kinds = [k.key for k in DELEGATED_KINDS[backend]]
    made = [o for key in kinds for o in store.list(key)]
    assert made and all(r["uid"] == owner for o in made for r in o["metadata"]["ownerReferences"])


def test_a_non_zero_priority_gets_its_priority_class_once_for_two_groups():
    a = _group("volcano", name="llama", priority=50)
    b = copy.deepcopy(a)
    b["metadata"]["name"] = "other"
    store = delegated_store(a, b)
    report = reconcile(store, 0.0, delegation=ALL)
    assert not report.errors
    assert [c["metadata"]["name"] for c in store.list("PriorityClass")] == ["tandem-priority-50"]
    assert {p["spec"]["priorityClassName"] for p in store.list("Pod")} == {"tandem-priority-50"}


@settings(max_examples=examples(25), deadline=None)
@given(
    backend=st.sampled_from(["volcano", "kai", "koordinator"]),
    counts=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2)), min_size=1, max_size=4),
    held=st.lists(st.booleans(), min_size=4, max_size=4),
    skew=st.integers(1, 3),
)
def test_no_gang_ever_asks_for_more_than_coordination_admitted_and_no_admitted_pod_lacks_its_gang(backend, counts, held, skew):
    g = _group(backend, prefill=1, decode=1, minimum=(1, 1), replicas=2)
    g["spec"]["coordination"] = {"scaling": {"maxSkew": skew}}
    store = delegated_store(g, shape="block=1,rack=2,host=6")
    now = 0.0
    for (prefill, decode), hold in zip(counts, held):
        raw = _stored(store)
        raw["spec"]["roles"][0]["replicas"], raw["spec"]["roles"][1]["replicas"] = prefill, decode
        raw["spec"]["roles"][0]["minReplicas"], raw["spec"]["roles"][1]["minReplicas"] = min(1, prefill), min(1, decode)
        store.update(raw)
        for _ in range(12):
            reconcile(store, now, delegation=ALL)
            _check_gangs(store, backend)
            toy_scheduler(store, ("volcano", "kai", "koordinator") if hold else ())
            now += 1.0


def _check_gangs(store: MemoryStore, backend: str) -> None:
    key = DELEGATED_KINDS[backend][0].key
    objects = {o["metadata"]["name"]: o for o in store.list(key)}
    admitted: dict[str, int] = {}
    for pod in store.list("Pod"):
        meta = pod["metadata"]
        if (meta.get("annotations") or {}).get(ADMITTED) != "true" or meta.get("deletionTimestamp"):
            continue
        labels = meta["labels"]
        unit, role = labels["tandem.dev/unit"], labels["tandem.dev/role"]
        gang = f"llama-{unit}-{role}" if backend == "koordinator" else f"llama-{unit}"
        assert gang in objects, f"admitted pod {meta['name']} has no {key} {gang}"
        admitted[gang] = admitted.get(gang, 0) + 1
        assert not pod["spec"].get("schedulingGates"), "an admitted pod is the scheduler's"
        if backend == "kai":
            leaves = {s["name"] for s in objects[gang]["spec"]["subGroups"]}
            assert f"{role}.{labels['tandem.dev/replica']}" in leaves, f"admitted pod {meta['name']} has no KAI subgroup"
    for name, obj in objects.items():
        minimum = obj["spec"].get("minMember", 0)
        assert minimum <= admitted.get(name, 0), f"{key} {name} asks for {minimum} pods, {admitted.get(name, 0)} admitted"
        if backend == "koordinator":
            total = int(obj["metadata"]["annotations"]["gang.scheduling.koordinator.sh/total-number"])
            assert admitted.get(name, 0) <= total <= max(admitted.get(name, 0), 1) * 2, f"{name}: total {total} is the step's, not the target's"
        if backend == "kai":
            for leaf in obj["spec"]["subGroups"]:
                if "parent" in leaf:
                    role, index = leaf["name"].split(".")
                    assert any(p["metadata"]["labels"]["tandem.dev/role"] == role and int(p["metadata"]["labels"]["tandem.dev/replica"]) >= int(index)
                               and p["metadata"]["labels"]["tandem.dev/unit"] == name.rsplit("-", 1)[1] for p in store.list("Pod")
                               if (p["metadata"].get("annotations") or {}).get(ADMITTED) == "true"), f"KAI subgroup {leaf['name']} of {name} is beyond what was admitted"


def test_a_kueue_unit_keeps_its_base_pod_group_at_the_minimum_its_pods_were_made_for():
    store = delegated_store(_group("kueue", prefill=3, decode=1, minimum=(2, 1)))
    reconcile(store, 0.0, delegation=ALL)
    workloads = {w["metadata"]["name"]: w for w in store.list("Workload.kueue.x-k8s.io")}
    assert sorted(workloads) == ["llama-0"]  # the minimums first: the extra replica's pod group comes with its step
    base = sum(s["count"] for s in workloads["llama-0"]["spec"]["podSets"])
    members = [p for p in store.list("Pod") if p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] == "llama-0"]
    assert base == len(members) == 2 + 2
    assert {p["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] for p in members} == {str(base)}
    # with fewer admitted than the minimum (a replica lost, its replacement not yet made), a
    # Volcano gang asks only for what is admitted, but Kueue's base keeps the count its pods name
    from tandem.api.loading import load_texts
    from tandem.controller.delegation import desired_gang_objects
    import json

    typed = load_texts([("g", json.dumps(_stored(store)))]).groups[0]
    short = {0: {"prefill": (0,), "decode": (0,)}}
    kueue, _ = desired_gang_objects(_stored(store), typed, None, ALL.backend("kueue"), short)
    assert sum(s["count"] for s in kueue[0]["spec"]["podSets"]) == base
    volcano_typed = typed.model_copy(update={"spec": typed.spec.model_copy(update={"scheduler": typed.spec.scheduler.model_copy(update={"backend": "volcano"})})})
    volcano, _ = desired_gang_objects(_stored(store), volcano_typed, None, ALL.backend("volcano"), short)
    assert volcano[0]["spec"]["minMember"] == 1 + 2
    assert all("kueue.x-k8s.io/admission" in [g["name"] for g in p["spec"]["schedulingGates"]] for p in store.list("Pod"))


def test_a_delegated_unit_left_partly_bound_past_the_gang_timeout_is_released_and_made_again():
    g = _group("volcano")
    g["spec"]["scheduler"]["gangTimeoutSeconds"] = 30
    store = delegated_store(g)
    now = 0.0
    reconcile(store, now, delegation=ALL)
    first = {p["metadata"]["uid"] for p in store.list("Pod")}
    node = store.list("Node")[0]["metadata"]["name"]
    for pod in store.list("Pod"):  # the scheduler binds the prefill pod only (a scheduler that gangs nothing)
        if pod["metadata"]["labels"]["tandem.dev/role"] == "prefill":
            store.bind("serving", pod["metadata"]["name"], node)
    released = False
    for _ in range(80):
        now += 1.0
        reconcile(store, now, delegation=ALL)
        released |= any(e["reason"] == "GangTimeout" for e in store.list("Event"))
        if released:
            break
    assert released, "the gang timeout holds for a delegated unit too"
    reconcile(store, now + 1.0, delegation=ALL)
    _run(store, store, now + 200.0)
    assert not first & {p["metadata"]["uid"] for p in store.list("Pod")}, "made again whole"
    assert _stored(store)["status"]["state"] == "Ready"


def test_a_failed_delegated_pod_costs_its_whole_replica_which_comes_back_for_the_same_scheduler():
    store = delegated_store(_group("koordinator"))
    now = _run(store, store)
    decode = sorted(p["metadata"]["name"] for p in store.list("Pod") if p["metadata"]["labels"]["tandem.dev/role"] == "decode")
    worker = store.get("Pod", "serving", decode[-1])
    worker["status"] = {"phase": "Failed", "reason": "Error"}
    store.update_status(worker)
    _run(store, store, now)
    after = [p for p in store.list("Pod") if p["metadata"]["labels"]["tandem.dev/role"] == "decode"]
    assert len(after) == 2 and all(p["status"]["phase"] == "Running" for p in after)
    assert worker["metadata"]["uid"] not in {p["metadata"]["uid"] for p in after}
    assert {p["spec"]["schedulerName"] for p in after} == {"koord-scheduler"}
    assert any(e["reason"] == "ReplicaReplaced" for e in store.list("Event"))


def test_an_immutable_gang_its_scheduler_has_let_go_is_not_replaced_when_the_spec_changes():
    store = delegated_store(_group("kueue"))
    reconcile(store, 0.0, delegation=ALL)
    (workload,) = store.list("Workload.kueue.x-k8s.io")
    for pod in store.list("Pod"):  # Kueue admitted the Workload and lifted its gate; nothing bound yet
        store.patch("Pod", "serving", pod["metadata"]["name"], {"spec": {"schedulingGates": None}})
    raw = _stored(store)
    raw["spec"]["scheduler"]["queue"] = "team-b"  # renders another Workload (its queueName)
    store.update(raw)
    for now in (1.0, 2.0, 3.0):
        reconcile(store, now, delegation=ALL)
    assert [w["metadata"]["uid"] for w in store.list("Workload.kueue.x-k8s.io")] == [workload["metadata"]["uid"]]


def test_a_group_waiting_for_its_scheduler_says_so_in_its_state_not_that_it_is_invalid():
    store = delegated_store(_group("volcano"))
    reconcile(Served(store, ()), 0.0, delegation=ALL)
    assert _stored(store)["status"]["state"] == "BackendUnavailable"
    assert [e["reason"] for e in store.list("Event")] == ["BackendNotServed"]
