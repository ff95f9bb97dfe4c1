"""The group's conditions, and the group in a word, from what the status pass counted.

Every condition carries a CamelCase reason and, whenever it is not True (and for
Scheduled and Available always), a message a person can act on, in the engine's and the
planners' words: never an empty message on a False condition, never the reason `None`.
`state` and `message` are what `kubectl get ig` (STATUS) and `-o wide` (MESSAGE) show:
the most urgent of Invalid, Degraded (a write the API refused), Stalled, Unschedulable,
Pending, Progressing, Degraded (below a minimum it had), else Ready. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from tandem.api.group_status import RoleStatus, UnitStatus
from tandem.controller.event_digest import fold

_SHOWN = 3  # units named in a message before "and N more"
NEVER_FITS = "NeverFits"  # the Scheduled reason of a group no unit of which could ever fit (`fit.py`)


@dataclass(frozen=True)
class Health:
    """What `_status` counted, in the terms the conditions speak."""

    units: Sequence[UnitStatus]  # every unit, in index order
    roles: Sequence[RoleStatus]
    available: bool  # every unit has every role at its minimum Ready
    scheduled: bool  # every desired replica bound
    below: Sequence[tuple[int, str]] = ()  # units short of a minimum: (index, "decode 0/1 Ready")
    updating: str = ""  # the revision being rolled out, while replicas of another remain
    degraded: bool = False  # below a minimum while some replicas are Ready
    faults: Sequence[tuple[str, str]] = field(default_factory=tuple)  # (reason, message): writes the API refused, a name taken
    never_fit: str | None = None  # why no unit could ever fit the nodes (`fit.py`): Scheduled says so


@dataclass(frozen=True)
class Verdict:
    conditions: tuple[tuple[str, bool, str, str], ...]  # (type, status, reason, message)
    state: str
    message: str


def verdict(h: Health) -> Verdict:
    by_state: dict[str, list[UnitStatus]] = {}
    for unit in h.units:
        by_state.setdefault(unit.state, []).append(unit)
    total = sum(r.desired_replicas for r in h.roles)
    bound = sum(min(r.scheduled_replicas, r.desired_replicas) for r in h.roles)
    functional = sum(1 for u in h.units if u.functional)
    count = len(h.units)
    unschedulable, pending = _said(by_state.get("Unschedulable", [])), by_state.get("Pending", [])
    stalled = _said(by_state.get("Stalled", []))
    moving = by_state.get("Progressing", [])

    if h.scheduled:
        scheduled = ("Scheduled", True, "AllScheduled", f"{bound} of {total} replicas scheduled")
    elif unschedulable:
        scheduled = ("Scheduled", False, "Unschedulable", unschedulable)
    elif pending:
        scheduled = ("Scheduled", False, "Pending", f"{bound} of {total} replicas scheduled; {_units(pending)} waiting for a node or to be bound")
    else:
        scheduled = ("Scheduled", False, "StepsPending", f"{bound} of {total} replicas scheduled; the rest wait for their rollout step")
    if h.never_fit is not None:  # the units' words when they say it (`NeverFits: ...`), else the shortfall
        scheduled = ("Scheduled", False, NEVER_FITS, scheduled[3] if NEVER_FITS in scheduled[3] else h.never_fit)

    if not count:
        available = ("Available", True, "NoUnits", "spec.replicas is 0: nothing to serve")
    elif h.available:
        available = ("Available", True, "MinimumsReady", f"{functional} of {count} units functional (every role at its minimum Ready)")
    else:
        short = fold([f"unit {index}: {what}" for index, what in h.below]) if h.below else "no unit has every role at its minimum Ready"
        available = ("Available", False, "BelowMinimum", f"{functional} of {count} units functional; {short}")

    if h.updating:
        progressing = ("Progressing", True, "Updating", f"rolling out revision {h.updating}: " + ", ".join(
            f"{r.name} {r.updated_replicas}/{r.desired_replicas} updated" for r in h.roles))
    elif moving or pending or unschedulable:
        busy = [*moving, *pending, *by_state.get("Unschedulable", [])]
        first = next((u.reason for u in moving if u.reason), "")
        progressing = ("Progressing", True, "Progressing", f"{_units(busy)} not complete" + (f"; {first}" if first else ""))
    else:
        progressing = ("Progressing", False, "Settled", "every unit is complete")

    if stalled:
        stall = ("Stalled", True, "StepTimedOut", stalled)
    else:
        stall = ("Stalled", False, "NoTimeout", "no step has outlived its timeout")

    if h.faults:
        reason = h.faults[0][0]
        degraded = ("Degraded", True, reason, "; ".join(message for _, message in h.faults))
    elif h.degraded:
        degraded = ("Degraded", True, "BelowMinimum", available[3])
    else:
        degraded = ("Degraded", False, "AsExpected", "no write refused, no unit below a minimum it had")

    conditions = (("Accepted", True, "Valid", "the spec is valid"), scheduled, available, progressing, stall, degraded)
    if h.faults:
        state, message = "Degraded", degraded[3]
    elif stalled:
        state, message = "Stalled", stalled
    elif unschedulable:
        state, message = "Unschedulable", unschedulable
    elif pending:
        state, message = "Pending", scheduled[3]
    elif h.updating or moving:
        state, message = "Progressing", progressing[3]
    elif h.degraded or not h.available:
        state, message = "Degraded", available[3]
    else:
        state, message = "Ready", ""
    return Verdict(conditions, state, message)


def _said(units: list[UnitStatus]) -> str:
    """The units' own words, folded: `units 3-5 (3): no rack has room for ...`; units
    whose words the status does not keep (beyond the first 100) only counted."""
    said = [f"unit {u.index}: {u.reason}" for u in units if u.reason]
    quiet = len(units) - len(said)
    more = f"{quiet} more unit{'s' if quiet != 1 else ''} {units[0].state.lower()}" if quiet else ""
    return "; ".join(part for part in (fold(said) if said else "", more) if part)


def _units(units: Sequence[UnitStatus]) -> str:
    indexes = sorted(u.index for u in units)
    if len(indexes) == 1:
        return f"unit {indexes[0]}"
    shown = ", ".join(map(str, indexes[:_SHOWN]))
    return f"units {shown}" + (f" and {len(indexes) - _SHOWN} more" if len(indexes) > _SHOWN else "")
