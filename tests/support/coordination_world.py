"""A toy world for the coordination planners: creates land as Ready (or fail, or hang)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from tandem.coordination.model import CoordinationStatus, Decision, Observed, Replica, UnitSpec
from tandem.coordination.planner import next_step


@dataclass
class Trace:
    steps: list[tuple[list[Replica], Decision]] = field(default_factory=list)

    @property
    def last(self) -> Decision:
        return self.steps[-1][1]


def run(
    spec: UnitSpec,
    replicas: list[Replica],
    *,
    seed: int = 0,
    fail_rate: float = 0.0,
    fail_until: int = 0,
    stuck_roles: frozenset[str] = frozenset(),
    crash_steps: frozenset[int] = frozenset(),
    tick: float = 1.0,
    max_steps: int = 300,
) -> Trace:
    """Step the planner until Complete; failures only before step `fail_until`."""
    rng = random.Random(seed)
    world = list(replicas)
    status = CoordinationStatus()
    now = 0.0
    trace = Trace()
    for number in range(max_steps):
        decision = next_step(spec, Observed(tuple(world), status), now)
        trace.steps.append((list(world), decision))
        if decision.state == "Complete":
            break
        gone = {(d.role, d.index) for d in decision.delete}
        world = [r for r in world if (r.role, r.index) not in gone]
        for create in decision.create:
            start = max((r.index for r in world if r.role == create.role), default=-1) + 1
            for k in range(create.count):
                if create.role in stuck_roles:
                    phase = "Pending"
                elif number < fail_until and rng.random() < fail_rate:
                    phase = "Failed"
                else:
                    phase = "Ready"
                world.append(Replica(create.role, start + k, create.revision, phase, now))
        status = CoordinationStatus() if number in crash_steps else decision.status
        now += tick
    return trace


def counts(world: list[Replica], role: str, revision: str | None = None, ready: bool = False) -> int:
    return sum(
        1
        for r in world
        if r.role == role and r.phase != "Failed" and (revision is None or r.revision == revision) and (not ready or r.phase == "Ready")
    )
