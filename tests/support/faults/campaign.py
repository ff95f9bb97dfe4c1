"""Run one schedule to its end and say what it found; run many, in worker processes.

`run(schedule)` plays the fault window step by step, then lets the world settle (faults
healed) until every group is complete and its status agrees, or `settle` seconds pass;
then checks the eventual invariants. The same schedule gives the same outcome: every
clock and every draw comes from it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from support.faults.invariants import Checker, Violation
from support.faults.schedule import Schedule
from support.faults.world import World
from tandem.controller.reconcile import reconcile

CONVERGED_CHECK_EVERY = 5  # seconds of settling between two looks at whether it is over


@dataclass
class Outcome:
    seed: int
    world: str
    steps: int
    passes: int
    violations: list[Violation]
    seconds: float  # wall time (reported only, never decided on)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "world": self.world,
            "steps": self.steps,
            "passes": self.passes,
            "violations": [v.to_json() for v in self.violations],
            "counts": self.counts,
        }


def run(schedule: Schedule) -> Outcome:
    if schedule.world == "http":
        from support.faults.http import run_http

        return run_http(schedule)
    return play(World(schedule, Checker))


def play(world: World) -> Outcome:
    """Step the world through its fault window and settling; check the end."""
    started = time.perf_counter()
    schedule = world.schedule
    checker = world.checker
    assert checker is not None
    end = schedule.fault_window + schedule.settle
    steps = 0
    converged = False
    while world.t <= end and not converged:
        world.step()
        steps += 1
        settling = world.t - schedule.fault_window
        converged = settling > 0 and int(settling) % CONVERGED_CHECK_EVERY == 0 and checker.converged()
    checker.end(lambda: _one_more_pass(world) if converged else 0)
    counts = {
        "crashes": world.crashes,
        "failovers": world.failovers,
        "injected_errors": world.faults.injected,
        "start_failures": world.kubelet.start_failures,
        "pods_created": checker.created,
        "pods_replaced": checker.replaced,
        "operator_starts": sum(r.starts for r in world.replicas),
        **checker.exercised,
        **_released(world),
    }
    return Outcome(schedule.seed, schedule.world, steps, world.passes, checker.violations, time.perf_counter() - started, counts)


def _released(world: World) -> dict[str, int]:
    """How often the controller released pods: units past their gang timeout, pods not bound in time."""
    out = {"gang_timeouts": 0, "not_bound": 0}
    for event in world.store.snapshot().list("Event"):
        if event.get("reason") == "GangTimeout":
            out["gang_timeouts"] += int(event.get("count", 1))
        elif event.get("reason") == "NotBound":
            out["not_bound"] += int(event.get("count", 1))
    return out


def _one_more_pass(world: World) -> int:
    """Writes of one more pass straight on the store at the final time (0 when settled)."""
    leader = world.leader()
    now = leader.clock(world.t) if leader is not None else world.replicas[0].clock(world.t)
    return reconcile(world.store, now, delegation=world.delegation).writes
