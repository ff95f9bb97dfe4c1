"""Soft reservations: what placed units still want, summed per domain as units come and go.

Once a unit's minimum is placed, its outstanding extras (what it is heading to, minus
what is placed: `RoleDemand.heading_to`; no more than its domain has free) are noted
against its domain, so later units start where they too can grow. Reservations only
rank domains; feasibility always uses real free capacity, so a reservation never costs
a unit its minimum. The per-domain sums are kept up to date on every change (cost: one
row per cached depth), since a plan of a thousand units asks for them thousands of times.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tandem.placement.unit_state import UnitState
from tandem.topology import TopologyView


@dataclass(frozen=True)
class Reservation:
    """What a placed unit still wants, and the domain (depth, id) it will grow in."""

    view: TopologyView
    depth: int
    domain: int
    demand: np.ndarray

    @classmethod
    def of(cls, unit: UnitState, free: np.ndarray) -> "Reservation":
        """What `unit` still wants, but no more than its domain (of its required level)
        has free in `free`: beyond that the unit cannot grow, and the excess would only
        keep other units out of the domains around it (a unit whose rack holds 16 of the
        35 GPUs it wants made its whole block look full to the next)."""
        where = unit.preferred_domain or unit.domain or (0, 0)
        outstanding = np.zeros(unit.roles[0].leader.size, np.int64)
        for role in unit.roles:
            outstanding += max(role.demand.heading_to - len(role.placed), 0) * role.replica_total
        want = int(outstanding[unit.dominant])
        if unit.domain is not None and unit.domain[0] > 0 and want > 0:
            # Counted in the unit's dominant resource, the rest scaled alike: one column
            # of the domain's nodes, since units are noted after every replica they add.
            room = int(np.maximum(free[:, unit.dominant].take(unit.view.members(*unit.domain)), 0).sum())
            if room < want:
                outstanding = outstanding * room // want
        return cls(unit.view, where[0], where[1], outstanding)


class Reservations:
    """Reservations by unit order, with their sums per (view, depth) maintained in place."""

    def __init__(self) -> None:
        self._by_unit: dict[int, Reservation] = {}
        self._sums: dict[tuple[TopologyView, int], np.ndarray] = {}
        self._at: dict[tuple[TopologyView, int], int] = {}  # reservations noted at each (view, depth)

    def copy(self) -> "Reservations":
        out = Reservations()
        out._by_unit = dict(self._by_unit)
        out._sums = {key: sums.copy() for key, sums in self._sums.items()}
        out._at = dict(self._at)
        return out

    def put(self, order: int, reservation: Reservation) -> None:
        old = self._by_unit.get(order)
        if old is not None and old.view is reservation.view and (old.depth, old.domain) == (reservation.depth, reservation.domain):
            if (old.demand == reservation.demand).all():
                return  # the same reservation again (a unit noted twice unchanged): the sums stand
        self.drop(order)
        self._by_unit[order] = reservation
        self._apply(reservation, 1)

    def note(self, unit: UnitState, free: np.ndarray) -> None:
        """Reserve what `unit` still wants where it was placed (`Reservation.of`)."""
        self.put(unit.order, Reservation.of(unit, free))

    def drop(self, order: int) -> None:
        old = self._by_unit.pop(order, None)
        if old is not None:
            self._apply(old, -1)

    def reserved(self, view: TopologyView, depth: int, width: int) -> np.ndarray:
        """[domains at depth, resources]: demand reserved inside each domain."""
        key = (view, depth)
        if key not in self._sums:
            sums = np.zeros((view.domain_count(depth), width), np.int64)
            for reservation in self._by_unit.values():
                if reservation.view is view and reservation.depth >= depth:
                    sums[view.ancestor[reservation.depth][depth][reservation.domain]] += reservation.demand
            self._sums[key] = sums
        return self._sums[key]

    def __bool__(self) -> bool:
        return bool(self._by_unit)

    def by_others(self, unit: UnitState, depth: int, domains: np.ndarray) -> np.ndarray | None:
        """[len(domains)]: what units other than `unit` reserve inside each of `domains`
        (at `depth`), in the unit's dominant resource; None when nothing is reserved this
        narrow (all zeros: the caller need not subtract)."""
        view = unit.view
        if not any(count for (other, at), count in self._at.items() if other is view and at >= depth):
            return None
        out: np.ndarray = self.reserved(view, depth, unit.roles[0].replica_total.size)[domains, unit.dominant]
        own = self._by_unit.get(unit.order)
        if own is not None and own.view is view and own.depth >= depth:
            mine = view.ancestor[own.depth][depth][own.domain]
            out = out - np.where(domains == mine, own.demand[unit.dominant], 0)
        return out

    def _apply(self, reservation: Reservation, sign: int) -> None:
        view = reservation.view
        key = (view, reservation.depth)
        self._at[key] = self._at.get(key, 0) + sign
        for (other, depth), sums in self._sums.items():
            if other is view and reservation.depth >= depth:
                sums[view.ancestor[reservation.depth][depth][reservation.domain]] += sign * reservation.demand
