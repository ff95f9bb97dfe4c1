"""The controller beyond the happy path: API errors on each kind of write, a crash
between any two writes, invalid groups beside valid ones, and a pass that is pure."""

from __future__ import annotations

import copy
from collections import Counter

import pytest

from support.builders import group, role
from support.controller_world import Crash, FaultyWriter, design_group, kubelet, over_committed, settle, world
from tandem.api.naming import CREATION, POD_INDEX_LABEL, REVISION_LABEL
from tandem.api.resources import InferenceGroup
from tandem.controller.decide import decide
from tandem.controller.manifests import replica_pods, revision_of
from tandem.controller.memo import Memo
from tandem.controller.observe import observe
from tandem.controller.reconcile import reconcile
from tandem.errors import Conflict, Forbidden, Invalid, NotFound, ServerTimeout, ServiceUnavailable, TooManyRequests

VERBS = ("create", "patch", "patch_status", "delete")


def final_state(store):
    """What a converged cluster looks like, without versions and times."""
    pods = sorted(
        (p["metadata"]["name"], p["spec"].get("nodeName") is not None, bool(p.get("status", {}).get("conditions"))) for p in store.list("Pod")
    )
    groups = {
        g["metadata"]["name"]: (
            {c["type"]: c["status"] for c in g["status"]["conditions"]},
            g["status"]["functionalUnits"],
            g["status"]["observedGeneration"],
        )
        for g in store.list("InferenceGroup")
    }
    return pods, groups


def two_groups():
    a = design_group("llama")
    b = group("small", [role("prefill", 2, 1, gpus=8), role("decode", 1, 1, gpus=8)], required="block")
    return a, b


def reference():
    store = world(*two_groups())
    settle(store, store)
    return final_state(store)


def cordon(store, unschedulable):
    for node in store.list("Node"):
        store.patch("Node", None, node["metadata"]["name"], {"spec": {"unschedulable": unschedulable or None}})


def scale_down_world():
    """A settled world about to shrink: every kind of write (deletes included) comes next."""
    a, b = two_groups()
    store = world(a, b)
    settle(store, store)
    store.patch("InferenceGroup", "serving", "llama", {"spec": {"roles": [{**a["spec"]["roles"][0], "replicas": 2}, a["spec"]["roles"][1]]}})
    store.patch_status("Pod", "serving", "small-0-decode-0-0", {"status": {"phase": "Failed"}})
    return store


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("error", [Conflict, TooManyRequests, ServiceUnavailable, ServerTimeout])
def test_a_retryable_error_on_each_kind_of_write_is_reported_and_the_next_passes_converge(verb, error):
    store = scale_down_world() if verb == "delete" else world(*two_groups())
    if verb == "patch":  # pods created while nothing fits are placed by a later patch
        cordon(store, True)
        reconcile(store, 0.0)
        cordon(store, False)
    faults = {"left": 1}

    def fail(n, kind):
        if kind == verb and faults["left"]:
            faults["left"] -= 1
            return error("injected")
        return None

    writer = FaultyWriter(store, fail)
    now, report = 0.0, None
    while not writer.log and now < 40:  # passes until the first write of this kind fails
        report = reconcile(writer, now)
        kubelet(store)
        now += 1.0
    assert writer.log and report is not None, f"a {verb} happened"
    assert len(report.errors) == 1 and report.errors[0].retryable and report.errors[0].code == error.code
    assert not report.terminal
    settle(writer, store, start=now)
    assert not over_committed(store)
    if verb != "delete":
        assert final_state(store) == reference()
    else:
        pods = [p["metadata"]["name"] for p in store.list("Pod")]
        assert sum(1 for p in pods if p.startswith("llama-0-prefill")) == 2 and "small-0-decode-0-0" in pods


