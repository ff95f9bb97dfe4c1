"""Exclusive domains: a unit with `topology.exclusive: LEVEL` holds its domains of that level.

Two exclusive units conflict when one has a pod in a domain of its own exclusive level
that also holds a pod of the other (LWS ExclusiveTopology, RBG exclusive-topology).
Units that do not ask for exclusivity are not affected and do not close anything.

The ledger keeps, per node, how many exclusive units *cover* it (the node is in one of
their exclusive domains) and how many *occupy* it (hold a pod there), with each unit's
own share so that a unit never blocks itself. Before an exclusive unit is placed, the
nodes open to it are those no other unit covers, outside every domain of its own level
that another unit occupies.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from tandem.placement.unit_state import UnitState
from tandem.topology import ClusterSnapshot, TopologyView

Owner = tuple[str, str, str]  # (namespace, group, unit) as pods label it


def owner_of(unit: UnitState) -> Owner:
    namespace, group, index = unit.demand.key
    return (namespace, group, str(index))


class Exclusivity:
    """Which nodes exclusive units hold, updated as units are placed, moved and grown."""

    def __init__(self, nodes: int) -> None:
        self.covered = np.zeros(nodes, np.int32)
        self.occupied = np.zeros(nodes, np.int32)
        self._shares: dict[Owner, tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, views: Mapping[str, TopologyView], units: Sequence[UnitState]) -> "Exclusivity":
        """The ledger for running pods of exclusive units; a level is resolved in the view
        of the unit that owns the pods when it is in this plan, else in the first view
        (by topology name) that has the level, else the pod's node alone is held."""
        ledger = cls(len(snapshot.node_names))
        placing = {owner_of(unit): unit.view for unit in units}
        by_owner: dict[tuple[Owner, str], list[int]] = {}
        for node, level, owner in snapshot.exclusive_pods:
            by_owner.setdefault((owner, level), []).append(node)
        for (owner, level), nodes in sorted(by_owner.items()):
            view = placing.get(owner) or next((views[name] for name in sorted(views) if level in views[name].level_names), None)
            depth = view.level_names.index(level) if view is not None and level in view.level_names else None
            ledger._put(owner, view, depth, np.array(nodes, dtype=np.int64))
        return ledger

    def copy(self) -> "Exclusivity":
        out = Exclusivity(0)
        out.covered, out.occupied, out._shares = self.covered.copy(), self.occupied.copy(), dict(self._shares)
        return out

    def adopt(self, other: "Exclusivity") -> None:
        """Take over the state of a copy whose changes were kept."""
        self.covered, self.occupied, self._shares = other.covered, other.occupied, other._shares

    def open_to(self, unit: UnitState) -> np.ndarray:
        """[nodes] bool: where `unit` may go now: everywhere it is eligible, less what
        other exclusive units hold when it is exclusive itself."""
        if unit.exclusive_depth is None:
            return unit.eligible
        covered, occupied = self.covered.copy(), self.occupied.copy()
        share = self._shares.get(owner_of(unit))
        if share is not None:
            covered[share[0]] -= 1
            occupied[share[1]] -= 1
        blocked = covered > 0
        others = np.flatnonzero(occupied > 0)
        if others.size:
            doms = unit.view.dom[unit.exclusive_depth]
            taken = np.unique(doms[others])
            blocked |= np.isin(doms, taken[taken >= 0])
        return unit.eligible & ~blocked

    def claim(self, unit: UnitState) -> None:
        """Record where `unit` now holds pods (replacing what it held before)."""
        if unit.exclusive_depth is not None:
            self._put(owner_of(unit), unit.view, unit.exclusive_depth, np.array(unit.nodes(), dtype=np.int64))

    def _put(self, owner: Owner, view: TopologyView | None, depth: int | None, nodes: np.ndarray) -> None:
        old = self._shares.pop(owner, None)
        if old is not None:
            self.covered[old[0]] -= 1
            self.occupied[old[1]] -= 1
        occupied = np.unique(nodes)
        if occupied.size == 0:
            return
        if view is None or depth is None:
            covered = occupied
        else:
            doms = view.dom[depth]
            taken = np.unique(doms[occupied])
            covered = np.union1d(np.flatnonzero(np.isin(doms, taken[taken >= 0])), occupied)
        self.covered[covered] += 1
        self.occupied[occupied] += 1
        self._shares[owner] = (covered, occupied)
