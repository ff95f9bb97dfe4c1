"""The topology controller's pass under API faults: storms of 409, 429, 500, 503, 504 and
504-applied (the write went through, its answer was lost) on every write and event, at a
random rate, over a random history of nodes, levels, topologies and groups.

While the storm lasts, after every pass:
- no pass raises (a failed write is that write's, never the pass's);
- objects that are not tandem's are never touched;
- a ClusterTopology never disappears while a group names it (the finalizer holds).
Once the storm is over, a few passes converge: everything `test_properties` asks of a
settled pass holds, and one more pass writes nothing.
"""

from __future__ import annotations

import random

from hypothesis import event, given, settings
from hypothesis import strategies as st

from support.faults.api import Faults, ReplicaApi, Storm
from support.fuzz import examples
from support.topology_history import FOREIGN, SETTINGS, check, ops, run
from support.topology_world import store
from tandem.topology_controller.kinds import key_of
from tandem.topology_controller.reconcile import TopologyMemo, reconcile

CODES = (409, 429, 500, 503, 504, "504-applied")
SETTLE_PASSES = 8  # a failed finalizer removal waits for its deletes: a few passes to settle


def _named(world):
    """The topologies groups name that exist now."""
    present = {t["metadata"]["name"] for t in world.list("ClusterTopology")}
    return {g["spec"]["topologyName"] for g in world.list("InferenceGroup")} & present


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(st.lists(ops, min_size=1, max_size=4), min_size=1, max_size=6),
    st.lists(st.sampled_from(CODES), min_size=1, max_size=3, unique=True),
    st.sampled_from([0.3, 0.6, 0.9]),
    st.integers(0, 2**16),
)
def test_under_any_storm_nothing_foreign_is_touched_no_used_topology_goes_and_passes_converge_after(batches, codes, rate, seed):
    world = store()
    foreign = [world.create(obj) for obj in FOREIGN]
    clock = {"now": 0.0}
    faults = Faults(random.Random(seed), lambda: clock["now"])
    faults.storms = [Storm(code, 0.0, float(len(batches)), rate) for code in codes]
    api = ReplicaApi(world, faults, history=lambda lag, floor: world.snapshot())
    memo = TopologyMemo()
    for now, batch in enumerate(batches):
        clock["now"] = float(now)
        for op in batch:
            run(world, op)
        named = _named(world)
        reconcile(api, float(now), SETTINGS, memo)
        gone = named - {t["metadata"]["name"] for t in world.list("ClusterTopology")}
        assert not gone, f"ClusterTopology {sorted(gone)} went while a group named it"
        for before in foreign:
            assert world.get(key_of(before), None, before["metadata"]["name"]) == before
    event(f"faults injected: {'none' if not faults.injected else 'some'}")
    clock["now"] = float(len(batches))  # the storm is over
    for i in range(SETTLE_PASSES):
        report = reconcile(api, len(batches) + i + 0.0, SETTINGS, memo)
        if report.writes == 0 and not report.errors:
            break
    assert report.writes == 0 and not report.errors, f"still writing {SETTLE_PASSES} passes after the storm: {report}"
    check(world, foreign)