@pytest.mark.parametrize("error", [Forbidden, Invalid])
def test_a_terminal_error_is_reported_as_terminal_and_stops_no_other_group(error):
    store = world(*two_groups())

    # the first three creates (pods of the first group) are refused
    writer = FaultyWriter(store, lambda n, kind: error("refused by policy") if kind == "create" and n < 3 else None)
    report = reconcile(writer, 0.0)
    assert report.terminal and all(e.code == error.code and not e.retryable for e in report.terminal)
    assert any(p["metadata"]["name"].startswith("small-") for p in store.list("Pod")), "the other group went on"
    settle(writer, store, start=1.0)
    assert final_state(store) == reference()


def test_a_failed_create_stops_neither_the_other_replicas_nor_the_status_only_its_own_replica():
    store = world(group("one", [role("prefill", 2, 2, gpus=8, pods=2)]))
    # writes: the group's fence (apply.py), the Service, the peers ConfigMap, then two replicas of two pods
    writer = FaultyWriter(store, lambda n, kind: Conflict("injected") if n == 3 else None)
    report = reconcile(writer, 0.0)
    assert report.errors and report.count("create", "Pod") == 2, "the other replica's two pods"
    assert report.status_patches == 1
    assert report.skipped == 2, "the same replica's leader, and the record that the pass's creates went through (status.creations)"
    assert (store.get("InferenceGroup", "serving", "one")["status"].get("creations") or 0) == 0, "not recorded as created whole"
    settle(store, store, start=1.0)
    assert len(store.list("Pod")) == 4


def test_a_replacement_waits_while_a_pod_of_the_replica_it_replaces_is_not_yet_deleted():
    store = world(group("one", [role("decode", 1, 1, gpus=8, pods=2, required="rack")]), shape="block=1,rack=2,host=2")
    settle(store, store)
    store.delete("Pod", "serving", "one-0-decode-0-1")  # the worker lost: the replica is re-created whole
    # ... but deleting its leader fails once: no new worker may be created beside the old leader
    writer = FaultyWriter(store, lambda n, kind: Conflict("injected") if kind == "delete" else None)
    report = reconcile(writer, 100.0)
    assert report.errors and report.count("create", "Pod") == 0
    settle(store, store, start=101.0)
    racks = {store.get("Node", None, p["spec"]["nodeName"])["metadata"]["labels"]["network.tandem.dev/rack"] for p in store.list("Pod")}
    assert len(store.list("Pod")) == 2 and len(racks) == 1


def test_a_worker_left_alone_by_a_failed_leader_create_is_completed_not_replaced():
    store = world(group("one", [role("prefill", 1, 1, gpus=8, pods=2)]))
    # writes: the fence, the Service, the peers ConfigMap, the worker, then the leader (refused once)
    writer = FaultyWriter(store, lambda n, kind: ServiceUnavailable("injected") if n == 4 else None)
    reconcile(writer, 0.0)
    worker = store.get("Pod", "serving", "one-0-prefill-0-1")["metadata"]["uid"]
    settle(writer, store, start=1.0)
    assert store.get("Pod", "serving", "one-0-prefill-0-1")["metadata"]["uid"] == worker, "completed: the worker stays"
    assert store.get("InferenceGroup", "serving", "one")["status"]["creations"] >= 2


def story(store, writer, check=lambda report: None, memo=None):
    """Roll out two groups, scale one up, lose a pod, shrink, grow while nothing fits and
    free the room again: every kind of write.
    Each step runs passes (each followed by the kubelet) until nothing moves; a controller
    that crashes is replaced by a fresh one (nothing kept but the cluster), which carries
    on with the same step (with `memo`, kept across passes as the runner keeps it: a crash
    loses it, as a restarted process would). Returns the final state."""
    steps = [
        (0.0, lambda: None),
        (100.0, lambda: store.patch("InferenceGroup", "serving", "llama", {"spec": {"replicas": 2}})),
        (200.0, lambda: store.patch_status("Pod", "serving", "small-0-decode-0-0", {"status": {"phase": "Failed"}})),
        (300.0, lambda: store.patch("InferenceGroup", "serving", "llama", {"spec": {"replicas": 1}})),
        (400.0, lambda: (cordon(store, True), store.patch("InferenceGroup", "serving", "small", {"spec": {"replicas": 2}}))),
        (500.0, lambda: cordon(store, False)),  # the waiting pods are placed by patches
    ]
    for start, change in steps:
        change()
        now = start
        for _ in range(40):
            try:
                report = reconcile(writer, now, memo=memo)
            except Crash:
                writer = FaultyWriter(store)
                memo = None if memo is None else Memo()
                continue
            check(report)
            if kubelet(store) == 0 and report.writes == 0:
                break
            now += 1.0
    return final_state(store)


