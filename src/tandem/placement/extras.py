"""Extras: replicas beyond the minimums, added in the ratio of the desired counts."""

from __future__ import annotations

import heapq
import math

import numpy as np

from tandem.placement.capacity import Counts
from tandem.placement.context import PlanContext
from tandem.placement.exclusive import Exclusivity
from tandem.placement.explain import describe_domain, describe_replica, short_role_list
from tandem.placement.gang import place_gang, required_affinity_holds
from tandem.placement.replica import ReplicaRequest, place_replica
from tandem.placement.reservations import Reservations
from tandem.placement.space import Space
from tandem.placement.unit_state import RoleState, UnitState, staying_replicas


def place_extras(context: PlanContext, units: list[UnitState], free: np.ndarray, exclusivity: Exclusivity, reservations: Reservations) -> None:
    """Add replicas beyond the minimums, the (unit, role) furthest behind its target first.

    An exclusive unit's next replica goes only where no other exclusive unit holds the
    domain, and what it takes is recorded before the next replica of anyone is placed.
    `reservations` (what every unit with a domain still wants) is kept current, so that
    a unit whose minimums are all zero chooses its domain with its first replica beside
    what the others will grow into, as a minimum gang does; without it the choice
    between equally tight domains fell to node numbers, i.e. to node names.
    """
    for unit in units:
        if unit.functional and unit.domain is not None:
            reservations.note(unit, free)
    heap: list[tuple[int, float, int, int, int]] = []

    def push(unit: UnitState, role: RoleState) -> None:
        # Furthest behind first; on a tie the role with fewer desired replicas (the bigger
        # step) goes first, so a role that cannot grow stops the others at its fraction.
        desired = role.demand.desired
        if len(role.placed) < desired:
            heapq.heappush(heap, (-unit.demand.priority, len(role.placed) / desired, desired, unit.order, role.index))

    # What the minimum gangs placed (minimums, and `to` replicas a Required affinity needed)
    # is never taken back; only extras are.
    floors = {(unit.order, role.index): len(role.placed) for unit in units for role in unit.roles}
    for unit in units:
        if unit.functional:
            for role in unit.roles:
                push(unit, role)
    # A `from` replica whose Required `to` side has no replica that stays (a rolling
    # update's new prefill while the old decodes go) waits for that side's next replica
    # instead of blocking its role (which would hold the `to` side back by the ratio).
    deferred: dict[int, set[int]] = {}
    while heap:
        *_, order, r = heapq.heappop(heap)
        unit = units[order]
        role = unit.roles[r]
        cap = _ratio_cap(unit, role)
        if len(role.placed) + 1 > cap:
            continue
        unit.allowed = exclusivity.open_to(unit)
        if _place_extra(context, unit, role, free, reservations):
            exclusivity.claim(unit)
            reservations.note(unit, free)
            push(unit, role)
            for waiting in sorted(deferred.pop(unit.order, set())):
                push(unit, unit.roles[waiting])
        elif _counterpart_to_come(unit, role) and r not in deferred.get(unit.order, set()):
            deferred.setdefault(unit.order, set()).add(r)
        else:
            role.blocked = f"no room in {describe_domain(unit)} for another {role.demand.name} replica ({describe_replica(unit, role)})"
            _trim_to_ratio(unit, role, free, floors)
            exclusivity.claim(unit)
            if unit.domain is not None:
                reservations.note(unit, free)
            if unit.capped is None:
                unit.capped = role.blocked
                others = [o for o in unit.roles if o is not role and len(o.placed) < o.demand.desired]
                if others:
                    unit.capped += f"; {short_role_list(others)} held at the same fraction to keep the ratio"


def _counterpart_to_come(unit: UnitState, role: RoleState) -> bool:
    """Whether a Required rule of `role` (as `from`) has no `to` replica that stays while
    its `to` role still has replicas to place and is not blocked."""
    for rule in unit.rules:
        if rule.required and rule.source == role.index and not staying_replicas(unit, rule.target, {}):
            target = unit.roles[rule.target]
            if target.blocked is None and len(target.placed) < target.demand.desired:
                return True
    return False


def _trim_to_ratio(unit: UnitState, blocked: RoleState, free: np.ndarray, floors: dict[tuple[int, int], int]) -> None:
    """Take back extras that ran ahead of a role that can grow no more.

    Extras grow one replica at a time, so when a role blocks, another may be one step
    past its fraction (8:4 blocked at 4 prefill can leave 3 decode). Those replicas are
    released, down to the blocked role's fraction rounded up, never below what the
    minimum gang placed, and never where a Required affinity would lose its counterpart.
    """
    fraction = len(blocked.placed) / blocked.demand.desired
    everything = {role.index: role.placed for role in unit.roles}
    for other in unit.roles:
        if other is blocked or other.demand.desired == 0:
            continue
        keep = max(floors[(unit.order, other.index)], math.ceil(fraction * other.demand.desired - 1e-9))
        while len(other.placed) > keep:
            replica = other.placed.pop()
            if not required_affinity_holds(unit, everything):
                other.placed.append(replica)
                break
            for pod, node in enumerate(replica):
                free[node] += other.leader if pod == 0 else other.worker


def _ratio_cap(unit: UnitState, role: RoleState) -> int:
    """Most replicas `role` may have: once a role is full, the others stop at its fraction."""
    fractions = [len(o.placed) / o.demand.desired for o in unit.roles if o.blocked is not None]
    if not fractions:
        return role.demand.desired
    return max(len(role.placed), math.ceil(min(fractions) * role.demand.desired - 1e-9))


def _place_extra(context: PlanContext, unit: UnitState, role: RoleState, free: np.ndarray, reservations: Reservations) -> bool:
    if unit.domain is None:
        # Every minimum is zero: the first replica picks the unit's domain like a gang of
        # one, beside what the other units reserve.
        return place_gang(context, unit, free, {role.index: 1}, reservations)
    view = unit.view
    space = Space.of(Counts.count(unit, free, within=view.members(*unit.domain)).nodes, free)
    unit_preferred = None
    if unit.preferred_domain is not None:
        depth, domain = unit.preferred_domain
        unit_preferred = view.dom[depth][space.nodes] == domain
    # The `from` replicas still wanted: a `to` replica goes where they fit too. (Only the
    # `from` side of rules this role is the target of: a `from` replica never waits.)
    waiting = {
        rule.source: max(unit.roles[rule.source].demand.desired - len(unit.roles[rule.source].placed), 0)
        for rule in unit.rules
        if rule.target == role.index
    }
    remaining = {o.index: max(o.demand.desired - len(o.placed), 0) for o in unit.roles}
    rest = sum(count * int(unit.roles[r].replica_total[unit.dominant]) for r, count in remaining.items())
    request = ReplicaRequest(context, unit, role, space, unit.domain[0], {}, waiting, unit_preferred, rest=rest, remaining=remaining, reservations=reservations)
    replica = place_replica(request)
    if replica is None:
        return False
    free[space.nodes] = space.free
    role.placed.append(replica)
    return True
