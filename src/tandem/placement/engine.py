"""The placement engine: where every pod of every pending unit goes, or why it cannot.

`place(snapshot, views, units)` is a pure function. It works in two phases:

1. **Minimums.** Units in order (priority, then age). A unit's minimum gang is every role's
   `minReplicas` complete replicas; it is placed whole inside one domain of the unit's pack
   level, or not at all. Choosing that domain follows Kueue's topology-aware scheduling:
   count bottom-up how many replicas of each role fit per domain (an upper bound from the
   per-node fit counts), keep the domains where every role's count and the gang's total
   demand fit, then try them top-down, tightest first (least of the unit's dominant
   resource left over), assigning real nodes. The preferred pack level is tried first,
   then each broader level up to the required one.
2. **Extras.** Replicas beyond the minimums, one at a time, for the (unit, role) furthest
   behind its desired count, so every unit grows in the ratio of its desired counts. Extras
   stay inside the unit's required domain and go near their counterparts. When a role can
   take no more, the unit's other roles stop at that role's fraction of its desired count,
   so extras never skew a unit's ratio.

Inside a domain, replicas are placed one at a time: the `to` side of an affinity first
(where the `from` side will also have room), then the `from` side next to it; among the
candidate replica domains the engine prefers ones near counterparts, then inside the
unit's preferred domain, then the tightest fit; pods go to the best-fitting node.
Ties break on domain and node number, which follow sorted names: the result is
deterministic.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from tandem.placement.demand import RoleDemand, UnitDemand
from tandem.placement.explain import describe_gang_failure, describe_replica, short_role_list, unresolvable
from tandem.placement.plan import Plan, PodAssignment, ReplicaAssignment, UnitPlacement
from tandem.topology import ClusterSnapshot, TopologyView

# How many count-feasible domains are tried with a real assignment before giving up a level.
MAX_DOMAIN_ATTEMPTS = 12
# Among equally ranked domains (same tier), how many real assignments are compared: the one
# opening the fewest wholly free nodes wins, so fragments are used before whole nodes.
GANG_TRIALS = 3
# How many relocations of an earlier unit (see `_make_room`) one plan may try in all.
REPAIR_ATTEMPTS = 64
# How many replica domains are tried for one replica before it is declared unplaceable.
MAX_REPLICA_ATTEMPTS = 8


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
    free = snapshot.free
    totals = snapshot.allocatable.sum(axis=0)
    prepared = [_Unit.prepare(order, unit, views[unit.topology], snapshot, totals) for order, unit in enumerate(units)]

    reservations: dict[int, _Reservation] = {}
    placed: list[_Unit] = []
    budget = [REPAIR_ATTEMPTS]
    for unit in prepared:
        needs = unit.minimum_needs()
        if not needs:
            unit.functional = True
            continue
        if _place_gang(unit, free, needs, list(reservations.values())) or _make_room(
            unit, needs, placed, free, reservations, budget
        ):
            unit.functional = True
            reservations[unit.order] = _Reservation.of(unit)
            placed.append(unit)
        else:
            unit.failure = describe_gang_failure(unit, free, needs)
            unit.unresolvable = unresolvable(unit, needs)

    if extras:
        _place_extras(prepared, free)
    return Plan(tuple(unit.result() for unit in prepared))


# ----------------------------------------------------------------------------- repair


def _make_room(
    unit: "_Unit",
    needs: Mapping[int, int],
    placed: list["_Unit"],
    free: np.ndarray,
    reservations: dict[int, "_Reservation"],
    budget: list[int],
) -> bool:
    """Place `unit` by moving earlier units' minimums elsewhere, if that works for all.

    Greedy order can strand a unit behind earlier ones that took the only domain it fits,
    while they would have fitted elsewhere too. All units here are still pending, so they
    may move: release every earlier unit in one domain of `unit`'s pack level, place
    `unit`, re-place the released ones in their order. Accepted only when every one
    succeeds, so no unit ever loses its minimum and the priority/age promise holds. The
    smallest sets are tried first; `budget` caps the gang placements per plan.
    """
    if unresolvable(unit, needs):
        return False
    for movers in _eviction_sets(unit, placed):
        cost = 1 + len(movers)
        if budget[0] < cost:
            return False
        budget[0] -= cost
        trial = free.copy()
        saved = [other.release(trial) for other in movers]
        moved = {other.order for other in movers}
        kept = [r for order, r in reservations.items() if order not in moved]
        if _place_gang(unit, trial, needs, kept):
            kept.append(_Reservation.of(unit))
            for other in movers:
                if not _place_gang(other, trial, other.minimum_needs(), kept):
                    break
                kept.append(_Reservation.of(other))
            else:
                free[:] = trial
                for other in movers:
                    reservations[other.order] = _Reservation.of(other)
                return True
            for other in movers:
                other.release(None)
            unit.release(None)
        for other, state in zip(movers, saved):
            other.restore(state)
    return False


def _eviction_sets(unit: "_Unit", placed: list["_Unit"], largest: int = 4) -> list[list["_Unit"]]:
    """Sets of earlier units to move: those sharing one domain of `unit`'s pack level.

    Without a pack level (the whole cluster is one domain) each earlier unit alone.
    Ordered by size, then domain number; sets larger than `largest` are not tried.
    """
    view = unit.view
    depth = unit.required_depth
    same_view = [other for other in placed if other.view is view]
    if depth == 0:
        return [[other] for other in reversed(same_view)]
    by_domain: dict[int, list[_Unit]] = {}
    for other in same_view:
        nodes = [n for role in other.roles for replica in role.placed for n in replica]
        for domain in sorted({int(view.dom[depth][n]) for n in nodes}):
            by_domain.setdefault(domain, []).append(other)
    sets = [(len(units), domain, units) for domain, units in by_domain.items() if len(units) <= largest]
    return [units for _, _, units in sorted(sets, key=lambda item: (item[0], item[1]))]


# ----------------------------------------------------------------------------- per-unit state


@dataclass
class _Role:
    """A role of a unit, with its shapes as resource vectors and its eligible nodes."""

    index: int
    demand: RoleDemand
    leader: np.ndarray
    worker: np.ndarray
    leader_ok: np.ndarray  # [nodes] bool
    worker_ok: np.ndarray
    missing: list[str]  # requested resources no node offers
    required_depth: int | None
    preferred_depth: int | None
    replica_total: np.ndarray  # all pods of one replica
    same_shape: bool
    placed: list[list[int]] = field(default_factory=list)  # node per pod, per replica
    blocked: str | None = None  # why no further extra fits

    @property
    def pods(self) -> int:
        return self.demand.pods_per_replica


@dataclass
class _Rule:
    source: int  # role index of `from`
    target: int  # role index of `to`
    depth: int
    required: bool


@dataclass
class _Unit:
    order: int
    demand: UnitDemand
    view: TopologyView
    roles: list[_Role]
    rules: list[_Rule]
    required_depth: int
    preferred_depth: int | None
    dominant: int  # resource index the unit needs most of, relative to the cluster
    functional: bool = False
    failure: str | None = None
    unresolvable: bool = False
    domain: tuple[int, int] | None = None  # (depth, id) at the required level
    preferred_domain: tuple[int, int] | None = None  # (depth, id) if packed at a narrower level
    capped: str | None = None  # why extras stopped short of the desired counts

    @classmethod
    def prepare(
        cls, order: int, unit: UnitDemand, view: TopologyView, snapshot: ClusterSnapshot, totals: np.ndarray
    ) -> "_Unit":
        eligibility: dict[tuple, np.ndarray] = {}

        def eligible(shape) -> np.ndarray:
            key = shape.key()
            if key not in eligibility:
                eligibility[key] = snapshot.eligible(shape.node_selector, shape.tolerations) & view.usable
            return eligibility[key]

        roles = []
        for index, demand in enumerate(unit.roles):
            leader = snapshot.vector(demand.leader.requests)
            worker = snapshot.vector(demand.worker.requests)
            leader_ok, worker_ok = eligible(demand.leader), eligible(demand.worker)
            pods = demand.pods_per_replica
            missing = sorted(
                set(snapshot.missing_resources(demand.leader.requests))
                | set(snapshot.missing_resources(demand.worker.requests) if pods > 1 else ())
            )
            if missing:
                # The vectors leave out resources no node offers; no node may take such a pod.
                leader_ok = worker_ok = np.zeros_like(leader_ok)
            roles.append(
                _Role(
                    index=index,
                    demand=demand,
                    leader=leader,
                    worker=worker,
                    leader_ok=leader_ok,
                    worker_ok=worker_ok,
                    missing=missing,
                    required_depth=None if demand.pack_required is None else view.depth(demand.pack_required),
                    preferred_depth=None if demand.pack_preferred is None else view.depth(demand.pack_preferred),
                    replica_total=leader + (pods - 1) * worker,
                    same_shape=bool(np.array_equal(leader, worker) and np.array_equal(leader_ok, worker_ok)),
                )
            )
        by_name = {role.demand.name: role.index for role in roles}
        rules = [_Rule(by_name[a.from_role], by_name[a.to_role], view.depth(a.level), a.required) for a in unit.affinity]
        gang = sum((max(role.demand.minimum, 1) * role.replica_total for role in roles), np.zeros_like(totals))
        share = np.where(totals > 0, gang / np.maximum(totals, 1), 0.0)
        pods_index = snapshot.resource_index.get("pods", -1)
        if share.size > 1 and pods_index >= 0:
            without_pods = share.copy()
            without_pods[pods_index] = -1.0
            dominant = int(np.argmax(without_pods)) if without_pods.max() > 0 else pods_index
        else:
            dominant = int(np.argmax(share))
        required_depth = view.depth(unit.pack_required)
        preferred_depth = None if unit.pack_preferred is None else view.depth(unit.pack_preferred)
        return cls(order, unit, view, roles, rules, required_depth, preferred_depth, dominant)

    def minimum_needs(self) -> dict[int, int]:
        """Role index -> complete replicas the unit needs to be functional."""
        return {r: role.demand.minimum for r, role in enumerate(self.roles) if role.demand.minimum > 0}

    def release(self, free: np.ndarray | None) -> tuple:
        """Forget this unit's placement, giving its capacity back to `free`; returns what `restore` needs."""
        saved = ([list(role.placed) for role in self.roles], self.domain, self.preferred_domain)
        for role in self.roles:
            for replica in role.placed:
                if free is not None:
                    for pod, node in enumerate(replica):
                        free[node] += role.leader if pod == 0 else role.worker
            role.placed = []
        self.domain = self.preferred_domain = None
        return saved

    def restore(self, saved: tuple) -> None:
        placements, self.domain, self.preferred_domain = saved
        for role, replicas in zip(self.roles, placements):
            role.placed = replicas

    # ------------------------------------------------------------------ results

    def placed_count(self, role: _Role) -> int:
        return len(role.placed)

    def result(self) -> UnitPlacement:
        view = self.view
        names = view.snapshot.node_names
        roles = tuple(
            (
                role.demand.name,
                tuple(
                    ReplicaAssignment(
                        index=r,
                        pods=tuple(
                            PodAssignment(self.demand.pod_name(role.demand.name, r, p), names[node])
                            for p, node in enumerate(nodes)
                        ),
                    )
                    for r, nodes in enumerate(role.placed)
                ),
            )
            for role in self.roles
        )
        domain = None
        where = self.preferred_domain or self.domain
        if where is not None:
            domain = f"{view.level_names[where[0]]}/{view.domain_name(*where)}"
        if not self.functional:
            code = "UnschedulableAndUnresolvable" if self.unresolvable else "Unschedulable"
            return UnitPlacement(self.demand, "Unschedulable", self.failure or "", roles, None, code)
        if all(len(role.placed) >= role.demand.desired for role in self.roles):
            return UnitPlacement(self.demand, "Placed", "", roles, domain)
        counts = ", ".join(f"{role.demand.name} {len(role.placed)}/{role.demand.desired}" for role in self.roles)
        return UnitPlacement(self.demand, "MinimumPlaced", f"placed {counts}; {self.capped or 'extras did not fit'}", roles, domain)


