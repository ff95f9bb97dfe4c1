"""What the units of one plan share: how ties between nodes break, the units to look
ahead at, and the counts kept current.

The engine makes a plan's working states (`unit_state.UnitState`) and this context
together, and passes the context to every phase beside the states. It is not stored on
the states: the lookahead and the rollups refer to the units, so links back from each
unit made reference cycles that kept arrays over every node alive until the garbage
collector ran (at 65,536 nodes, a latency tail of twice the median when it did).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tandem.placement.capacity import Counts
from tandem.placement.lookahead import Later
from tandem.placement.rollup import Rollups
from tandem.placement.ties import Ties
from tandem.placement.unit_state import UnitState


@dataclass(frozen=True)
class PlanContext:
    """The tie-breaking, lookahead and kept counts of one plan (the greedy one, or one
    order of the whole-units plan: each has its own units, so its own ties and lookahead;
    the rollups serve them all)."""

    ties: Ties  # how ties between nodes and hosts break (`ties.py`)
    later: Later | None = None  # the plan's units in order, for looking ahead (`lookahead.py`)
    rollups: Rollups | None = None  # counts kept current as free capacity changes (`rollup.py`)

    @classmethod
    def of(cls, units: Sequence[UnitState], nodes: int, rollups: Rollups | None) -> "PlanContext":
        """The context of a plan placing `units` (in placement order) on `nodes` nodes."""
        ties = Ties.of([mask for unit in units for role in unit.roles for mask in (role.leader_ok, role.worker_ok)], nodes)
        return cls(ties, Later.of(units), rollups)

    @classmethod
    def alone(cls, nodes: int) -> "PlanContext":
        """A unit placed on its own: every node of one class, nothing to look ahead at,
        every count taken in full."""
        return cls(Ties.none(nodes))

    def counts(self, unit: UnitState, free: np.ndarray) -> Counts:
        """`Counts.count(unit, free)` over every node open to the unit, from the rollups
        when the plan keeps them (the same figures, updated where free capacity changed)."""
        if self.rollups is not None:
            return self.rollups.counts(unit, free)
        return Counts.count(unit, free)

    def looks_ahead(self) -> bool:
        """Whether other units of the plan may be placed beside the one at hand."""
        return self.later is not None and len(self.later.units) > 1