def story_writes():
    store = world(*two_groups())
    writer = FaultyWriter(store)
    story(store, writer)
    return writer.writes


def test_the_story_uses_every_kind_of_write():
    store = world(*two_groups())
    verbs: set[str] = set()
    story(store, FaultyWriter(store, lambda n, verb: verbs.add(verb)))
    assert verbs == set(VERBS)


@pytest.mark.parametrize("crash_at", range(story_writes()))
def test_a_crash_between_any_two_writes_converges_without_creating_twice_or_over_committing(crash_at):
    """The controller dies before its `crash_at`-th write of the story; a fresh one takes
    over. No pod is ever created twice (a create never meets AlreadyExists), no node is
    over-committed after any pass, and the story ends where it ends without the crash."""
    clean = world(*two_groups())
    expected = story(clean, FaultyWriter(clean))
    store = world(*two_groups())

    def check(report):
        assert not [e for e in report.errors if e.reason == "AlreadyExists"], "a pod created twice"
        assert not over_committed(store)

    writer = FaultyWriter(store, lambda n, verb: Crash() if n == crash_at else None)
    assert story(store, writer, check) == expected
    assert writer.writes > crash_at, "the crash happened"
    assert pods_created(store) == pods_created(clean), "the same pods created, each as often as without the crash"


def pods_created(store):
    """How often each pod name was created over the story."""
    return Counter(e.object["metadata"]["name"] for e in store.watch("Pod", "0") if e.type == "ADDED")


def test_a_replica_cut_short_by_a_crash_is_completed_and_one_that_lost_a_pod_is_replaced_whole():
    store = world(design_group("llama"))
    settle(store, store)
    size = {r["name"]: r.get("podsPerReplica", 1) for r in store.get("InferenceGroup", "serving", "llama")["spec"]["roles"]}
    role = next(name for name, n in size.items() if n > 1)
    leader, worker = f"llama-0-{role}-0-0", f"llama-0-{role}-0-1"
    uids = lambda: {name: store.get("Pod", "serving", name)["metadata"]["uid"] for name in (leader, worker)}
    before = uids()
    store.delete("Pod", "serving", leader)  # lost (deleted, evicted): the replica had been whole
    settle(store, store, start=100.0)
    after = uids()
    assert after[leader] != before[leader] and after[worker] != before[worker], "re-created whole: the worker restarted too"
    # As if the writer died before creating the leader, the last pod: the pass that created
    # the worker never wrote its status, so `status.creations` is below the worker's number.
    store.delete("Pod", "serving", leader)
    number = int(store.get("Pod", "serving", worker)["metadata"]["annotations"][CREATION])
    store.patch_status("InferenceGroup", "serving", "llama", {"status": {"creations": number - 1}})
    settle(store, store, start=200.0)
    assert uids()[worker] == after[worker], "completed: the worker stays"
    assert store.get("Pod", "serving", leader)["spec"].get("nodeName")
    assert store.get("InferenceGroup", "serving", "llama")["status"]["creations"] > number - 1
    leader_uid = uids()[leader]
    store.delete("Pod", "serving", worker)  # a worker lost under a running leader: the replica is broken
    settle(store, store, start=300.0)
    assert store.get("Pod", "serving", leader)["metadata"]["uid"] != leader_uid, "replaced whole"


