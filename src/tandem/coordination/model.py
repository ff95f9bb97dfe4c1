"""What the coordination planners read and return.

A planner is a function `(spec, observed, now) -> Decision`. `observed` is what the
cluster reports for one unit: its replicas (role, index, revision, phase, when created)
and the coordination status the controller last wrote to the group (`CoordinationStatus`).
The planner keeps no memory of its own: anything it needs to remember across steps
goes into the status it returns, which the controller persists with the group, so a
restarted controller resumes exactly where the last one stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, Mapping

from tandem.api.resources import InferenceGroup

# Gated: created but held back by coordination; Pending: admitted, not yet bound;
# Scheduled: bound to a node; Ready: serving; Failed: gone, to be replaced.
Phase = Literal["Gated", "Pending", "Scheduled", "Ready", "Failed"]
Progression = Literal["OrderScheduled", "OrderReady"]
State = Literal["Progressing", "Complete", "Stalled"]
Mode = Literal["Idle", "Rollout", "Scaling", "Update"]

# Phases that count as having reached a step, per progression.
REACHED: dict[str, frozenset[str]] = {
    "OrderScheduled": frozenset({"Scheduled", "Ready"}),
    "OrderReady": frozenset({"Ready"}),
}
# A stalled step is retried after BACKOFF_BASE * 2**(stalls-1) seconds, at most BACKOFF_CAP.
BACKOFF_BASE = 30.0
BACKOFF_CAP = 600.0


def backoff_seconds(attempt: int) -> float:
    """How long to wait before retry number `attempt` (1, 2, ...): 30 s doubling, at most 600 s.
    Used for a stalled step and for a unit released after its gang timeout."""
    return min(BACKOFF_BASE * 2.0 ** (max(attempt, 1) - 1), BACKOFF_CAP)


@dataclass(frozen=True)
class RoleSpec:
    name: str
    replicas: int
    minimum: int


@dataclass(frozen=True)
class UnitSpec:
    """The coordination-relevant part of an InferenceGroup, for one unit."""

    roles: tuple[RoleSpec, ...]
    revision: str
    rollout_steps: Mapping[str, int] | None = None
    rollout_progression: Progression = "OrderScheduled"
    step_timeout: float = 600.0
    scaling_max_skew: int | str = 1
    scaling_progression: Progression = "OrderScheduled"
    max_surge: int | str = 1
    max_unavailable: int | str = 0
    update_max_skew: int | str = 1

    @classmethod
    def from_group(cls, group: InferenceGroup, revision: str) -> "UnitSpec":
        c = group.spec.coordination
        return cls(
            roles=tuple(RoleSpec(r.name, r.replicas, r.minimum) for r in group.spec.roles),
            revision=revision,
            rollout_steps=dict(c.rollout.steps) if c.rollout.steps else None,
            rollout_progression=c.rollout.progression,
            step_timeout=float(c.rollout.step_timeout_seconds),
            scaling_max_skew=c.scaling.max_skew,
            scaling_progression=c.scaling.progression,
            max_surge=c.rolling_update.max_surge,
            max_unavailable=c.rolling_update.max_unavailable,
            update_max_skew=c.rolling_update.max_skew,
        )

    def role(self, name: str) -> RoleSpec:
        return next(r for r in self.roles if r.name == name)

    def targets(self) -> dict[str, int]:
        return {r.name: r.replicas for r in self.roles}


@dataclass(frozen=True)
class Replica:
    role: str
    index: int
    revision: str
    phase: Phase
    created: float = 0.0


@dataclass(frozen=True)
class CoordinationStatus:
    """What the planners need to remember between steps; persisted by the controller."""

    mode: Mode = "Idle"
    start: Mapping[str, int] = field(default_factory=dict)  # counts per role when the change began
    goal: Mapping[str, int] = field(default_factory=dict)  # the targets that change was heading to
    revision: str = ""  # the revision an update is heading to
    step: Mapping[str, int] = field(default_factory=dict)  # counts the current step asked for
    step_started: float | None = None
    stalls: int = 0
    retry_after: float | None = None
    # Why the step's admitted replicas have no node yet, in the placement engine's words
    # (the controller writes it after each placement, "" once nothing waits): a planner
    # reports it, and a rolling update allowed unavailability replaces in place on it.
    blocked: str = ""
    short: Mapping[str, int] = field(default_factory=dict)  # per role: admitted replicas the engine found no room for

    def with_step(self, step: Mapping[str, int], now: float) -> "CoordinationStatus":
        return replace(self, step=dict(step), step_started=now)


@dataclass(frozen=True)
class Observed:
    replicas: tuple[Replica, ...]
    status: CoordinationStatus = CoordinationStatus()

    def live(self, role: str, revision: str | None = None) -> list[Replica]:
        """Replicas of `role` that exist and have not failed (of `revision`, if given)."""
        return [
            r
            for r in self.replicas
            if r.role == role and r.phase != "Failed" and (revision is None or r.revision == revision)
        ]

    def count(self, role: str, revision: str | None = None, phases: frozenset[str] | None = None) -> int:
        return sum(1 for r in self.live(role, revision) if phases is None or r.phase in phases)


@dataclass(frozen=True)
class Create:
    role: str
    revision: str
    count: int


@dataclass(frozen=True)
class Delete:
    role: str
    index: int
    why: str


@dataclass(frozen=True)
class Ungate:
    """An existing replica held back (phase Gated) that the current step now admits."""

    role: str
    index: int


@dataclass(frozen=True)
class Decision:
    """The next step: replicas to create and delete, and the unit's coordination state."""

    state: State
    reason: str
    targets: Mapping[tuple[str, str], int]  # (role, revision) -> replicas wanted now
    create: tuple[Create, ...] = ()
    delete: tuple[Delete, ...] = ()
    status: CoordinationStatus = CoordinationStatus()
    ungate: tuple[Ungate, ...] = ()


# Which replicas go first when a side shrinks: the least advanced, then the highest index.
_DELETE_ORDER = {"Gated": 0, "Pending": 1, "Scheduled": 2, "Ready": 3}


def surplus(replicas: list[Replica], keep: int, why: str) -> list[Delete]:
    """Deletes that leave `keep` of `replicas`: least advanced first, then the highest index."""
    order = sorted(replicas, key=lambda r: (_DELETE_ORDER.get(r.phase, 0), -r.index))
    return [Delete(r.role, r.index, why) for r in order[: max(len(replicas) - keep, 0)]]
