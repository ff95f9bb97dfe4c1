"""Relocation: a unit short of its desired counts is placed again whole, in an idle
domain or repacked in its own.

Minimums come first and extras grow in order, so a unit can end short of its desired
counts: in a domain that later units' minimums filled while a domain of its required
level holds nothing of this plan and would take the whole unit, or in its own domain
because replica by replica its pods fragmented the nodes (small pods on the hosts its
large pods needed). Every unit in a plan is still pending, so such a unit (with no
replica already running) is placed again as one gang of its desired counts, in an idle
domain or in its own with its own pods lifted; the room it leaves lets the units it
shared a domain with grow. No unit loses anything it had: the move is kept only when
the whole unit fits, and the others only gain room.
"""

from __future__ import annotations

import numpy as np

from tandem.placement.context import PlanContext
from tandem.placement.exclusive import Exclusivity
from tandem.placement.gang import place_gang
from tandem.placement.unit_state import UnitState
from tandem.topology import TopologyView

# How many moves one plan may try (each is one gang placement).
RELOCATION_ATTEMPTS = 64


def relocate_short_units(context: PlanContext, units: list[UnitState], free: np.ndarray, exclusivity: Exclusivity) -> bool:
    """Place short units again whole, in an idle domain of their required level or their
    own; True if any moved."""
    moved = False
    budget = RELOCATION_ATTEMPTS
    busy: dict[tuple[TopologyView, int], np.ndarray] = {}  # (view, depth) -> domains holding a pod of this plan
    for unit in units:
        if budget <= 0:
            break
        if not _short(unit) or any(role.existing for role in unit.roles):
            continue
        key = (unit.view, unit.required_depth)
        if key not in busy:
            busy[key] = _busy_domains(unit, units)
        doms = unit.view.dom[unit.required_depth]
        own = unit.domain[1] if unit.domain is not None else -1
        open_to = exclusivity.open_to(unit)
        budget -= 1
        trial = free.copy()
        saved = unit.release(trial)
        allowed = unit.allowed
        whole = {r: role.demand.desired for r, role in enumerate(unit.roles) if role.demand.desired > 0}
        placed = False
        # Idle domains first (the unit's room goes to its neighbours), then its own, repacked.
        for where in (open_to & ~np.isin(doms, busy[key]), open_to & (doms == own)):
            unit.allowed = where
            if where.any() and place_gang(context, unit, trial, whole, trials=1):  # any domain that takes it whole will do
                placed = True
                break
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
