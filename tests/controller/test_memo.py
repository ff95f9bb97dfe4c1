"""The memo across passes: bounded by what exists, and it keeps the Nodes a steady pass
does not validate, so the next placement does not validate every node again."""

from __future__ import annotations

from support.builders import group, role
from support.controller_world import design_group, kubelet, world
from tandem.controller.memo import Memo
from tandem.controller.reconcile import reconcile


def test_a_new_group_after_steady_passes_finds_the_nodes_validated_and_the_memo_stays_bounded():
    store = world(design_group("llama"))
    memo = Memo()
    now = 0.0
    for _ in range(30):
        report = reconcile(store, now, memo=memo)
        now += 1.0
        if not kubelet(store) and not report.writes:
            break
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

