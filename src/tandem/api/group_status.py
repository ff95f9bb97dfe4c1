"""The status of an InferenceGroup, typed: what `kubectl get ig -o yaml` shows.

camelCase on the wire, every time RFC 3339, conditions shaped as `metav1.Condition`.
Two owners write it, each with a merge patch of only its own keys:

- the reconcile pass: `observedGeneration`, `revision`, `replicas`, `functionalUnits`,
  `selector`, `conditions`, `roles`, `units`;
- the autoscaler: `autoscaling`.

`replicas` (units that exist) and `selector` back the scale subresource, so
`kubectl scale ig NAME --replicas=N` and an HPA can address the group; `functionalUnits`
is what a printer column shows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from tandem.api.base import StrictModel


def _timestamp(value: str) -> str:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"must be an RFC 3339 time such as 2026-01-02T03:04:05Z, not {value!r}") from exc
    return value


Timestamp = Annotated[str, AfterValidator(_timestamp)]
Count = Annotated[int, Field(ge=0)]


class Condition(StrictModel):
    """`metav1.Condition`: one aspect of the group's state, and since when it holds."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = ""
    last_transition_time: Timestamp
    observed_generation: Count = 0


class RoleStatus(StrictModel):
    """Replicas of one role over every unit (a replica counts once, whatever its pods)."""

    name: str
    replicas: Count = 0  # exist and have not failed
    scheduled_replicas: Count = 0  # every pod bound
    ready_replicas: Count = 0  # every pod Ready
    updated_replicas: Count = 0  # of the group's current revision


class CoordinationMemory(StrictModel):
    """What the coordination planners remember about a unit between steps."""

    mode: Literal["Idle", "Rollout", "Scaling", "Update"] = "Idle"
    start: dict[str, Count] = Field(default_factory=dict)
    goal: dict[str, Count] = Field(default_factory=dict)
    revision: str = ""
    step: dict[str, Count] = Field(default_factory=dict)
    step_started: Timestamp | None = None
    stalls: Count = 0
    retry_after: Timestamp | None = None


class UnitStatus(StrictModel):
    index: Count
    state: Literal["Progressing", "Complete", "Stalled"]
    reason: str = ""
    functional: bool = False  # every role at its minimum, Ready
    partial_since: Timestamp | None = None  # holding GPUs below some role's minimum since
    releases: Count = 0  # gang-timeout releases in a row (the backoff's exponent)
    retry_after: Timestamp | None = None  # a released unit is rolled out again from then
    coordination: CoordinationMemory = CoordinationMemory()


class RecommendationMemory(StrictModel):
    at: Timestamp
    values: dict[str, Count]


class AutoscalerMemory(StrictModel):
    history: list[RecommendationMemory] = Field(default_factory=list)
    panic_until: dict[str, Timestamp] = Field(default_factory=dict)
    last_change_at: Timestamp | None = None


class AutoscalingStatus(StrictModel):
    """The autoscaler's last decision and what its policy remembers."""

    last_decision_at: Timestamp
    reason: str = ""
    panic: bool = False
    desired: dict[str, Count] = Field(default_factory=dict)
    state: AutoscalerMemory = AutoscalerMemory()


class InferenceGroupStatus(StrictModel):
    observed_generation: Count = 0
    revision: str = ""
    replicas: Count = 0
    functional_units: Count = 0
    selector: str = ""
    conditions: list[Condition] = Field(default_factory=list)
    roles: list[RoleStatus] = Field(default_factory=list)
    units: list[UnitStatus] = Field(default_factory=list)
    autoscaling: AutoscalingStatus | None = None

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    def unit(self, index: int) -> UnitStatus | None:
        return next((u for u in self.units if u.index == index), None)


# The keys each owner writes; a merge patch by one never carries the other's.
RECONCILE_KEYS = ("observedGeneration", "revision", "replicas", "functionalUnits", "selector", "conditions", "roles", "units")
AUTOSCALER_KEYS = ("autoscaling",)
