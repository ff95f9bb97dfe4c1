"""Repair: move earlier units' minimums when a later unit is stranded behind them."""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from tandem.placement.context import PlanContext
from tandem.placement.exclusive import Exclusivity
from tandem.placement.gang import place_gang
from tandem.placement.reservations import Reservations
from tandem.placement.unit_state import UnitState

# How many gang placements repairs may spend in one plan, in all, and for one stranded
# unit: the second keeps one hopeless unit from spending what a later one needs.
REPAIR_ATTEMPTS = 256
REPAIR_PER_UNIT = 24


def make_room(
    context: PlanContext,
    unit: UnitState,
    needs: Mapping[int, int],
    placed: list[UnitState],
    free: np.ndarray,
    reservations: Reservations,
    exclusivity: Exclusivity,
    budget: list[int],
    needs_of: Callable[[UnitState], Mapping[int, int]] | None = None,
) -> bool:
    """Place `unit` by moving earlier units' minimums elsewhere, if that works for all.

    Greedy order can strand a unit behind earlier ones that took the only domain it fits,
    while they would have fitted elsewhere too. All units here are still pending, so they
    may move: release every earlier unit in one domain of `unit`'s pack level, place
    `unit`, re-place the released ones in their order. Accepted only when every one
    succeeds, so no unit ever loses its minimum and the priority/age promise holds. The
    smallest sets are tried first; `budget` caps the gang placements per plan, and
    REPAIR_PER_UNIT those spent on one unit. `needs_of` gives what a released unit is
    placed again with: its minimum gang, or (whole units first, `whole.py`) its whole.
    """
    if budget[0] < 2:
        return False
    spent = 0
    for movers in _eviction_sets(unit, placed):
        cost = 1 + len(movers)
        if budget[0] < cost or spent + cost > REPAIR_PER_UNIT:
            return False
        budget[0] -= cost
        spent += cost
        trial = free.copy()
        saved = [other.release(trial) for other in movers]
        kept, held = reservations.copy(), exclusivity.copy()
        for other in movers:
            kept.drop(other.order)
            held.claim(other)  # released: it holds nothing now
        unit.allowed = held.open_to(unit)
        if place_gang(context, unit, trial, needs, kept):
            kept.note(unit, trial)
            held.claim(unit)
            for other in movers:
                other.allowed = held.open_to(other)
                if not place_gang(context, other, trial, (needs_of or UnitState.minimum_needs)(other), kept):
                    break
                kept.note(other, trial)
                held.claim(other)
            else:
                free[:] = trial
                exclusivity.adopt(held)
                for other in movers:
                    reservations.note(other, free)
                return True
            for other in movers:
                other.release(None)
            unit.release(None)
        for other, state in zip(movers, saved):
            other.restore(state)
    return False


def _eviction_sets(unit: UnitState, placed: list[UnitState], largest: int = 4) -> list[list[UnitState]]:
    """Sets of earlier units to move: those sharing one domain of `unit`'s pack level or of
    any narrower level (a rack, a host), since a narrower constraint such as a rack-level
    affinity is often what strands a unit.

    Without a pack level each earlier unit alone is a set as well. Distinct sets, ordered
    by size, then depth (narrowest first), then domain number; larger than `largest` are
    not tried.
    """
    view = unit.view
    # Units with running replicas cannot move; only what this plan placed may.
    same_view = [other for other in placed if other.view is view and not any(role.existing for role in other.roles)]
    found: dict[tuple[int, ...], tuple[int, int, int]] = {}
    members: dict[tuple[int, ...], list[UnitState]] = {}
    if unit.required_depth == 0:
        for other in reversed(same_view):
            found[(other.order,)] = (1, 0, -other.order)
            members[(other.order,)] = [other]
    for depth in range(max(unit.required_depth, 1), view.depth_count):
        by_domain: dict[int, list[UnitState]] = {}
        for other in same_view:
            nodes = [n for role in other.roles for replica in role.placed for n in replica]
            for domain in sorted({int(view.dom[depth][n]) for n in nodes}):
                by_domain.setdefault(domain, []).append(other)
        for domain, units in by_domain.items():
            key = tuple(other.order for other in units)
            if len(units) <= largest and key not in found:
                found[key] = (len(units), -depth, domain)
                members[key] = units
    return [members[key] for key in sorted(found, key=lambda k: found[k])]
