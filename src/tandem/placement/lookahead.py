"""Looking ahead: of the domains a whole unit fits in, the one that spoils the fewest
later units' whole fits.

Units are placed in order (priority, then age), and best fit alone takes the tightest
domain that holds the unit, although it may be the one domain a later unit needed
whole while a roomier one would have held this unit as well. So, before tightness, a
candidate domain of the unit's required level is ranked by how many of the next
LOOKAHEAD units (same topology, same required level, not yet placed) that are larger
than this one fit there whole now but would not once this unit took its whole share —
counted on the unit's dominant resource beside what placed units reserve, a cheap
estimate in which domains of equal room are interchangeable (so it does not depend on
names either). Later units no larger than this one are left out: one of them fits
wherever this unit would have gone instead, and counting them turns best fit into worst
fit for a batch of identical units.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tandem.placement.unit_state import UnitState
from tandem.topology import TopologyView

# How many later units a domain choice looks at.
LOOKAHEAD = 16


@dataclass(frozen=True)
class Later:
    """The units of one plan by topology and required level, with their whole demands."""

    units: Sequence[UnitState]
    wholes: np.ndarray  # [units, resources]: every role at the count it is heading to
    orders: dict[tuple[TopologyView, int], np.ndarray]  # (view, required depth) -> unit orders, ascending

    @classmethod
    def of(cls, units: Sequence[UnitState]) -> "Later":
        wholes = np.array([unit.whole_demand for unit in units]) if units else np.zeros((0, 0), np.int64)
        groups: dict[tuple[TopologyView, int], list[int]] = {}
        for unit in units:
            groups.setdefault((unit.view, unit.required_depth), []).append(unit.order)
        return cls(units, wholes, {key: np.array(orders, np.int64) for key, orders in groups.items()})

    def spoiled(self, unit: UnitState, room: np.ndarray, whole: int) -> np.ndarray:
        """[domains]: later units, larger than this one, that fit whole in the domain
        (`room`: free beside reservations, in the unit's dominant resource) but would not
        after this unit took `whole` there."""
        orders = self.orders.get((unit.view, unit.required_depth))
        if orders is None:
            return np.zeros(room.size, np.int64)
        picked: list[int] = []
        for order in orders[np.searchsorted(orders, unit.order, side="right") :]:
            other = self.units[order]
            if not other.functional and other.failure is None:
                picked.append(int(order))
                if len(picked) == LOOKAHEAD:
                    break
        needs = self.wholes[picked, unit.dominant] if picked else np.zeros(0, np.int64)
        needs = needs[needs > whole]
        if needs.size == 0:
            return np.zeros(room.size, np.int64)
        here = room[:, None]
        spoiled: np.ndarray = np.count_nonzero((here >= needs) & (here - whole < needs), axis=1)
        return spoiled
