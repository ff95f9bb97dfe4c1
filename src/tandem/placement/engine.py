"""The placement engine: where every pod of every pending unit goes, or why it cannot.

`place(snapshot, views, units)` is a pure function in three phases:

1. **Minimums** (`gang.py`). Units in order (priority, then age). A unit's minimum gang
   is every role's `minReplicas` complete replicas, placed whole inside one domain of the
   unit's pack level or not at all. As in Kueue's topology-aware scheduling, the engine
   counts bottom-up how many replicas of each role fit per domain (`capacity.py`), then
   chooses top-down for the whole unit: tiers by room for it beside what earlier units
   reserved, the fewest later units' whole fits spoiled (`lookahead.py`), where none
   holds it whole the most of it, tightest fit, and real assignments compared for the
   fewest newly opened nodes. Inside the domain, replicas go one at a time
   (`replica.py`, `locality.py`): the `to` side of an affinity first, where the `from`
   side will fit too, then the `from` side next to it, in as few narrower domains as
   fit them. A unit stranded behind earlier ones may move them (`repair.py`).
2. **Extras** (`extras.py`). Replicas beyond the minimums, one at a time for the (unit,
   role) furthest behind its desired count, near their counterparts; when a role can take
   no more, the unit's other roles stop at its fraction (extras one step ahead are taken
   back), so the ratio holds. A unit left short while a domain of its level is idle is
   moved there whole (`relocate.py`).
3. **Whole units first** (`whole.py`). When a functional unit still ends short and the
   units' whole demand fits the cluster, the plan is made again with every functional
   unit placed whole, in up to four orders (placement order, largest first, smallest
   first, narrowest level first); it replaces the greedy plan only if every functional
   unit ends `Placed` in it.

Why a unit did not fit is worded in `explain.py`. What ties on every key breaks on the
node's class and rack (`ties.py`), then on domain and node number, which follow sorted
names: the result is deterministic, and renaming nodes changes no unit's state.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from tandem.placement.context import PlanContext
from tandem.placement.demand import UnitDemand, UnitShapeKey
from tandem.placement.explain import describe_gang_failure, unresolvable
from tandem.placement.exclusive import Exclusivity
from tandem.placement.extras import place_extras
from tandem.placement.gang import place_gang
from tandem.placement.plan import Plan
from tandem.placement.relocate import relocate_short_units
from tandem.placement.repair import REPAIR_ATTEMPTS, make_room
from tandem.placement.reservations import Reservations
from tandem.placement.rollup import Rollups
from tandem.placement.unit_state import ShapeCache, UnitState
from tandem.placement.whole import whole_units
from tandem.topology import ClusterSnapshot, TopologyView


def place(
    snapshot: ClusterSnapshot,
    views: Mapping[str, TopologyView],
    units: Sequence[UnitDemand],
    *,
    extras: bool = True,
) -> Plan:
    """Assign nodes to the pods of `units` (already in placement order) on `snapshot`.

    `views` maps each topology name the units use to its view of the same snapshot.
    With `extras=False` only the minimum gangs are placed (used to check that extras never
    change which units get their minimums).
    """
    shapes = ShapeCache()
    rollups = Rollups()  # one for all the plans made here: they count the same unit shapes

    def prepare(subset: Sequence[UnitDemand]) -> tuple[list[UnitState], PlanContext]:
        return _prepare(snapshot, views, subset, shapes, rollups)

    prepared, context = prepare(units)
    _greedy(context, snapshot, views, prepared, extras)
    if extras:
        better = whole_units(snapshot, views, units, prepared, prepare)
        if better is not None:
            prepared = better
    return Plan(tuple(unit.result() for unit in prepared))


def _prepare(
    snapshot: ClusterSnapshot,
    views: Mapping[str, TopologyView],
    units: Sequence[UnitDemand],
    shapes: ShapeCache,
    rollups: Rollups,
) -> tuple[list[UnitState], PlanContext]:
    """Fresh working states for `units` in the order given (their `order` is their
    position), and the context of their plan: its tie-breaking and lookahead, and the
    counts (`rollups`) shared by every plan of one `place`; `shapes` caches what follows
    from the units' shapes across calls."""
    prepared = [UnitState.prepare(order, unit, views[unit.topology], snapshot, snapshot.totals, shapes) for order, unit in enumerate(units)]
    return prepared, PlanContext.of(prepared, len(snapshot.node_names), rollups)


def _greedy(context: PlanContext, snapshot: ClusterSnapshot, views: Mapping[str, TopologyView], prepared: list[UnitState], extras: bool) -> np.ndarray:
    """Phases 1 and 2 on `prepared` (updated in place); the free capacity left."""
    free = snapshot.free
    exclusivity = Exclusivity.of(snapshot, views, prepared)

    reservations = Reservations()
    placed: list[UnitState] = []
    budget = [REPAIR_ATTEMPTS]
    # Failures by unit shape since free capacity last changed: a unit of the same shape
    # would fail the same way (placement reads nothing else), so it is not tried again.
    failed: dict[UnitShapeKey, tuple[str, bool]] = {}
    for unit in prepared:
        needs = unit.minimum_needs()
        if not needs:
            unit.functional = True
            continue
        shape = unit.demand.shape()
        if shape in failed:
            unit.failure, unit.unresolvable = failed[shape]
            continue
        unit.allowed = exclusivity.open_to(unit)
        if place_gang(context, unit, free, needs, reservations) or (
            not unresolvable(context, unit, needs) and make_room(context, unit, needs, placed, free, reservations, exclusivity, budget)
        ):
            unit.functional = True
            exclusivity.claim(unit)
            reservations.note(unit, free)
            placed.append(unit)
            failed.clear()
        else:
            unit.failure = describe_gang_failure(context, unit, free, needs)
            unit.unresolvable = unresolvable(context, unit, needs)
            failed[shape] = (unit.failure, unit.unresolvable)

    if extras:
        place_extras(context, prepared, free, exclusivity, reservations)
        if relocate_short_units(context, prepared, free, exclusivity):
            for unit in prepared:
                unit.reopen()
            place_extras(context, prepared, free, exclusivity, reservations)
    return free
