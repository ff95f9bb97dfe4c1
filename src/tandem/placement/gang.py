"""Placing a unit's minimum gang: choose the domain, then assign every replica inside it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from tandem.placement.capacity import domain_capacity
from tandem.placement.replica import place_replica
from tandem.placement.state import Space, UnitState, all_replicas
from tandem.topology import TopologyView

# How many count-feasible domains are tried with a real assignment before giving up a level.
MAX_DOMAIN_ATTEMPTS = 12
# Among equally ranked domains (same tier), how many real assignments are compared: the one
# opening the fewest wholly free nodes wins, so fragments are used before whole nodes.
GANG_TRIALS = 3


@dataclass(frozen=True)
class Reservation:
    """What a placed unit still wants (desired minus placed), and where it will grow.

    Soft: later units' minimums rank domains by the room left after reservations, so
    they start where they can grow too; feasibility still uses real free capacity, so a
    reservation never blocks a minimum.
    """

    view: TopologyView
    depth: int
    domain: int
    demand: np.ndarray

    @classmethod
    def of(cls, unit: UnitState) -> "Reservation":
        where = unit.preferred_domain or unit.domain or (0, 0)
        outstanding = sum(
            (max(role.demand.desired - len(role.placed), 0) * role.replica_total for role in unit.roles),
            np.zeros(unit.roles[0].leader.size, np.int64),
        )
        return cls(unit.view, where[0], where[1], outstanding)


def _reserved(view: TopologyView, depth: int, reservations: Sequence[Reservation], width: int) -> np.ndarray:
    """[domains at depth, resources]: reserved demand inside each domain."""
    out = np.zeros((view.domain_count(depth), width), np.int64)
    for reservation in reservations:
        if reservation.view is view and reservation.depth >= depth:
            out[view.ancestor[reservation.depth][depth][reservation.domain]] += reservation.demand
    return out


def place_gang(
    unit: UnitState, free: np.ndarray, needs: Mapping[int, int], reservations: Sequence[Reservation] = ()
) -> bool:
    """Place `needs` (role index -> replicas) as one gang; commit to `free` on success.

    When a Required affinity cannot hold with the minimum number of `to` replicas (each
    `from` replica needs one nearby), the gang is retried with more `to` replicas, up to
    their desired count: the affinity is a hard rule and the minimum only a lower bound.
    """
    if _place_gang_once(unit, free, needs, reservations):
        return True
    for grown in _grown_needs(unit, needs):
        if _place_gang_once(unit, free, grown, reservations):
            return True
    return False


def _grown_needs(unit: UnitState, needs: Mapping[int, int]) -> list[dict[int, int]]:
    """Gangs with 1, 2, ... more `to` replicas for the Required rules whose `from` side is needed."""
    targets = {rule.target for rule in unit.rules if rule.required and needs.get(rule.source, 0) > 0}
    room = {r: unit.roles[r].demand.desired - needs.get(r, 0) for r in targets}
    out = []
    for extra in range(1, max(room.values(), default=0) + 1):
        grown = dict(needs)
        for r in targets:
            grown[r] = needs.get(r, 0) + min(extra, room[r])
        out.append(grown)
    return out


def _place_gang_once(
    unit: UnitState, free: np.ndarray, needs: Mapping[int, int], reservations: Sequence[Reservation]
) -> bool:
    """One attempt with fixed `needs`, from the preferred level up to the required one.

    Candidate domains are ranked: first those where the whole unit (every role at its
    desired count) would still fit beside what earlier units reserved, so a unit starts
    where it can grow; then the tightest fit; then domain number. Up to GANG_TRIALS
    candidates of the best tier get a real assignment, and the one that opens the fewest
    wholly free nodes is kept.
    """
    view = unit.view
    zero = np.zeros(free.shape[1], np.int64)
    demand = sum((count * unit.roles[r].replica_total for r, count in needs.items()), zero)
    wanted = {r: max(role.demand.desired, needs.get(r, 0)) for r, role in enumerate(unit.roles)}
    full = sum((count * unit.roles[r].replica_total for r, count in wanted.items()), zero)
    start = unit.preferred_depth if unit.preferred_depth is not None else unit.required_depth
    for depth in range(start, unit.required_depth - 1, -1):
        capacity = {r: domain_capacity(unit, unit.roles[r], free, depth) for r in wanted if wanted[r] > 0}
        free_here = view.free_by_domain(free, depth)
        feasible = np.all(free_here >= demand, axis=1)
        for r, count in needs.items():
            feasible &= capacity[r] >= count
        if unit.domain is not None:
            # Replicas already run: the unit stays in their domain.
            feasible &= view.ancestor[depth][unit.required_depth] == unit.domain[1]
        candidates = np.nonzero(feasible)[0]
        if candidates.size == 0:
            continue
        room = free_here[candidates] - _reserved(view, depth, reservations, free.shape[1])[candidates]
        roomy = np.all(room >= full, axis=1)
        for r, count in wanted.items():
            if count > 0:
                roomy &= capacity[r][candidates] >= count
        # Tier 0: the whole unit fits beside reservations; 1: its minimum does; 2: it must
        # take reserved room, where the least intrusion is best.
        tier = np.where(roomy, 0, np.where(np.all(room >= demand, axis=1), 1, 2))
        leftover = room[:, unit.dominant] - np.where(roomy, full[unit.dominant], demand[unit.dominant])
        ranked = candidates[np.lexsort((candidates, np.where(tier < 2, leftover, -leftover), tier))]
        ranked_tier = tier[np.searchsorted(candidates, ranked)]
        best: tuple[int, int, Space, dict[int, list[list[int]]]] | None = None
        trials = 0
        for position, domain in enumerate(ranked[:MAX_DOMAIN_ATTEMPTS]):
            if best is not None and (trials >= GANG_TRIALS or ranked_tier[position] != ranked_tier[best[1]]):
                break
            space = Space.of(view.members(depth, int(domain)), free)
            placed = _assign_gang(unit, space, needs, depth)
            if placed is None:
                continue
            trials += 1
            opened = _empty_nodes_opened(view, free, space)
            if best is None or opened < best[0]:
                best = (opened, position, space, placed)
        if best is None:
            continue
        _, position, space, placed = best
        free[space.nodes] = space.free
        for r, replicas in placed.items():
            unit.roles[r].placed.extend(replicas)
        unit.domain = (unit.required_depth, view.node_domain(int(space.nodes[0]), unit.required_depth))
        if depth != unit.required_depth:
            unit.preferred_domain = (depth, int(ranked[position]))
        return True
    return False


def _empty_nodes_opened(view: TopologyView, free: np.ndarray, space: Space) -> int:
    """How many wholly free nodes a trial assignment starts using (whole nodes are precious)."""
    before = free[space.nodes]
    empty = np.all(before == view.snapshot.allocatable[space.nodes], axis=1)
    touched = np.any(space.free != before, axis=1)
    return int(np.count_nonzero(empty & touched))


def _gang_order(unit: UnitState, needs: Mapping[int, int]) -> list[int]:
    """`to` roles first, then roles without affinity, then `from` roles; bigger replicas first."""
    sources = {rule.source for rule in unit.rules}
    targets = {rule.target for rule in unit.rules}

    def rank(r: int) -> tuple:
        tier = 0 if r in targets and r not in sources else 2 if r in sources else 1
        return (tier, -int(unit.roles[r].replica_total[unit.dominant]), r)

    return sorted(needs, key=rank)


def _assign_gang(unit: UnitState, space: Space, needs: Mapping[int, int], depth: int) -> dict[int, list[list[int]]] | None:
    """Place the gang inside `space` (updating its free copy), or None if it does not fit.

    Best fit first. If that fails and the unit has affinity rules, once more with the `to`
    side spread (each pod where the most room is left), which keeps room for `from` pods
    next to it.
    """
    attempts = (False, True) if unit.rules else (False,)
    for spread in attempts:
        trial = Space(space.nodes, space.free.copy())
        placed = _try_gang(unit, trial, needs, depth, spread)
        if placed is not None:
            space.free[:] = trial.free
            return placed
    return None


def _try_gang(
    unit: UnitState, space: Space, needs: Mapping[int, int], depth: int, spread: bool
) -> dict[int, list[list[int]]] | None:
    """Every replica of the gang, role by role in `_gang_order`; None at the first that does not fit."""
    placed: dict[int, list[list[int]]] = {r: [] for r in needs}
    waiting = dict(needs)
    targets = {rule.target for rule in unit.rules}
    for r in _gang_order(unit, needs):
        role = unit.roles[r]
        for _ in range(needs[r]):
            replica = place_replica(unit, role, space, depth, placed, waiting, None, spread and r in targets)
            if replica is None:
                return None
            placed[r].append(replica)
            waiting[r] -= 1
    if not required_affinity_holds(unit, placed):
        return None
    return placed


def required_affinity_holds(unit: UnitState, fresh: Mapping[int, list[list[int]]]) -> bool:
    """Every fresh `from` replica shares a Required rule's domain with some `to` replica."""
    view = unit.view
    for rule in unit.rules:
        if not rule.required:
            continue
        targets = {int(view.dom[rule.depth][n]) for rep in all_replicas(unit, rule.target, fresh) for n in rep}
        for replica in fresh.get(rule.source, []):
            if not any(int(view.dom[rule.depth][n]) in targets for n in replica):
                return False
    return True
