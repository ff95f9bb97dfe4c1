"""Hand-written fault schedules a test plays by name (the campaign's own are generated)."""

from __future__ import annotations

import random
from typing import Any

from support.builders import group, role
from support.faults.schedule import Schedule


def ten_actions(seed: int) -> Schedule:
    """Issue 25's story: two operators under leader election, ten seeded actions (the
    leader killed with SIGKILL four times, scale between 1 and 3 units, three template
    changes) on a group with `affinity: prefill -> decode, Required, rack`."""
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