# ----------------------------------------------------------------------------- fit counting


def _fit(free: np.ndarray, vec: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """How many pods of shape `vec` each node (row of `free`) can still take."""
    cols = vec > 0
    counts = np.min(free[:, cols] // vec[cols], axis=1)
    return np.where(ok, counts, 0)


def _replica_capacity(role: _Role, k_leader: np.ndarray, k_worker: np.ndarray, groups: np.ndarray, size: int) -> np.ndarray:
    """Upper bound on the complete replicas of `role` each group of nodes can hold."""
    leaders = np.bincount(groups, weights=k_leader, minlength=size).astype(np.int64)
    if role.pods == 1:
        return leaders
    if role.same_shape:
        return leaders // role.pods
    workers = np.bincount(groups, weights=k_worker, minlength=size).astype(np.int64)
    return np.minimum(leaders, workers // (role.pods - 1))


def _replica_depth(role: _Role, unit_depth: int) -> int:
    """The depth a replica must stay within when its unit is packed at `unit_depth`."""
    return unit_depth if role.required_depth is None else max(unit_depth, role.required_depth)


def domain_capacity(unit: _Unit, role: _Role, free: np.ndarray, depth: int) -> np.ndarray:
    """[domains at depth]: upper bound on complete replicas of `role` in each domain."""
    view = unit.view
    nodes = view._order[depth]
    rows = free[nodes]
    k_leader = _fit(rows, role.leader, role.leader_ok[nodes])
    k_worker = k_leader if role.same_shape else _fit(rows, role.worker, role.worker_ok[nodes])
    inner = _replica_depth(role, depth)
    sub = view.dom[inner][nodes]
    per_sub = _replica_capacity(role, k_leader, k_worker, sub, view.domain_count(inner))
    out = np.zeros(view.domain_count(depth), dtype=np.int64)
    np.add.at(out, view.ancestor[inner][depth], per_sub)
    return out


# ----------------------------------------------------------------------------- minimum gang


@dataclass(frozen=True)
class _Reservation:
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
    def of(cls, unit: _Unit) -> "_Reservation":
        where = unit.preferred_domain or unit.domain or (0, 0)
        outstanding = sum(
            (max(role.demand.desired - len(role.placed), 0) * role.replica_total for role in unit.roles),
            np.zeros(unit.roles[0].leader.size, np.int64),
        )
        return cls(unit.view, where[0], where[1], outstanding)


def _reserved(view: TopologyView, depth: int, reservations: Sequence[_Reservation], width: int) -> np.ndarray:
    """[domains at depth, resources]: reserved demand inside each domain."""
    out = np.zeros((view.domain_count(depth), width), np.int64)
    for reservation in reservations:
        if reservation.view is view and reservation.depth >= depth:
            out[view.ancestor[reservation.depth][depth][reservation.domain]] += reservation.demand
    return out


@dataclass
class _Space:
    """Nodes being placed into, with a private copy of their free capacity.

    Masks and positions used while placing are over `nodes` (0..len-1); `nodes` maps a
    position back to the snapshot's node index.
    """

    nodes: np.ndarray
    free: np.ndarray

    @classmethod
    def of(cls, nodes: np.ndarray, free: np.ndarray) -> "_Space":
        return cls(nodes, free[nodes].copy())


def _place_gang(
    unit: _Unit, free: np.ndarray, needs: Mapping[int, int], reservations: Sequence[_Reservation] = ()
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


def _grown_needs(unit: _Unit, needs: Mapping[int, int]) -> list[dict[int, int]]:
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
    unit: _Unit, free: np.ndarray, needs: Mapping[int, int], reservations: Sequence[_Reservation]
) -> bool:
    """Candidate domains are ranked: first those where the whole unit (every role at its
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
        best: tuple[int, int, _Space, dict[int, list[list[int]]]] | None = None
        trials = 0
        for position, domain in enumerate(ranked[:MAX_DOMAIN_ATTEMPTS]):
            if best is not None and (trials >= GANG_TRIALS or ranked_tier[position] != ranked_tier[best[1]]):
                break
            space = _Space.of(view.members(depth, int(domain)), free)
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


def _empty_nodes_opened(view: TopologyView, free: np.ndarray, space: _Space) -> int:
    """How many wholly free nodes a trial assignment starts using (whole nodes are precious)."""
    before = free[space.nodes]
    empty = np.all(before == view.snapshot.allocatable[space.nodes], axis=1)
    touched = np.any(space.free != before, axis=1)
    return int(np.count_nonzero(empty & touched))


def _gang_order(unit: _Unit, needs: Mapping[int, int]) -> list[int]:
    """`to` roles first, then roles without affinity, then `from` roles; bigger replicas first."""
    sources = {rule.source for rule in unit.rules}
    targets = {rule.target for rule in unit.rules}

    def rank(r: int) -> tuple:
        tier = 0 if r in targets and r not in sources else 2 if r in sources else 1
        return (tier, -int(unit.roles[r].replica_total[unit.dominant]), r)

    return sorted(needs, key=rank)


def _assign_gang(unit: _Unit, space: _Space, needs: Mapping[int, int], depth: int) -> dict[int, list[list[int]]] | None:
    """Place the gang inside `space` (updating its free copy), or None if it does not fit.

    Best fit first. If that fails and the unit has affinity rules, once more with the `to`
    side spread (each pod where the most room is left), which keeps room for `from` pods
    next to it.
    """
    attempts = (False, True) if unit.rules else (False,)
    for spread in attempts:
        trial = _Space(space.nodes, space.free.copy())
        placed = _try_gang(unit, trial, needs, depth, spread)
        if placed is not None:
            space.free[:] = trial.free
            return placed
    return None


def _try_gang(
    unit: _Unit, space: _Space, needs: Mapping[int, int], depth: int, spread: bool
) -> dict[int, list[list[int]]] | None:
    placed: dict[int, list[list[int]]] = {r: [] for r in needs}
    waiting = dict(needs)
    targets = {rule.target for rule in unit.rules}
    for r in _gang_order(unit, needs):
        role = unit.roles[r]
        for _ in range(needs[r]):
            replica = _place_replica(unit, role, space, depth, placed, waiting, None, spread and r in targets)
            if replica is None:
                return None
            placed[r].append(replica)
            waiting[r] -= 1
    if not _required_affinity_holds(unit, placed):
        return None
    return placed


def _required_affinity_holds(unit: _Unit, fresh: Mapping[int, list[list[int]]]) -> bool:
    """Every fresh `from` replica shares a Required rule's domain with some `to` replica."""
    view = unit.view
    for rule in unit.rules:
        if not rule.required:
            continue
        targets = {int(view.dom[rule.depth][n]) for rep in _all_replicas(unit, rule.target, fresh) for n in rep}
        for replica in fresh.get(rule.source, []):
            if not any(int(view.dom[rule.depth][n]) in targets for n in replica):
                return False
    return True


def _all_replicas(unit: _Unit, r: int, fresh: Mapping[int, list[list[int]]]) -> list[list[int]]:
    return unit.roles[r].placed + list(fresh.get(r, []))


# ----------------------------------------------------------------------------- one replica


def _affinity_masks(
    unit: _Unit,
    role: _Role,
    space: _Space,
    fresh: Mapping[int, list[list[int]]],
    waiting: Mapping[int, int],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(required mask, preference score) over the space, for this replica's leader.

    As a `from` role: a position scores 1 per rule whose `to` side already sits in its
    affinity domain (and Required rules allow only such positions).
    As a `to` role: 1 per rule whose `from` side already sits there, plus, while `from`
    replicas of the gang are still to come, how many of their leaders the domain could
    still take beside one pod of this replica — so decode goes where prefill fits too.
    """
    view = unit.view
    required: np.ndarray | None = None
    score: np.ndarray | None = None
    dominant = unit.dominant
    for rule in unit.rules:
        doms = view.dom[rule.depth][space.nodes]
        if rule.source == role.index:
            targets = [n for rep in _all_replicas(unit, rule.target, fresh) for n in rep]
            if targets:
                near = np.isin(doms, view.dom[rule.depth][np.array(targets)])
            elif waiting.get(rule.target, 0) > 0 or not rule.required:
                continue  # the counterpart comes later in this gang; checked at the end
            else:
                near = np.zeros(doms.size, dtype=bool)
            if rule.required:
                required = near if required is None else required & near
            gain = near.astype(np.int64)
        elif rule.target == role.index:
            sources = [n for rep in _all_replicas(unit, rule.source, fresh) for n in rep]
            gain = np.isin(doms, view.dom[rule.depth][np.array(sources)]).astype(np.int64) if sources else np.zeros(doms.size, np.int64)
            still = waiting.get(rule.source, 0)
            if still > 0:
                leader = int(unit.roles[rule.source].leader[dominant])
                own = int(min(role.leader[dominant], role.worker[dominant]))
                compact, inverse = np.unique(doms, return_inverse=True)
                room = np.bincount(inverse, weights=space.free[:, dominant], minlength=compact.size).astype(np.int64)[inverse]
                fit = (room - own) // leader if leader > 0 else np.full(doms.size, still)
                gain = gain + np.clip(fit, 0, still)
        else:
            continue
        score = gain if score is None else score + gain
    return required, score


def _place_replica(
    unit: _Unit,
    role: _Role,
    space: _Space,
    depth: int,
    fresh: Mapping[int, list[list[int]]],
    waiting: Mapping[int, int],
    unit_preferred: np.ndarray | None,
    spread: bool = False,
) -> list[int] | None:
    """Place one complete replica of `role` in `space` (committing to its free copy).

    Candidate replica domains (at the replica's pack depth) are ranked: affinity score,
    inside the unit's preferred domain, tightest fit, then domain number. Returns the node
    of each pod, or None when no candidate takes the whole replica.
    """
    view = unit.view
    nodes = space.nodes
    k_leader = _fit(space.free, role.leader, role.leader_ok[nodes])
    k_worker = _fit(space.free, role.worker, role.worker_ok[nodes])
    required, preferred = _affinity_masks(unit, role, space, fresh, waiting)
    compact, groups = np.unique(view.dom[_replica_depth(role, depth)][nodes], return_inverse=True)
    size = compact.size
    capacity = _replica_capacity(role, k_leader, k_worker, groups, size)
    if required is not None:
        near_leaders = np.bincount(groups, weights=np.where(required, k_leader, 0), minlength=size)
        capacity = np.where(near_leaders >= 1, capacity, 0)
    candidates = np.nonzero(capacity >= 1)[0]
    if candidates.size == 0:
        return None
    affinity = np.zeros(size, dtype=np.int64)
    if preferred is not None:
        np.maximum.at(affinity, groups, np.where(k_leader >= 1, preferred, 0))
    outside = np.zeros(size, dtype=bool)
    if unit_preferred is not None:
        outside = np.bincount(groups, weights=unit_preferred, minlength=size) < 1
    leftover = np.bincount(groups, weights=space.free[:, unit.dominant], minlength=size) - role.replica_total[unit.dominant]
    if spread:
        leftover = -leftover
    order = np.lexsort((compact[candidates], leftover[candidates], outside[candidates], -affinity[candidates]))
    for group in candidates[order][:MAX_REPLICA_ATTEMPTS]:
        positions = np.nonzero(groups == group)[0]
        chosen = _assign_pods(unit, role, space, positions, required, preferred, unit_preferred, spread)
        if chosen is not None:
            return [int(nodes[p]) for p in chosen]
    return None


def _assign_pods(
    unit: _Unit,
    role: _Role,
    space: _Space,
    positions: np.ndarray,
    required: np.ndarray | None,
    preferred: np.ndarray | None,
    unit_preferred: np.ndarray | None,
    spread: bool = False,
) -> list[int] | None:
    """Best-fit the pods of one replica onto `positions`; commit to the space on success.

    With a preferred replica pack narrower than the required one, first try to keep the
    whole replica inside one domain of the preferred level (tightest first).
    """
    attempts: list[np.ndarray] = []
    depth = role.preferred_depth
    if depth is not None and role.pods > 1:
        view = unit.view
        compact, groups = np.unique(view.dom[depth][space.nodes[positions]], return_inverse=True)
        if compact.size > 1:
            rows = space.free[positions]
            k_leader = _fit(rows, role.leader, role.leader_ok[space.nodes[positions]])
            k_worker = _fit(rows, role.worker, role.worker_ok[space.nodes[positions]])
            capacity = _replica_capacity(role, k_leader, k_worker, groups, compact.size)
            leftover = np.bincount(groups, weights=rows[:, unit.dominant], minlength=compact.size)
            fitting = np.nonzero(capacity >= 1)[0]
            for group in fitting[np.lexsort((compact[fitting], leftover[fitting]))][:MAX_REPLICA_ATTEMPTS]:
                attempts.append(positions[groups == group])
    attempts.append(positions)
    for subset in attempts:
        chosen = _greedy_pods(unit, role, space, subset, required, preferred, unit_preferred, spread)
        if chosen is not None:
            return chosen
    return None


def _greedy_pods(
    unit: _Unit,
    role: _Role,
    space: _Space,
    subset: np.ndarray,
    required: np.ndarray | None,
    preferred: np.ndarray | None,
    unit_preferred: np.ndarray | None,
    spread: bool = False,
) -> list[int] | None:
    """Pods one by one, each to the node it fits best (least left over; most with `spread`);
    the leader near counterparts."""
    saved = space.free[subset].copy()
    chosen: list[int] = []
    # Spreading a `to` replica: its later pods go to affinity domains it does not cover yet.
    spread_depths = [rule.depth for rule in unit.rules if rule.target == role.index] if spread else []
    for pod in range(role.pods):
        vec, ok = (role.leader, role.leader_ok) if pod == 0 else (role.worker, role.worker_ok)
        fits = _fit(space.free[subset], vec, ok[space.nodes[subset]]) >= 1
        leftover = space.free[subset, unit.dominant] - vec[unit.dominant]
        keys: list[np.ndarray] = [subset, -leftover if spread else leftover]
        if pod == 0:
            if required is not None:
                fits &= required[subset]
            if unit_preferred is not None:
                keys.append(~unit_preferred[subset])
            if preferred is not None:
                keys.append(-preferred[subset])
        if pod > 0 and spread_depths:
            for depth in spread_depths:
                doms = unit.view.dom[depth]
                keys.append(np.isin(doms[space.nodes[subset]], doms[space.nodes[np.array(chosen)]]))
        if not fits.any():
            space.free[subset] = saved
            return None
        best = subset[fits][np.lexsort(tuple(key[fits] for key in keys))[0]]
        space.free[best] -= vec
        chosen.append(int(best))
    return chosen


# ----------------------------------------------------------------------------- extras


def _place_extras(units: list[_Unit], free: np.ndarray) -> None:
    """Add replicas beyond the minimums, the (unit, role) furthest behind its target first."""
    heap: list[tuple[int, float, int, int, int]] = []

    def push(unit: _Unit, role: _Role) -> None:
        # Furthest behind first; on a tie the role with fewer desired replicas (the bigger
        # step) goes first, so a role that cannot grow stops the others at its fraction.
        desired = role.demand.desired
        if len(role.placed) < desired:
            heapq.heappush(heap, (-unit.demand.priority, len(role.placed) / desired, desired, unit.order, role.index))

    for unit in units:
        if unit.functional:
            for role in unit.roles:
                push(unit, role)
    while heap:
        *_, order, r = heapq.heappop(heap)
        unit = units[order]
        role = unit.roles[r]
        cap = _ratio_cap(unit, role)
        if len(role.placed) + 1 > cap:
            continue
        if _place_extra(unit, role, free):
            push(unit, role)
        else:
            role.blocked = f"no room for another {role.demand.name} replica ({describe_replica(unit, role)})"
            if unit.capped is None:
                unit.capped = role.blocked
                others = [o for o in unit.roles if o is not role and len(o.placed) < o.demand.desired]
                if others:
                    unit.capped += f"; {short_role_list(others)} held at the same fraction to keep the ratio"


def _ratio_cap(unit: _Unit, role: _Role) -> int:
    """Most replicas `role` may have: once a role is full, the others stop at its fraction."""
    fractions = [len(o.placed) / o.demand.desired for o in unit.roles if o.blocked is not None]
    if not fractions:
        return role.demand.desired
    return max(len(role.placed), math.ceil(min(fractions) * role.demand.desired - 1e-9))


def _place_extra(unit: _Unit, role: _Role, free: np.ndarray) -> bool:
    if unit.domain is None:
        # Every minimum is zero: the first replica picks the unit's domain like a gang of one.
        return _place_gang(unit, free, {role.index: 1})
    view = unit.view
    space = _Space.of(view.members(*unit.domain), free)
    unit_preferred = None
    if unit.preferred_domain is not None:
        depth, domain = unit.preferred_domain
        unit_preferred = view.dom[depth][space.nodes] == domain
    replica = _place_replica(unit, role, space, unit.domain[0], {}, {}, unit_preferred)
    if replica is None:
        return False
    free[space.nodes] = space.free
    role.placed.append(replica)
    return True