def test_an_invalid_group_gets_a_condition_and_an_event_its_pods_stay_and_the_others_go_on():
    a, b = two_groups()
    store = world(a, b)
    settle(store, store)
    before = {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in store.list("Pod", labels="tandem.dev/group=small")}
    broken = store.get("InferenceGroup", "serving", "small")
    broken["spec"]["roles"][0]["minReplicas"] = 5  # above its replicas (2)
    broken["spec"]["replicas"] = 2
    store.update(broken)
    store.patch("InferenceGroup", "serving", "llama", {"spec": {"replicas": 2}})
    settle(store, store, start=100.0)
    small = store.get("InferenceGroup", "serving", "small")
    accepted = next(c for c in small["status"]["conditions"] if c["type"] == "Accepted")
    assert accepted["status"] == "False" and accepted["reason"] == "InvalidSpec"
    assert "spec.roles[0].minReplicas" in accepted["message"] and accepted["observedGeneration"] == small["metadata"]["generation"]
    events = [e for e in store.list("Event", "serving") if e["involvedObject"]["name"] == "small" and e["type"] == "Warning"]
    assert [(e["type"], e["reason"], e["count"]) for e in events] == [("Warning", "InvalidSpec", 1)], "once, not every pass"
    after = {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in store.list("Pod", labels="tandem.dev/group=small")}
    assert after == before, "its running pods are left alone (not even unit 1 is created)"
    llama = store.get("InferenceGroup", "serving", "llama")
    assert llama["status"]["functionalUnits"] == 2, "the valid group scaled on"


def test_a_group_naming_a_missing_topology_is_not_accepted():
    g = design_group()
    g["spec"]["topologyName"] = "elsewhere"
    store = world(g)
    report = reconcile(store, 0.0)
    assert report.created == 0 and any("InvalidSpec" in line for line in report.events)
    status = store.get("InferenceGroup", "serving", "llama")["status"]
    accepted = {c["type"]: c for c in status["conditions"]}["Accepted"]
    assert accepted["status"] == "False" and "spec.topologyName" in accepted["message"] and "'elsewhere' not found" in accepted["message"]


def test_decide_is_a_pure_function_of_the_snapshot_and_the_time():
    store = world(*two_groups())
    settle(store, store)
    store.patch("InferenceGroup", "serving", "llama", {"spec": {"replicas": 2}})
    state = observe(store.snapshot())
    frozen = copy.deepcopy(state)
    first, second = decide(state, 50.0), decide(state, 50.0)
    assert first == second and first.groups, "same snapshot and time, same actions"
    assert state == frozen, "the snapshot is not changed by deciding"


def remembered(memo):
    """What a memo keeps from one decision for the next (the reads by identity: they are caches)."""
    return (
        dict(memo.settled),
        {key: id(reads) for key, reads in memo.unit_reads.items()},
        memo.idle_placement,
        memo.settled_hits,
    )


def test_decide_writes_nothing_into_the_memo_and_returns_what_it_should_keep():
    """A memo that has seen passes, one group settled and a second one waiting for room
    that never comes (the engine ran and placed nothing): deciding again, twice, leaves
    the memo as it was and decides the same; what it returns, once kept, is what the next
    pass reads."""
    store = world(*two_groups(), shape="block=1,rack=1,host=4")
    memo = Memo()
    now = 0.0
    for _ in range(10):
        reconcile(store, now, memo=memo)
        kubelet(store)
        now += 1.0
    store.patch("InferenceGroup", "serving", "small", {"spec": {"replicas": 3}})
    reconcile(store, now, memo=memo)  # the new units' pods, created gated; no room for them
    now += 1.0
    state = observe(store.snapshot(), memo)
    before = remembered(memo)
    first, second = decide(state, now), decide(state, now)
    assert remembered(memo) == before, "deciding wrote into the memo"
    assert first == second
    memory = first.memory
    assert memory.settled_hits == 1 and memory.settled == (), "llama skipped as settled; small decided, and waits"
    assert [key for key, _ in memory.unit_reads] == [("serving", "small")]
    assert memory.placement_ran and memory.idle_placement is not None, "the engine ran and placed nothing"
    memo.remember(memory)
    kept = remembered(memo)
    assert kept[1][("serving", "small")] == id(dict(memory.unit_reads)[("serving", "small")])
    assert kept[2] == memory.idle_placement != before[2] and kept[3] == before[3] + 1
    assert decide(observe(store.snapshot(), memo), now).memory.placement_ran is False, "the next pass reads the idle placement kept"


