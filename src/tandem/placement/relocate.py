"""Relocation: a unit short of its desired counts moves whole into an idle domain.

Minimums come first and extras grow in order, so a unit can end short of its desired
counts in a domain that later units' minimums filled, while a domain of its required
level holds nothing of this plan and would take the whole unit. Every unit in a plan is
still pending, so such a unit (with no replica already running) is moved there whole;
the room it leaves lets the units it shared a domain with grow. No unit loses anything
it had: the move is kept only when the whole unit fits, and the others only gain room.
"""

from __future__ import annotations

import numpy as np

from tandem.placement.exclusive import Exclusivity
from tandem.placement.gang import place_gang
from tandem.placement.state import UnitState

# How many moves one plan may try (each is one gang placement).
RELOCATION_ATTEMPTS = 64


def relocate_short_units(units: list[UnitState], free: np.ndarray, exclusivity: Exclusivity) -> bool:
    """Move short units whole into idle domains of their required level; True if any moved."""
    moved = False
    budget = RELOCATION_ATTEMPTS
    busy: dict[tuple, np.ndarray] = {}  # (view, depth) -> domains holding a pod of this plan
    for unit in units:
        if budget <= 0:
            break
        if not _short(unit) or any(role.existing for role in unit.roles) or unit.required_depth == 0:
            continue
        key = (unit.view, unit.required_depth)
        if key not in busy:
            busy[key] = _busy_domains(unit, units)
        idle = exclusivity.open_to(unit) & ~np.isin(unit.view.dom[unit.required_depth], busy[key])
        if not idle.any():
            continue
        budget -= 1
        trial = free.copy()
        saved = unit.release(trial)
        allowed = unit.allowed
        unit.allowed = idle
        whole = {r: role.demand.desired for r, role in enumerate(unit.roles) if role.demand.desired > 0}
        placed = place_gang(unit, trial, whole, trials=1)  # any idle domain that takes it whole will do
        unit.allowed = allowed
        if placed and not _short(unit):
            free[:] = trial
            moved = True
            busy.clear()
            exclusivity.claim(unit)
        else:
            unit.release(None)
            unit.restore(saved)
    return moved


def _short(unit: UnitState) -> bool:
    return unit.functional and any(len(role.placed) < role.demand.desired for role in unit.roles)


def _busy_domains(unit: UnitState, units: list[UnitState]) -> np.ndarray:
    """Domains of `unit`'s required level (in its view) that hold a pod of this plan."""
    nodes = np.array([n for other in units for n in other.nodes()], dtype=np.int64)
    return np.unique(unit.view.dom[unit.required_depth][nodes])
