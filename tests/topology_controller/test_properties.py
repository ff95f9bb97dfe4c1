"""Properties of the topology controller's pass over random histories of a cluster.

Nodes come, go and are relabelled (some lack a level label), ClusterTopologies are
created, change their levels and are deleted, groups name them or stop; after every
pass (the memo kept across passes, as the process keeps it):
- tandem's objects of each topology are exactly its renderers' output on the current
  nodes (unless a renderer refuses, or the name is someone else's: then it says so; a
  topology that fails tandem's checks keeps what it had and says InvalidSpec);
- no object of tandem's names a topology that is gone;
- the next pass, with the memo or without, writes nothing;
- objects without both ownership labels are never touched;
- a topology being deleted stays, with its finalizer, while groups name it and names
  them; without them it is gone, and its objects with it.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from support.topology_history import FOREIGN, SETTINGS, check, ops, run
from support.topology_world import store
from tandem.topology_controller.reconcile import TopologyMemo, reconcile

@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.lists(ops, min_size=1, max_size=4), min_size=1, max_size=6))
def test_objects_follow_the_nodes_and_levels_and_nothing_else_is_touched(batches):
    world = store()
    foreign = [world.create(obj) for obj in FOREIGN]
    memo = TopologyMemo()
    for now, batch in enumerate(batches):
        for op in batch:
            run(world, op)
        reconcile(world, float(now), SETTINGS, memo)
        check(world, foreign)
        again = reconcile(world, now + 0.5, SETTINGS, memo)
        assert again.writes == 0 and again.events == (), again
        fresh = reconcile(world, now + 0.7, SETTINGS)
        assert fresh.writes == 0, fresh