def test_requeue_after_names_the_earliest_deadline():
    g = design_group()
    g["spec"]["scheduler"] = {"gangTimeoutSeconds": 90}
    store = world(g)
    report = reconcile(store, 1000.0)  # placed, never bound: the gang timeout is the deadline
    assert report.requeue_after == pytest.approx(90.0, abs=0.01)
    settle(store, store, start=1001.0)
    assert reconcile(store, 2000.0).requeue_after is None, "a settled group waits on nothing"


def test_the_whole_story_writes_the_same_with_a_memo_that_skips_settled_groups():
    """A memo makes passes skip groups settled with the same inputs; every write is the same."""
    plain, memoised = world(*two_groups()), world(*two_groups())
    memo = Memo()
    assert story(memoised, FaultyWriter(memoised), memo=memo) == story(plain, FaultyWriter(plain))
    assert changes(memoised) == changes(plain)
    assert memo.settled_hits > 10, "settled groups were skipped"


def changes(store):
    """Every change the store made, in order, without versions and times."""
    return [(e.type, e.object["kind"], e.object["metadata"]["name"]) for kind in ("Pod", "InferenceGroup", "Service", "ConfigMap")
            for e in store.watch(kind, "0")]


def acted(decisions):
    """What a pass decides, without the groups it skipped as settled (they decide nothing)."""
    groups = tuple(g for g in decisions.groups if g.actions)
    return groups, decisions.requeue_after, decisions.placed, decisions.notes


def test_a_memo_across_passes_changes_no_decision_and_spares_revalidation():
    store = world(*two_groups())
    memo = Memo()
    now = 0.0
    for _ in range(12):  # the story's first steps, with and without the memo at every pass
        with_memo = decide(observe(store.snapshot(), memo), now)
        assert acted(with_memo) == acted(decide(observe(store.snapshot()), now))
        reconcile(store, now, memo=memo)
        kubelet(store)
        now += 1.0
    assert memo.hits > memo.misses, "unchanged groups, nodes and pods are validated once"


def test_skipping_every_settled_group_at_once_decides_what_looking_at_each_would(monkeypatch):
    """When the last pass skipped every group as settled and nothing any of them reads has
    changed, a pass skips them all without a look at each (`Memo.quiet`). Through the story,
    then passes on the settled cluster with a node relabelled, a foreign Service named like
    a group's and a deadline coming, every decision equals the one looking at each group."""
    import sys

    pass_module = sys.modules["tandem.controller.reconcile"]  # the package's `reconcile` is the function
    taken = []

    def both(state, now, *args):
        quick = decide(state, now, *args)
        kept, state.memo.quiet = state.memo.quiet, None
        full = decide(state, now, *args)
        state.memo.quiet = kept
        assert quick == full
        taken.append(kept is not None and quick.memory.quiet is kept)
        return quick

    monkeypatch.setattr(pass_module, "decide", both)
    timed = design_group("timed")
    timed["spec"]["scheduler"] = {"gangTimeoutSeconds": 90}
    store = world(*two_groups(), shape="block=2,rack=2,host=10")
    memo = Memo()
    story(store, FaultyWriter(store), memo=memo)
    assert not any(taken), "every pass of the story follows a change"
    node = store.list("Node")[0]["metadata"]["name"]
    for n in range(3):  # a change no group reads: skipped at once
        store.patch("Node", None, node, {"metadata": {"annotations": {"note": str(n)}}})
        assert reconcile(store, 600.0 + n, memo=memo).writes == 0
    assert taken[-2:] == [True, True]
    store.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "late", "namespace": "serving"}, "spec": {}})
    store.create(group("late", [role("prefill", 1, 1, gpus=8)]))
    for now in range(700, 705):  # its Service's name taken by another's: said in its status, and settled
        reconcile(store, float(now), memo=memo)
        kubelet(store)
    assert taken[-1] is True
    store.delete("Service", "serving", "late")  # no object of any group changed
    report = reconcile(store, 710.0, memo=memo)
    assert taken[-1] is False and report.count("create", "Service") == 1, "the group named like it was decided again"
    settle(store, store, start=711.0)
    store.create(timed)
    for now in (800.0, 801.0):
        reconcile(store, now, memo=memo)  # placed, never bound: the gang timeout is a deadline
    reports = [reconcile(store, now, memo=memo) for now in (802.0, 803.0)]
    assert [r.writes for r in reports] == [0, 0] and taken[-1] is True and reports[-1].requeue_after == pytest.approx(87.0, abs=0.01)
    report = reconcile(store, 891.0, memo=memo)
    assert taken[-1] is False and report.writes > 0, "the deadline came: the timed-out gang is acted on"

    full = world(group("waiting", [role("prefill", 1, 1, gpus=8)]), shape="block=1,rack=1,host=1")
    hog = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hog", "namespace": "other"},
           "spec": {"nodeName": "n-000", "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]},
           "status": {"phase": "Running"}}
    full.create(hog)  # another workload's pod, no group's: holds the only node
    memo = Memo()
    for now in range(5):
        reconcile(full, float(now), memo=memo)
    assert taken[-1] is True and not full.get("Pod", "serving", "waiting-0-prefill-0-0")["spec"].get("nodeName")
    full.delete("Pod", "other", "hog")  # room comes free; no object of any group changed
    report = reconcile(full, 10.0, memo=memo)
    assert taken[-1] is False and report.placed == 1, "the waiting group was decided again, and placed"


