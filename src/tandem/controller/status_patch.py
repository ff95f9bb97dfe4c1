"""Reading and writing the typed status (`tandem.api.group_status`) for the controller's owners.

The pure planners keep their memory in dataclasses with float seconds; the status keeps
it in RFC 3339. These functions convert both ways, keep a condition's
`lastTransitionTime` while its status holds, and build the merge patch of one owner's
keys, so neither owner ever writes back what the other wrote.
"""

from __future__ import annotations

from typing import Any, Iterable, Literal

from pydantic import ValidationError

from tandem.api.group_status import (
    AutoscalerMemory,
    Condition,
    CoordinationMemory,
    InferenceGroupStatus,
    RecommendationMemory,
)
from tandem.api.timestamps import optional_rfc3339, optional_seconds, rfc3339, seconds
from tandem.autoscaling.memory import AutoscalerState, Recommendation
from tandem.cluster.payloads import GroupPayload
from tandem.coordination.model import CoordinationStatus


def read_status(raw: GroupPayload) -> InferenceGroupStatus:
    """The group's status; an unreadable one (edited by hand, an older format) reads as empty,
    so the controller starts over rather than stops."""
    try:
        return InferenceGroupStatus.model_validate(raw.get("status") or {})
    except ValidationError:
        return InferenceGroupStatus()


def coordination_of(memory: CoordinationMemory | None) -> CoordinationStatus:
    if memory is None:
        return CoordinationStatus()
    return CoordinationStatus(
        mode=memory.mode,
        start=dict(memory.start),
        goal=dict(memory.goal),
        revision=memory.revision,
        step=dict(memory.step),
        step_started=optional_seconds(memory.step_started),
        stalls=memory.stalls,
        retry_after=optional_seconds(memory.retry_after),
        blocked=memory.blocked,
        short=dict(memory.short),
    )


def memory_of(status: CoordinationStatus) -> CoordinationMemory | None:
    """The memory to keep; None for an idle planner that remembers nothing."""
    if status == CoordinationStatus():
        return None
    return CoordinationMemory(
        mode=status.mode,
        start=dict(status.start),
        goal=dict(status.goal),
        revision=status.revision,
        step=dict(status.step),
        step_started=optional_rfc3339(status.step_started),
        stalls=status.stalls,
        retry_after=optional_rfc3339(status.retry_after),
        blocked=status.blocked,
        short={role: status.short[role] for role in sorted(status.short)},
    )


def autoscaler_state_of(memory: AutoscalerMemory) -> AutoscalerState:
    return AutoscalerState(
        history=tuple(Recommendation(seconds(r.at), dict(r.values)) for r in memory.history),
        panic_until={role: seconds(at) for role, at in memory.panic_until.items()},
        last_change_at=optional_seconds(memory.last_change_at),
    )


def autoscaler_memory_of(state: AutoscalerState) -> AutoscalerMemory:
    return AutoscalerMemory(
        history=[RecommendationMemory(at=rfc3339(r.at), values={k: r.values[k] for k in sorted(r.values)}) for r in state.history],
        panic_until={k: rfc3339(state.panic_until[k]) for k in sorted(state.panic_until)},
        last_change_at=optional_rfc3339(state.last_change_at),
    )


def condition(
    previous: Iterable[Condition], kind: str, value: bool, reason: str, message: str, now: float, generation: int
) -> Condition:
    """A `metav1.Condition`; its transition time moves only when its status does."""
    status: Literal["True", "False"] = "True" if value else "False"
    before = next((c for c in previous if c.type == kind), None)
    since = before.last_transition_time if before is not None and before.status == status else rfc3339(now)
    return Condition(
        type=kind, status=status, reason=reason, message=message, last_transition_time=since, observed_generation=generation
    )


def owned_patch(status: InferenceGroupStatus, keys: Iterable[str]) -> dict[str, Any]:
    """The merge patch `{"status": {...}}` of only `keys` (camelCase), None values left out;
    each unit without its fields at their defaults (an idle unit is its index, state and
    whether it is functional), so no unit carries empty `goal`/`step`/`revision` noise."""
    dumped = status.model_dump(by_alias=True, exclude_none=True, mode="json")
    if "units" in dumped:
        dumped["units"] = [unit.model_dump(by_alias=True, exclude_defaults=True, mode="json") for unit in status.units]
    return {"status": {key: dumped[key] for key in keys if key in dumped}}


def unchanged(raw: GroupPayload, patch: dict[str, Any]) -> bool:
    """Would the patch leave the stored status as it is?"""
    current = raw.get("status") or {}
    return all(current.get(key) == value for key, value in patch["status"].items())
