"""Issue 25, item 1's update half, in the fault world: two operators under leader election,
a seeded sequence of ten actions (the leader killed with SIGKILL four times, scale between
1 and 3 units, three template changes) on a group with `affinity: prefill → decode,
Required, rack`. Every replica an update creates keeps the affinity with the replicas that
remain, and the group settles: every pod on one revision, the counts the spec asks for.
(The seeds are ones that broke the affinity before: a new prefill placed beside an old
decode that then went, or beside a decode the engine added beyond the desired count.)"""

from __future__ import annotations

import random
from typing import Any

import pytest

from support.builders import group, role
from support.faults.campaign import play
from support.faults.invariants import Checker
from support.faults.schedule import Schedule
from support.faults.world import World
from tandem.api.naming import REVISION_LABEL
from tandem.cluster.pods import pod_failed


def ten_actions(seed: int) -> Schedule:
    rng = random.Random(seed)
    g = group("g0", [role("prefill", 3, 1, gpus=2), role("decode", 2, 1, gpus=2, pods=2)], replicas=2, required="block",
              affinity=[{"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}])
    g["spec"]["scheduler"] = {"gangTimeoutSeconds": 60}
    g["spec"]["coordination"] = {"rollout": {"stepTimeoutSeconds": 120}, "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    events: list[dict[str, Any]] = [{"at": 0.0, "type": "create", "group": "g0"}]
    kinds = ["failover"] * 4 + ["scale"] * 2 + ["template"] * 3
    rng.shuffle(kinds)
    t, revision = 20.0, 0
    for kind in kinds:
        t += rng.randint(5, 25)
        if kind == "failover":
            events.append({"at": t, "type": "failover", "graceful": False, "restart_after": 5.0})
        elif kind == "scale":
            events.append({"at": t, "type": "scale", "group": "g0", "replicas": rng.randint(1, 3)})
        else:
            revision += 1
            events.append({"at": t, "type": "template", "group": "g0", "revision": revision})
    clocks = [{"offset": 0.0, "rate": 1.0}, {"offset": 1.0, "rate": 1.0}]
    return Schedule(seed, "block=1,rack=2,host=4", {"g0": g}, events, 2, clocks, fault_window=t + 10, settle=400)


@pytest.mark.parametrize("seed", [0, 1, 3, 4, 9])
def test_an_update_under_failovers_keeps_required_affinity_and_settles(seed):
    world = World(ten_actions(seed), Checker)
    outcome = play(world)
    assert outcome.ok, [(v.invariant, v.detail) for v in outcome.violations]
    g = world.store.get("InferenceGroup", "serving", "g0")
    pods = [p for p in world.store.list("Pod") if not pod_failed(p)]
    assert len(pods) == g["spec"]["replicas"] * (3 + 2 * 2), "the counts the spec asks for"
    assert len({p["metadata"]["labels"][REVISION_LABEL] for p in pods}) == 1, "one revision"