def test_a_group_asking_for_billions_of_units_is_refused_and_the_others_go_on():
    a, b = two_groups()
    b["spec"]["replicas"] = 2_147_483_647
    store = world(a, b)
    settle(store, store)
    small = store.get("InferenceGroup", "serving", "small")
    accepted = next(c for c in small["status"]["conditions"] if c["type"] == "Accepted")
    assert accepted["status"] == "False" and "spec.replicas: 2,147,483,647 units is more than the controller plans" in accepted["message"]
    llama = store.get("InferenceGroup", "serving", "llama")
    assert {c["type"]: c["status"] for c in llama["status"]["conditions"]}["Available"] == "True"


def test_a_pod_being_deleted_holds_its_node_until_it_is_gone():
    """Found by the fault campaign (issue 16): a pass that deleted a running pod placed
    another on its node in the same pass; when the delete failed (a 500) and the create
    went through, the node held more GPUs than it has. A deleted pod also keeps running
    until it terminates. Its node is free for the pass after it is gone."""
    store = world(group("a", [role("prefill", 1, 1, gpus=8)]), shape="block=1,rack=1,host=1")
    settle(store, store)
    store.create(group("b", [role("prefill", 1, 1, gpus=8)]))
    reconcile(store, 100.0)  # b's pod waits: the one node is full
    store.patch("InferenceGroup", "serving", "a", {"spec": {"replicas": 0}})
    writer = FaultyWriter(store, lambda n, verb: ServiceUnavailable("injected") if verb == "delete" else None)
    report = reconcile(writer, 101.0)
    assert report.errors and not over_committed(store), "a's pod still runs: b's is not put beside it"
    settle(store, store, start=102.0)
    assert [p["metadata"]["name"] for p in store.list("Pod")] == ["b-0-prefill-0-0"]
    assert store.get("Pod", "serving", "b-0-prefill-0-0")["spec"]["nodeName"] == "n-000"


