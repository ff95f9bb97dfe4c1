"""The status of an InferenceGroup, typed: what `kubectl get ig -o yaml` shows.

camelCase on the wire, every time RFC 3339, conditions shaped as `metav1.Condition`.
Two owners write it, each with a merge patch of only its own keys:

- the reconcile pass: `observedGeneration`, `revision`, `replicas`, `functionalUnits`,
  `selector`, `state`, `message`, `ready`, `conditions`, `roles`, `unitStates`, `units`, `creations`;
- the autoscaler: `autoscaling`, and in `conditions` its own `ScalingActive` entry (the
  reconcile pass keeps it as read, and drops it once the group has no `spec.autoscaling`).

`replicas` (units that exist) and `selector` back the scale subresource, so
`kubectl scale ig NAME --replicas=N` and an HPA can address the group; `functionalUnits`,
`state`, `ready`, `revision` and `message` are what the printer columns show (a JSONPath
column cannot format "prefill 2/2", so `ready` is that text).

Empty is absent: a unit's fields at their defaults (an idle unit's coordination memory,
`releases: 0`, an empty reason) are left out of what is written, and the CRD schema gives
no defaults under `status`, so what the server stores is exactly what was written and a
settled group compares equal (no status patch). Bounded: beyond `LISTED_UNITS` units,
`units` lists only the units that are not simply Complete (the others are counted in
`unitStates`), and only the first `LISTED_UNITS` of those keep their words (reason,
domain); the rest keep what the planners must remember. See `list_units`.
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
    """`metav1.Condition`: one aspect of an object's state, and since when it holds."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = ""
    last_transition_time: Timestamp
    observed_generation: Count = 0


class RoleStatus(StrictModel):
    """Replicas of one role over every unit (a replica counts once, whatever its pods)."""

    name: str
    desired_replicas: Count = 0  # the spec's replicas per unit, times the units
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
    blocked: str = ""  # why the step's replicas wait for a node, in the engine's words
    short: dict[str, Count] = Field(default_factory=dict)  # per role: replicas the engine found no room for


# A unit's state, most urgent first: Stalled (a step timed out), Unschedulable (the engine
# found no room: `reason` says why), Pending (pods wait for a node or to be bound),
# Progressing (bound, starting, or a step under way), Complete (nothing left to do).
UnitState = Literal["Stalled", "Unschedulable", "Pending", "Progressing", "Complete"]
UNIT_STATES: tuple[str, ...] = ("Stalled", "Unschedulable", "Pending", "Progressing", "Complete")
# Above this many units, `units` lists only units that are not simply Complete, and only
# the first LISTED_UNITS of those with their words; at most REMEMBERED_UNITS in all (about
# 200 bytes each without words: the status stays far below etcd's 1.5 MiB per object).
LISTED_UNITS = 100
REMEMBERED_UNITS = 4000


class UnitStatus(StrictModel):
    index: Count
    state: UnitState
    reason: str = ""
    domain: str = ""  # where its pods are: the narrowest domain holding them all, "level/name"
    functional: bool = False  # every role at its minimum, Ready
    partial_since: Timestamp | None = None  # holding GPUs below some role's minimum since
    releases: Count = 0  # gang-timeout releases in a row (the backoff's exponent)
    retry_after: Timestamp | None = None  # a released unit is rolled out again from then
    coordination: CoordinationMemory | None = None  # None: idle, nothing remembered

    def quiet(self) -> bool:
        """Complete with nothing remembered: what an unlisted unit reads as."""
        return (
            self.state == "Complete" and self.functional and not self.reason and self.coordination is None
            and self.partial_since is None and self.releases == 0 and self.retry_after is None
        )


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
    state: str = ""  # the group in a word (Ready, Progressing, Pending, Unschedulable, Stalled, Degraded, Invalid, BackendUnavailable)
    message: str = ""  # why, when it is not Ready
    ready: str = ""  # per role, Ready replicas over desired, all units: "prefill 2/2, decode 1/1"
    conditions: list[Condition] = Field(default_factory=list)
    roles: list[RoleStatus] = Field(default_factory=list)
    unit_states: dict[str, Count] = Field(default_factory=dict)  # every unit, by state (listed or not), each state present
    units: list[UnitStatus] = Field(default_factory=list)
    # The number of the last pass whose pod creates all went through (each pod carries its
    # pass's number, `naming.CREATION`; a patch after the creates, skipped if one failed;
    # raised to the highest number read when no replica lacks a pod): a replica whose pods
    # are numbered up to it was created whole (see `cluster.replicas.replicas_of_unit`).
    creations: Count = 0
    autoscaling: AutoscalingStatus | None = None

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    def unit(self, index: int) -> UnitStatus | None:
        """The unit as listed; an unlisted one (see `list_units`) reads as None, the same as
        Complete with nothing remembered."""
        return next((u for u in self.units if u.index == index), None)


def worded(units: list[UnitStatus], limit: int = LISTED_UNITS) -> list[UnitStatus]:
    """The units as the status keeps their words: all of them up to `limit` units; beyond
    it only the first `limit` that are not quiet keep theirs (reason, domain). What the
    group's conditions say is read from these, so a pass that knows every unit's words (the
    engine ran) and one that reads them back from the status say the same."""
    if len(units) <= limit:
        return units
    out, loud = [], 0
    for unit in units:
        loud += not unit.quiet()
        out.append(unit if unit.quiet() or loud <= limit else unit.model_copy(update={"reason": "", "domain": ""}))
    return out


def list_units(units: list[UnitStatus], limit: int = LISTED_UNITS, most: int = REMEMBERED_UNITS) -> list[UnitStatus]:
    """The units `status.units` lists: all of them up to `limit`; beyond it, only those
    that are not quiet (Complete, nothing remembered), and of those only the first
    `limit` keep their words (`worded`): the rest keep what the planners remember
    (coordination, partialSince, releases, retryAfter), which cannot be recomputed; and
    no more than `most`: a unit beyond that starts its planners' memory over each pass
    (its step timer too), the price of an object etcd still takes."""
    if len(units) <= limit:
        return units
    return [u for u in worded(units, limit) if not u.quiet()][:most]


# The keys each owner writes; a merge patch by one never carries the other's.
RECONCILE_KEYS = (
    "observedGeneration", "revision", "replicas", "functionalUnits", "selector", "state", "message", "ready",
    "conditions", "roles", "unitStates", "units", "creations",
)
AUTOSCALER_KEYS = ("autoscaling",)
# The autoscaler's own entry in `conditions`: written by it alone, kept by the reconcile
# pass as read while the group has `spec.autoscaling` (dropped once it has none).
AUTOSCALING_CONDITION = "ScalingActive"
