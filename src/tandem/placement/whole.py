"""Whole units first: another plan when the greedy one leaves a unit short.

The greedy plan takes units one at a time in placement order, minimums before extras,
and chooses each unit's domain with what it can see then (tiers, a short lookahead,
best fit). Bin packing one unit at a time is greedy in that order: a unit can take the
one block a later unit needed whole while another block would have held it too
(fits-whole-21), or the only 8-GPU host a later unit's Required pair needed
(fits-whole-30018). Then a unit ends short although every unit would fit whole.

So when the greedy plan leaves a functional unit short of its desired counts, the engine
plans once more with every functional unit placed WHOLE (one gang of its desired
counts, the same domain choice and assignment as a minimum gang), in up to four
orders: placement order; largest first, as first-fit-decreasing bin packing does;
smallest first; the narrowest required level first (the most constrained), largest
first within a level. Sizes are the unit's largest share of any resource of the
cluster. A unit that does not fit whole may move earlier ones (`repair.make_room`,
with whole gangs). The second plan is kept only when EVERY unit the greedy plan made functional
ends `Placed` in it; units the greedy plan left `Unschedulable` stay so and hold
nothing. Nobody loses anything: each unit gets all it asked for, so minimums still come
before extras (no unit's minimum is given up for another's extras), and a unit whose
pods moved ends `Placed`, as with relocation.

Cost: nothing unless a unit ends short and the units' whole demand fits the cluster's
free capacity in every resource (a necessary condition; a plan with more demand than
capacity is left to the greedy); then at most four more plans, with repairs sharing
one budget (REPAIR_ATTEMPTS gang placements), stopping at the first unit that does not
fit whole.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from tandem.placement.context import PlanContext
from tandem.placement.demand import UnitDemand
from tandem.placement.exclusive import Exclusivity
from tandem.placement.gang import place_gang
from tandem.placement.repair import REPAIR_ATTEMPTS, make_room
from tandem.placement.reservations import Reservations
from tandem.placement.unit_state import UnitState
from tandem.topology import ClusterSnapshot, TopologyView


def whole_units(
    snapshot: ClusterSnapshot,
    views: Mapping[str, TopologyView],
    units: Sequence[UnitDemand],
    greedy: list[UnitState],
    prepare: Callable[[Sequence[UnitDemand]], tuple[list[UnitState], PlanContext]],
) -> list[UnitState] | None:
    """The units' states in a plan where every functional unit of `greedy` is placed
    whole, or None when the greedy plan leaves none short or no such plan is found.

    `prepare` makes fresh states for units in the order given, and their plan's context
    (as the engine does)."""
    functional = [unit.order for unit in greedy if unit.functional]
    if all(_whole(greedy[i]) for i in functional) or not _may_fit(snapshot, [greedy[i] for i in functional]):
        return None
    totals = snapshot.totals
    share = {i: _share(greedy[i], totals) for i in functional}
    orders: list[list[int]] = []
    depth = {i: greedy[i].required_depth for i in functional}
    for order in (
        functional,
        sorted(functional, key=lambda i: (-share[i], i)),
        sorted(functional, key=lambda i: (share[i], i)),
        sorted(functional, key=lambda i: (-depth[i], -share[i], i)),
    ):
        if order not in orders:
            orders.append(order)
    budget = [REPAIR_ATTEMPTS]
    for order in orders:
        states, context = prepare([units[i] for i in order])
        if _all_whole(context, snapshot, views, states, greedy, budget):
            out = list(greedy)
            for position, i in enumerate(order):
                out[i] = states[position]
            return out
    return None


def whole_needs(unit: UnitState) -> dict[int, int]:
    """Role index -> new replicas for the unit's desired counts (running ones count)."""
    return {r: role.demand.desired - role.existing for r, role in enumerate(unit.roles) if role.demand.desired > role.existing}


def _whole(unit: UnitState) -> bool:
    return all(len(role.placed) >= role.demand.desired for role in unit.roles)


def _demand(unit: UnitState) -> np.ndarray:
    """Resources of the replicas the unit still needs for its desired counts."""
    return sum((count * unit.roles[r].replica_total for r, count in whole_needs(unit).items()), np.zeros_like(unit.roles[0].leader))


def _share(unit: UnitState, totals: np.ndarray) -> float:
    """The unit's largest share of any resource of the cluster (its size for ordering)."""
    demand = _demand(unit)
    return float(np.max(np.where(totals > 0, demand / np.maximum(totals, 1), 0.0), initial=0.0))


def _may_fit(snapshot: ClusterSnapshot, units: Sequence[UnitState]) -> bool:
    """Whether the units' whole demand fits the cluster's free capacity, resource by
    resource (necessary for every unit to be placed whole; checked before any work)."""
    if not units:
        return False
    demand = sum((_demand(unit) for unit in units), np.zeros(snapshot.free.shape[1], np.int64))
    usable = np.zeros(len(snapshot.node_names), dtype=bool)
    for unit in units:
        usable |= unit.eligible
    return bool(np.all(demand <= snapshot.free[usable].sum(axis=0)))


def _all_whole(
    context: PlanContext,
    snapshot: ClusterSnapshot,
    views: Mapping[str, TopologyView],
    states: list[UnitState],
    greedy: list[UnitState],
    budget: list[int],
) -> bool:
    """Place every unit of `states` whole, in their order; False at the first that does
    not fit (after trying to move earlier ones)."""
    free = snapshot.free
    # Running pods of exclusive units are resolved in the views of every unit of the plan.
    exclusivity = Exclusivity.of(snapshot, views, greedy)
    reservations = Reservations()
    placed: list[UnitState] = []
    for unit in states:
        needs = whole_needs(unit)
        unit.allowed = exclusivity.open_to(unit)
        if needs and not place_gang(context, unit, free, needs, reservations):
            if not make_room(context, unit, needs, placed, free, reservations, exclusivity, budget, whole_needs):
                return False
        unit.functional = True
        exclusivity.claim(unit)
        reservations.note(unit, free)
        placed.append(unit)
    return True