def test_a_replica_of_two_revisions_is_replaced_whole():
    """Found by the fault campaign (issue 16): a failed replica's worker was deleted, its
    leader's delete failed (a 500), and the replacement took the same index: its new worker
    was created beside the old leader. Read by the worker's revision, that replica passed for
    a complete one of the new revision, and the rolling update stopped with an old leader
    running forever. A replica whose pods are of two revisions is now broken: replaced whole."""
    g = group("mix", [role("prefill", 1, 1, gpus=4, pods=2)])
    store = world(g, shape="block=1,rack=1,host=2")
    settle(store, store)
    old = store.get("Pod", "serving", "mix-0-prefill-0-0")
    roles = store.get("InferenceGroup", "serving", "mix")["spec"]["roles"]
    roles[0]["template"]["spec"]["containers"][0]["image"] = "vllm:new"
    store.patch("InferenceGroup", "serving", "mix", {"spec": {"roles": roles}})
    settle(store, store, start=100.0)
    leader = next(p for p in store.list("Pod") if p["metadata"]["labels"][POD_INDEX_LABEL] == "0")
    name, new_revision = leader["metadata"]["name"], leader["metadata"]["labels"][REVISION_LABEL]
    assert new_revision != old["metadata"]["labels"][REVISION_LABEL]
    # the leader as the old revision made it, back beside the new worker, bound and Ready
    store.delete("Pod", "serving", name)
    stale = {k: v for k, v in leader.items() if k != "status"}
    stale["metadata"] = {k: v for k, v in leader["metadata"].items() if k not in ("uid", "resourceVersion", "creationTimestamp")}
    stale["metadata"]["labels"] = {**leader["metadata"]["labels"], REVISION_LABEL: old["metadata"]["labels"][REVISION_LABEL]}
    stale["spec"] = {**leader["spec"], "containers": old["spec"]["containers"]}
    store.create(stale)
    store.patch_status("Pod", "serving", name, {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    settle(store, store, start=200.0)
    pods = store.list("Pod")
    assert len(pods) == 2 and {p["metadata"]["labels"][REVISION_LABEL] for p in pods} == {new_revision}
    assert all(p["spec"]["containers"][0]["image"] == "vllm:new" for p in pods)
    assert store.get("InferenceGroup", "serving", "mix")["status"]["functionalUnits"] == 1


def test_a_unit_whole_again_is_not_released_for_the_partial_since_its_status_still_shows():
    """Found by the fault campaign (issue 16): a unit partially placed got its last pod bound,
    but the status write that would clear `partialSince` failed (a 503); the next pass, past
    the gang timeout, released the whole unit, running and complete. A unit is released
    only if it is still partial; a whole one just has its `partialSince` cleared."""
    g = group("whole", [role("prefill", 1, 1, gpus=8), role("decode", 1, 1, gpus=8)])
    g["spec"]["scheduler"] = {"gangTimeoutSeconds": 20}
    store = world(g)
    settle(store, store)
    units = store.get("InferenceGroup", "serving", "whole")["status"]["units"]
    stale = [{**units[0], "partialSince": "1970-01-01T00:00:05Z"}]  # as the failed write left it
    store.patch_status("InferenceGroup", "serving", "whole", {"status": {"units": stale}})
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in store.list("Pod")}
    report = reconcile(store, 100.0)
    assert report.deleted == 0 and not any("GangTimeout" in line for line in report.events)
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in store.list("Pod")} == before
    unit = store.get("InferenceGroup", "serving", "whole")["status"]["units"][0]
    assert "partialSince" not in unit and unit.get("releases", 0) == 0  # 0 is left out


def test_a_waiting_replica_whose_lower_index_has_gone_is_still_placed():
    """Found by the fault campaign (issue 16): a rolling update's new replica took index 1
    while the old one held 0; a rack loss left the new one waiting for a node after the old
    one had gone. The engine named the replica it placed by the lowest free index, 0, and
    the pods waiting under index 1 were never given a node. New replicas in a plan now go to
    the waiting ones in order, whatever their indices."""
    store = world(group("gap", [role("prefill", 1, 1, gpus=8)]), shape="block=1,rack=1,host=2")
    raw = store.get("InferenceGroup", "serving", "gap")
    typed = InferenceGroup.model_validate({k: v for k, v in raw.items() if k != "status"})
    for pod in replica_pods(raw, typed, 0, "prefill", 1, revision_of(typed, raw), admitted=True):
        store.create(pod)  # admitted, behind tandem's gate, under index 1; nothing under 0
    settle(store, store)
    pod = store.get("Pod", "serving", "gap-0-prefill-1-0")
    assert pod["spec"].get("nodeName") and not store.list("Pod", fields="metadata.name=gap-0-prefill-0-0")
    assert store.get("InferenceGroup", "serving", "gap")["status"]["functionalUnits"] == 1


