"""The memo across passes: bounded by what exists, and it keeps the Nodes a steady pass
does not validate, so the next placement does not validate every node again."""

from __future__ import annotations

from support.builders import group, role
from support.controller_world import design_group, kubelet, world
from tandem.api.naming import GROUP_LABEL, UNIT_LABEL
from tandem.controller.memo import Memo
from tandem.controller.reconcile import reconcile
from tandem.placement import place


def settled(store, memo: Memo, now: float = 0.0) -> float:
    """Passes with `memo` (each followed by the toy kubelet) until nothing changes; the time reached."""
    for _ in range(30):
        report = reconcile(store, now, memo=memo)
        now += 1.0
        if not kubelet(store) and not report.writes:
            break
    return now


def test_a_new_group_after_steady_passes_finds_the_nodes_validated_and_the_memo_stays_bounded():
    store = world(design_group("llama"))
    memo = Memo()
    now = settled(store, memo)
    for _ in range(5):  # steady: no placement, no Node validated
        reconcile(store, now, memo=memo)
        now += 1.0
    nodes = len(store.list("Node"))
    misses = memo.misses
    store.create(group("small", [role("prefill", 1, 1, gpus=8), role("decode", 1, 1, gpus=8)], required="block"))
    assert reconcile(store, now, memo=memo).placed > 0
    assert memo.misses - misses < nodes, "the nodes were remembered through the steady passes"
    objects = nodes + len(store.list("Pod")) + len(store.list("InferenceGroup"))
    for step in range(40):  # churn: every pass changes the group, so old entries pile up unless swept
        store.patch("InferenceGroup", "serving", "llama", {"metadata": {"annotations": {"step": str(step)}}})
        reconcile(store, now, memo=memo)
        now += 1.0
    assert len(memo) <= 2 * objects + 64


def test_a_group_written_again_and_again_keeps_one_validation():
    """Each status or metadata write is a new version; the one before is of no use again."""
    store = world(design_group("llama"))
    memo = Memo()
    now = settled(store, memo)
    for step in range(10):
        store.patch("InferenceGroup", "serving", "llama", {"metadata": {"annotations": {"step": str(step)}}})
        reconcile(store, now, memo=memo)
        now += 1.0
    assert len(memo) == len(store.list("InferenceGroup")) + 1  # each group's latest, and the topologies



def test_placement_waits_for_capacity_to_come_free_instead_of_running_every_pass():
    # Two hosts of 8 GPUs: "first" takes both, "second" waits with its pods gated.
    store = world(group("first", [role("prefill", 1, 1, gpus=8), role("decode", 1, 1, gpus=8)], required="block"), shape="block=1,rack=1,host=2")
    store.create(group("second", [role("prefill", 1, 1, gpus=8), role("decode", 1, 1, gpus=8)], required="block"))
    calls: list[int] = []

    def counting(snapshot, views, units):
        calls.append(len(units))
        return place(snapshot, views, units)

    memo = Memo()
    now = 0.0
    for _ in range(10):  # settle: the first group placed and Ready, the second waiting
        reconcile(store, now, counting, memo)
        kubelet(store)
        now += 1.0
    before, skipped = len(calls), memo.settled_hits
    for _ in range(5):
        reconcile(store, now, counting, memo)
        now += 1.0
    assert len(calls) == before, "nothing came free: placement was run again for the same waiting units"
    assert memo.settled_hits - skipped == 10, "both groups skipped: the placed one and the one waiting for capacity"
    store.delete("InferenceGroup", "serving", "first")
    for pod in store.list("Pod"):
        if pod["metadata"]["labels"].get(GROUP_LABEL) == "first":
            store.delete("Pod", "serving", pod["metadata"]["name"])
    assert reconcile(store, now, counting, memo).placed == 2
    assert len(calls) == before + 1


def test_a_group_decided_again_reads_again_only_the_units_whose_pods_changed(monkeypatch):
    import tandem.controller.decide as decide_module

    store = world(design_group("llama", replicas=2))
    memo = Memo()
    now = settled(store, memo)
    read: list[set[str]] = []
    real = decide_module.replicas_of_unit
    monkeypatch.setattr(decide_module, "replicas_of_unit", lambda pods, *a: read.append({p["metadata"]["labels"][UNIT_LABEL] for p in pods}) or real(pods, *a))
    pod = next(p for p in store.list("Pod") if p["metadata"]["labels"][UNIT_LABEL] == "1")
    store.patch("Pod", "serving", pod["metadata"]["name"], {"metadata": {"annotations": {"touched": "yes"}}})
    reconcile(store, now, memo=memo)
    assert read == [{"1"}], "unit 0's pods did not change: its read of the last decision served"
