"""Issue 25, item 1's update half, in the fault world: two operators under leader election,
a seeded sequence of ten actions (the leader killed with SIGKILL four times, scale between
1 and 3 units, three template changes) on a group with `affinity: prefill → decode,
Required, rack`. Every replica an update creates keeps the affinity with the replicas that
remain, and the group settles: every pod on one revision, the counts the spec asks for.
(The seeds are ones that broke the affinity before: a new prefill placed beside an old
decode that then went, or beside a decode the engine added beyond the desired count.)"""

from __future__ import annotations

import pytest

from support.faults.campaign import play
from support.faults.invariants import Checker
from support.faults.stories import ten_actions
from support.faults.world import World
from tandem.api.naming import REVISION_LABEL
from tandem.cluster.pods import pod_failed


@pytest.mark.parametrize("seed", [0, 1, 3, 4, 9])
def test_an_update_under_failovers_keeps_required_affinity_and_settles(seed):
    world = World(ten_actions(seed), Checker)
    outcome = play(world)
    assert outcome.ok, [(v.invariant, v.detail) for v in outcome.violations]
    g = world.store.get("InferenceGroup", "serving", "g0")
    pods = [p for p in world.store.list("Pod") if not pod_failed(p)]
    assert len(pods) == g["spec"]["replicas"] * (3 + 2 * 2), "the counts the spec asks for"
    assert len({p["metadata"]["labels"][REVISION_LABEL] for p in pods}) == 1, "one revision"