def test_a_pod_being_deleted_holds_its_node_even_when_its_replacement_takes_its_name():
    """Found by the fault campaign (issue 16), after the fix above: a broken replica was
    replaced under the same index in the pass that deleted its running leader, so the
    leader's name stood for the replacement and its node looked free again."""
    a = group("a", [role("prefill", 1, 1, gpus=4, pods=2)])
    store = world(a, group("c", [role("prefill", 1, 1, gpus=8)]), shape="block=1,rack=1,host=2")
    settle(store, store)  # a on one node (2 x 4 GPUs), c on the other (8)
    store.create(group("b", [role("prefill", 1, 1, gpus=8)], priority=10))
    reconcile(store, 100.0)  # b waits: no room
    store.patch_status("Pod", "serving", "a-0-prefill-0-1", {"status": {"phase": "Failed"}})  # a's worker fails
    writer = FaultyWriter(store, lambda n, verb: ServiceUnavailable("injected") if verb == "delete" else None)
    reconcile(writer, 101.0)
    assert not over_committed(store), "a's leader still runs on its node: nothing is put beside it"
    settle(store, store, start=102.0)
    assert not over_committed(store)


def test_the_higher_priority_group_is_placed_first_whatever_its_name():
    """Found while writing the test above: the controller handed the engine its units in
    the order of the groups' names, and the engine places in the order given, so
    `spec.priority` changed nothing. Units now go to it by priority, then age."""
    store = world(group("a", [role("prefill", 1, 1, gpus=8)]), group("b", [role("prefill", 1, 1, gpus=8)], priority=10),
                  shape="block=1,rack=1,host=1")
    settle(store, store)
    assert store.get("Pod", "serving", "b-0-prefill-0-0")["spec"].get("nodeName") == "n-000"
    assert not store.get("Pod", "serving", "a-0-prefill-0-0")["spec"].get("nodeSelector"), "a waits"


class _Lagging:
    """A cluster whose reads are an older snapshot (a cache that lags); writes go to the store."""

    def __init__(self, store, snapshot):
        self._store, self._snapshot = store, snapshot

    def snapshot(self):
        return self._snapshot

    def __getattr__(self, name):
        return getattr(self._store, name)


def test_a_pod_bound_since_a_lagging_read_is_not_released_as_unbound():
    """Found by the fault campaign (issue 16): a kube-scheduler outage ended and the pods
    were bound, but the pass read a cache 7 s behind, saw them placed and never bound past
    the gang timeout, and deleted them, running. A pod is deleted on the version it was
    read at (a resourceVersion precondition): here the delete meets a Conflict, and the
    pass after, on the fresh state, leaves the pod alone."""
    g = group("late", [role("prefill", 1, 1, gpus=8)])
    g["spec"]["scheduler"] = {"gangTimeoutSeconds": 20}
    store = world(g)
    reconcile(store, 0.0)  # placed, not bound
    lagging = store.snapshot()
    kubelet(store)  # now bound, and Ready
    pod = store.get("Pod", "serving", "late-0-prefill-0-0")
    report = reconcile(_Lagging(store, lagging), 30.0)
    assert report.deleted == 0 and [e.code for e in report.errors if e.action.startswith("delete Pod")] == [409]
    assert store.get("Pod", "serving", "late-0-prefill-0-0")["metadata"]["uid"] == pod["metadata"]["uid"], "still running"
    assert reconcile(store, 31.0).deleted == 0


def test_a_group_gone_or_changed_at_the_fence_gets_none_of_its_creates():
    for error, retryable in ((NotFound, None), (Conflict, True)):
        store = world(group("one", [role("prefill", 1, 1, gpus=8, pods=2)]))
        writer = FaultyWriter(store, lambda n, verb: error("injected") if n == 0 else None)
        report = reconcile(writer, 0.0)
        assert report.created == 0 and not store.list("Pod") and not store.list("Service")
        assert report.skipped > 0 and report.fences == 0
        assert [e.retryable for e in report.errors] == ([] if retryable is None else [retryable])
        assert reconcile(store, 1.0).created > 0, "the next pass makes them when the group is there"
