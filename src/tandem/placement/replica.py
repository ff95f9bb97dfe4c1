"""Placing one complete replica: its replica domain, then a node for each of its pods."""

from __future__ import annotations

from typing import Iterator, Mapping, NamedTuple

import numpy as np

from tandem.placement.capacity import fit, member, replica_capacity, replica_depth
from tandem.placement.context import PlanContext
from tandem.placement.locality import Locality, locality_keys, pending_demand, unit_nodes
from tandem.placement.reservations import Reservations
from tandem.placement.space import Space, unique_inverse
from tandem.placement.unit_state import RoleState, UnitState, staying_replicas

# How many replica domains are tried for one replica before it is declared unplaceable.
MAX_REPLICA_ATTEMPTS = 8


class ReplicaRequest(NamedTuple):
    """One complete replica to place, and what ranking its places reads besides the space.
    (NamedTuples here and below: a third of a frozen dataclass's cost to make, and a plan
    makes thousands.)"""

    context: PlanContext
    unit: UnitState
    role: RoleState
    space: Space  # the nodes it may take (their free copy is committed to)
    depth: int  # depth of the domain the space is: the unit's domain, or one inside it
    fresh: Mapping[int, list[list[int]]]  # role index -> replicas placed so far in the current gang
    waiting: Mapping[int, int]  # role index -> replicas of the gang still to come (a `to` replica's `from` side)
    unit_preferred: np.ndarray | None = None  # [positions]: inside the unit's preferred domain
    spread: bool = False  # each pod where the most room is left (a `to` replica, `gang._assign_gang`)
    rest: int = 0  # what the unit still has to place, in its dominant resource
    remaining: Mapping[int, int] | None = None  # role index -> replicas that rest is made of, this one included
    reservations: Reservations | None = None  # what other units reserve


class Affinity(NamedTuple):
    """The affinity of the replica's leader over the space's positions (`_affinity_masks`)."""

    required: np.ndarray | None  # [positions] bool: where its Required rules let it go
    score: np.ndarray | None  # [positions]: how well each position serves its rules


class ReplicaDomains(NamedTuple):
    """The space's nodes grouped by replica domain (at the replica's pack depth)."""

    depth: int
    compact: np.ndarray  # the domains' ids
    groups: np.ndarray  # position -> index into `compact`
    candidates: np.ndarray  # indices into `compact` of the domains that take the whole replica


class PodRanking(NamedTuple):
    """What ranks the nodes for each pod of one replica, fixed while its pods are placed."""

    request: ReplicaRequest
    affinity: Affinity
    locality: Locality
    leaders: np.ndarray | None = None  # [positions]: the leaders each takes, as counted to choose the domain


def _affinity_masks(request: ReplicaRequest) -> Affinity:
    """(required mask, preference score) over the space, for this replica's leader.

    As a `from` role: a position scores 1 per rule whose `to` side already sits in its
    affinity domain (and Required rules allow only such positions).
    As a `to` role: first a `from` replica sitting there with no `to` replica near it
    yet (one already served gains nothing from another; serving one outweighs any room
    for those to come), then, while `from` replicas are still to come, how many of their
    leaders the domain could still take beside one pod of this replica — so decode goes
    where prefill fits too.
    """
    unit, role, space, fresh, waiting = request.unit, request.role, request.space, request.fresh, request.waiting
    view = unit.view
    required: np.ndarray | None = None
    score: np.ndarray | None = None
    dominant = unit.dominant
    for rule in unit.rules:
        doms = view.dom[rule.depth][space.nodes]
        if rule.source == role.index:
            targets = [n for rep in staying_replicas(unit, rule.target, fresh) for n in rep]
            if targets:
                near = member(doms, view.dom[rule.depth][np.array(targets)], view.domain_count(rule.depth))
            elif waiting.get(rule.target, 0) > 0 or not rule.required:
                continue  # the counterpart comes later in this gang; checked at the end
            else:
                near = np.zeros(doms.size, dtype=bool)
            if rule.required and waiting.get(rule.target, 0) <= 0:
                # (While more `to` replicas are to come in this gang, one may still come
                # to it: near ones are preferred, and the rule is checked at the end.)
                required = near if required is None else required & near
            gain = near.astype(np.int64)
        elif rule.target == role.index:
            served = {int(view.dom[rule.depth][n]) for rep in staying_replicas(unit, rule.target, fresh) for n in rep}
            sources = [
                n
                for rep in staying_replicas(unit, rule.source, fresh)
                if not served.intersection(int(view.dom[rule.depth][m]) for m in rep)
                for n in rep
            ]
            gain = np.zeros(doms.size, np.int64)
            still = waiting.get(rule.source, 0)
            if sources:
                # Serving a `from` replica already placed comes before room for those to come.
                near = member(doms, view.dom[rule.depth][np.array(sources)], view.domain_count(rule.depth))
                gain = near.astype(np.int64) * (max(still, 0) + 1)
            if still > 0:
                leader = int(unit.roles[rule.source].leader[dominant])
                own = int(min(role.leader[dominant], role.worker[dominant]))
                compact, inverse = space.groups(view, rule.depth)
                room = np.bincount(inverse, weights=space.free[:, dominant], minlength=compact.size).astype(np.int64)[inverse]
                fit = (room - own) // leader if leader > 0 else np.full(doms.size, still)
                gain = gain + np.minimum(np.maximum(fit, 0), still)  # np.clip, without its overhead
        else:
            continue
        score = gain if score is None else score + gain
    return Affinity(required, score)


def place_replica(request: ReplicaRequest) -> list[int] | None:
    """Place one complete replica of `role` in `space` (committing to its free copy).

    Candidate replica domains (at the replica's pack depth) are ranked: affinity score,
    inside the unit's preferred domain, leaving the unit's other roles room for the
    replicas they still need (`_crowds_out`), locality at each level between the space
    and the replica domain (`locality.py`; `rest` is what the unit still has to place,
    in its dominant resource, and `remaining` the replicas per role it is made of, this
    one included; room is counted beside what other units reserve, `reservations`),
    tightest fit, then the domain's class and number (`ties.py`). Returns the node of
    each pod, or None when no candidate takes the whole replica.
    """
    unit, role, space, depth = request.unit, request.role, request.space, request.depth
    view = unit.view
    nodes = space.nodes
    k_leader = fit(space.free, role.leader, role.leader_ok[nodes])
    k_worker = k_leader if role.same_shape or role.pods == 1 else fit(space.free, role.worker, role.worker_ok[nodes])
    compact, groups = space.groups(view, replica_depth(role, depth))
    size = compact.size
    capacity = replica_capacity(role, k_leader, k_worker, groups, size)
    fitting = capacity >= 1
    if not fitting.any():
        return None  # (before the affinity masks: a Required rule only takes candidates away)
    affinity = _affinity_masks(request)
    required, preferred = affinity
    if required is not None:
        near_leaders = np.bincount(groups, weights=np.where(required, k_leader, 0), minlength=size)
        fitting &= near_leaders >= 1
    candidates = fitting.nonzero()[0]
    if candidates.size == 0:
        return None
    inner = replica_depth(role, depth)
    used = unit_nodes(unit, request.fresh)
    rest = max(request.rest, int(role.replica_total[unit.dominant]))
    remaining = {role.index: 1} if request.remaining is None else request.remaining
    pending = pending_demand(unit, space, remaining)
    follow = not role.replica_total[unit.dominant]
    if follow:
        # Nothing of its own to fit: it goes where the most of the whole rest can follow.
        rest = max(rest, sum(count * int(unit.roles[r].replica_total[unit.dominant]) for r, count in remaining.items()))
    # A `to` replica whose `from` replicas are still to come goes where they fit beside it
    # (the affinity score), not where the unit already is: locality stops above the
    # rule's level, or the `to` side would crowd out the `from` side it is there for.
    # One that takes none of the dominant resource crowds out nothing.
    stop = unit.view.depth_count
    if not follow:
        stop = min([rule.depth for rule in unit.rules if rule.target == role.index and request.waiting.get(rule.source, 0) > 0], default=stop)
    # Where the replica would leave another role of the unit fewer replicas than it still
    # needs (`_crowds_out`), it goes only if nowhere else will do.
    crowds = _crowds_out(request, remaining) if not request.spread else None
    # Other units' nodes rank pods within a replica domain; a one-pod replica whose domains
    # are single nodes (hosts) has nothing to rank there.
    single = role.pods == 1 and size == nodes.size
    others = _others_there(unit, space, used) if request.context.looks_ahead() and not single else None
    locality = Locality(inner, used, rest, stop, pending, request.reservations, crowds, others)
    domains = ReplicaDomains(inner, compact, groups, candidates)
    order = candidates
    if candidates.size > 1:
        ranks = _domain_ranks(request, domains, k_leader, preferred, crowds)
        order = candidates[np.lexsort(_replica_keys(request, domains, ranks, locality))]
    ranking = PodRanking(request, affinity, locality, k_leader)
    for group in order[:MAX_REPLICA_ATTEMPTS]:
        positions = (groups == group).nonzero()[0]
        chosen = _assign_pods(ranking, positions)
        if chosen is not None:
            return [int(nodes[p]) for p in chosen]
    return None


def _domain_ranks(
    request: ReplicaRequest, domains: ReplicaDomains, k_leader: np.ndarray, preferred: np.ndarray | None, crowds: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(leftover, crowding, outside, affinity) per replica domain, for `_replica_keys`
    (asked only when there is more than one candidate to rank): the dominant resource
    left after the replica; whether a pod on any node of it would crowd out another
    role; whether it lies outside the unit's preferred domain; the best affinity score
    of a node that takes a leader (`preferred`: the affinity score over the space)."""
    unit, role, space, unit_preferred = request.unit, request.role, request.space, request.unit_preferred
    groups, size = domains.groups, domains.compact.size
    affinity = np.zeros(size, dtype=np.int64)
    if preferred is not None:
        np.maximum.at(affinity, groups, np.where(k_leader >= 1, preferred, 0))
    outside = np.zeros(size, dtype=bool)
    if unit_preferred is not None:
        outside = np.bincount(groups, weights=unit_preferred, minlength=size) < 1
    leftover = np.bincount(groups, weights=space.free[:, unit.dominant], minlength=size) - role.replica_total[unit.dominant]
    crowding = np.zeros(size, dtype=bool)
    if crowds is not None:
        crowding = np.ones(size, dtype=bool)
        np.logical_and.at(crowding, groups, crowds)
    return leftover, crowding, outside, affinity


def _replica_keys(
    request: ReplicaRequest, domains: ReplicaDomains, ranks: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], locality: Locality
) -> tuple[np.ndarray, ...]:
    """Sort keys over the candidate replica domains, least significant first (np.lexsort):
    domain number, class and rack (hosts), room for the rest below a `to` replica's rule
    level, tightest fit, locality, crowding out another role, the unit's preferred
    domain, affinity (`ranks`: leftover, crowding, outside, affinity per
    replica domain)."""
    unit, space, depth, reservations = request.unit, request.space, request.depth, request.reservations
    inner, compact, groups, candidates = domains
    used, rest, pending, stop = locality.used, locality.rest, locality.pending, locality.stop
    follow = not request.role.replica_total[unit.dominant]
    leftover, crowding, outside, affinity = ranks
    size = compact.size
    first = np.zeros(size, dtype=np.int64)
    first[groups[::-1]] = np.arange(groups.size - 1, -1, -1)
    near: list[np.ndarray] = []
    late: list[np.ndarray] = []  # below the rule's level: room for the rest breaks ties only
    if request.spread:
        leftover = -leftover
    else:
        if min(inner, stop - 1) > depth:
            depths = range(depth + 1, min(inner, stop - 1) + 1)
            near = [key[first] for key in locality_keys(unit, space, depths, used, rest, pending, None, follow, reservations)]
        if inner >= max(stop, depth + 1):
            depths = range(max(stop, depth + 1), inner + 1)
            late = [key[first] for key in locality_keys(unit, space, depths, np.zeros(0, np.int64), rest, pending, None, follow, reservations)]
    kind = request.context.ties.domain_keys(unit.view, inner, compact[candidates])
    c = candidates
    return (
        compact[c],
        *kind,
        *(key[c] for key in reversed(late)),
        leftover[c],
        *(key[c] for key in reversed(near)),
        crowding[c],
        outside[c],
        -affinity[c],
    )


def _assign_pods(ranking: PodRanking, positions: np.ndarray) -> list[int] | None:
    """Best-fit the pods of one replica onto `positions`; commit to the space on success.

    With a preferred replica pack narrower than the required one, first try to keep the
    whole replica inside one domain of the preferred level: best affinity score first, then
    locality (a domain the unit already uses first, `locality.py`), then tightest. A `to`
    replica being spread skips this: spreading it is the point.
    """
    request, locality = ranking.request, ranking.locality
    unit, role, space, spread = request.unit, request.role, request.space, request.spread
    required, preferred = ranking.affinity
    attempts: list[np.ndarray] = []
    depth = role.preferred_depth
    spreading = spread and any(rule.target == role.index for rule in unit.rules)
    if depth is not None and role.pods > 1 and not spreading:
        view = unit.view
        compact, groups = unique_inverse(view.dom[depth][space.nodes[positions]])
        if compact.size > 1:
            rows = space.free[positions]
            k_leader = fit(rows, role.leader, role.leader_ok[space.nodes[positions]])
            k_worker = fit(rows, role.worker, role.worker_ok[space.nodes[positions]])
            capacity = replica_capacity(role, k_leader, k_worker, groups, compact.size)
            leftover = np.bincount(groups, weights=rows[:, unit.dominant], minlength=compact.size)
            affinity = np.zeros(compact.size, dtype=np.int64)
            if preferred is not None:
                np.maximum.at(affinity, groups, np.where(k_leader >= 1, preferred[positions], 0))
            if required is not None:
                near = np.zeros(compact.size, dtype=bool)
                np.logical_or.at(near, groups, required[positions] & (k_leader >= 1))
                capacity = np.where(near, capacity, 0)
            fitting = (capacity >= 1).nonzero()[0]
            if preferred is not None and fitting.size:
                # Affinity before the preferred pack: a domain that keeps the replica
                # whole but farther from its counterparts than its leader could be
                # is left to the attempt over every position.
                best = int(np.max(np.where(k_leader >= 1, preferred[positions], 0), initial=0))
                fitting = fitting[affinity[fitting] >= best]
            late: list[np.ndarray] = []  # below a waiting `to` replica's rule level: ties only
            first = np.zeros(compact.size, dtype=np.int64)
            first[groups[::-1]] = np.arange(groups.size - 1, -1, -1)
            depths = range(locality.inner + 1, min(depth, locality.stop - 1) + 1)
            follow = not role.replica_total[unit.dominant]
            keys = locality_keys(unit, space, depths, locality.used, locality.rest, locality.pending, positions, follow, locality.reservations)
            local: list[np.ndarray] = [key[first] for key in keys]
            below = range(max(locality.stop, locality.inner + 1), depth + 1)
            if len(below):
                # As for the replica domain (`_replica_keys`): room for the rest beside
                # what others reserve, then the domains the unit already uses.
                none = np.zeros(0, np.int64)
                keys = locality_keys(unit, space, below, none, locality.rest, locality.pending, positions, follow, locality.reservations)
                if locality.used.size:
                    keys += locality_keys(unit, space, below, locality.used, locality.rest, locality.pending, positions, follow, None)[: len(below)]
                late = [key[first] for key in keys]
            kind = request.context.ties.domain_keys(view, depth, compact[fitting])
            order = np.lexsort(
                (
                    compact[fitting],
                    *kind,
                    *(key[fitting] for key in reversed(late)),
                    leftover[fitting],
                    *(key[fitting] for key in reversed(local)),
                    -affinity[fitting],
                )
            )
            for group in fitting[order][:MAX_REPLICA_ATTEMPTS]:
                attempts.append(positions[groups == group])
    attempts.append(positions)
    for subset in attempts:
        chosen = _greedy_pods(ranking, subset)
        if chosen is not None:
            return chosen
    return None


def _greedy_pods(ranking: PodRanking, subset: np.ndarray) -> list[int] | None:
    """Pods one by one, each to the node it fits best (least left over; most with `spread`);
    the leader near counterparts. With `locality` pods go to as few narrower domains as
    fit them first (room beside what other units reserve, `locality.py`). `leaders`, when
    given: the leaders each position of the space takes as it is now (a failed subset
    gives back what it took), so the leader's fit need not be counted again.

    The last ties, before the node's class, rack (`ties.py`) and number, are contention: a pod
    that takes some of the dominant resource goes where less of the rest of the unit may
    go (leaving the only node a selector allows to the pod that needs it); one that takes
    none goes where more of the rest may follow it; then a node that holds no pod this
    plan gave another unit (each unit keeps to its own nodes while it grows).
    """
    request, locality, leaders = ranking.request, ranking.locality, ranking.leaders
    unit, role, space = request.unit, request.role, request.space
    required = ranking.affinity.required
    saved = space.free.take(subset, axis=0)  # (a copy; `take`: far cheaper than indexing rows)
    pending = locality.pending.copy()
    nodes = space.nodes[subset]
    chosen: list[int] = []
    for pod in range(role.pods):
        vec, ok = (role.leader, role.leader_ok) if pod == 0 else (role.worker, role.worker_ok)
        fits = (leaders[subset] if pod == 0 and leaders is not None else fit(space.free.take(subset, axis=0), vec, ok[nodes])) >= 1
        if pod == 0 and required is not None:
            fits &= required[subset]
        where = fits.nonzero()[0]
        if where.size == 0:
            space.free[subset] = saved
            return None
        if where.size == 1:
            best = subset[where[0]]  # nothing to rank
        else:
            keys = _pod_keys(ranking, subset, pod, chosen, pending)
            if where.size < subset.size:
                keys = (key[where] for key in keys)
            best = subset[where[np.lexsort(tuple(keys)[::-1])[0]]]
        space.free[best] -= vec
        chosen.append(int(best))
        if vec[unit.dominant] and pod < role.pods - 1:
            # This pod is placed: the rest that may still go to a node shrinks by it
            # (for the replica's next pods: `pending` is this call's own copy).
            pending -= int(vec[unit.dominant]) * ok[space.nodes]  # (int64: the amount is a Python int)
    return chosen


def _pod_keys(ranking: PodRanking, subset: np.ndarray, pod: int, chosen: list[int], pending: np.ndarray) -> Iterator[np.ndarray]:
    """Sort keys over `subset` for pod `pod` of a replica, most significant first:
    affinity for the leader, the unit's preferred domain, crowding out another role,
    locality, fit, (for a `to` pod below its rule's level) its own replica and room,
    contention, other units' nodes, rack and class; the node number breaks what is left.
    (`chosen`: the positions of the replica's pods placed so far; `pending`: the rest
    that may still go to each position, less those pods.)"""
    request, locality = ranking.request, ranking.locality
    unit, role, space, spread, unit_preferred = request.unit, request.role, request.space, request.spread, request.unit_preferred
    preferred = ranking.affinity.score
    vec = role.leader if pod == 0 else role.worker
    mine = space.nodes[np.array(chosen, dtype=np.int64)]
    follow = not vec[unit.dominant]
    if pod > 0 and spread:
        # Spreading a `to` replica: its later pods go to affinity domains it does not cover yet.
        for depth in [rule.depth for rule in unit.rules if rule.target == role.index]:
            doms = unit.view.dom[depth]
            yield np.isin(doms[space.nodes[subset]], doms[mine])
    if pod == 0:
        if preferred is not None:
            yield -preferred[subset]
        if unit_preferred is not None:
            yield ~unit_preferred[subset]
    # A pod that takes none of the dominant resource crowds out nothing: locality
    # does not stop for it.
    stop = unit.view.depth_count if follow else locality.stop
    if not spread:
        if pod == 0 and locality.crowds is not None:
            yield locality.crowds[subset]
        depths = range(locality.inner + 1, stop)
        if depths:
            here = np.concatenate((locality.used, mine))
            rest_now = locality.rest - pod * int(vec[unit.dominant])
            yield from locality_keys(unit, space, depths, here, rest_now, pending, subset, follow, locality.reservations)
    leftover = space.free[:, unit.dominant][subset] - vec[unit.dominant]  # (a column, then positions: far cheaper)
    yield -leftover if spread else leftover
    if not spread and stop < unit.view.depth_count:
        # Below the rule's level (a `to` pod waiting for its `from` side): the replica's
        # own pods together, then room for the rest, break ties only.
        depths = range(max(stop, locality.inner + 1), unit.view.depth_count)
        yield from locality_keys(unit, space, depths, mine, locality.rest, pending, subset, False, locality.reservations)
        if locality.used.size:
            # Then a domain the unit already uses: between two hosts equal in every other
            # respect, one holding the unit's pods and one holding another's (or a
            # running pod), the name decided how many hosts the unit spans.
            view = unit.view
            for depth in depths:
                doms = view.dom[depth]
                yield ~member(doms[space.nodes[subset]], doms[locality.used], view.domain_count(depth))
    yield -pending[subset] if follow else pending[subset]
    if locality.others is not None:
        yield locality.others[subset]
    yield from reversed(request.context.ties.node_keys(unit.view, space.nodes[subset]))


def _others_there(unit: UnitState, space: Space, mine: np.ndarray) -> np.ndarray:
    """[positions]: whether the node holds a pod this plan placed for another unit (its free
    capacity in the dominant resource is below the snapshot's, and no pod of this unit
    is there, `mine`)."""
    touched = space.free[:, unit.dominant] != space.before(unit.view.snapshot, unit.dominant)
    if touched.any() and mine.size:
        where = touched.nonzero()[0]
        touched[where] = ~member(space.nodes[where], mine, len(unit.view.snapshot.node_names))
    out: np.ndarray = touched
    return out


def _crowds_out(request: ReplicaRequest, remaining: Mapping[int, int]) -> np.ndarray | None:
    """[positions]: whether one pod of `role` (a one-pod replica) on the node would leave
    another role of the unit fewer complete replicas in the space than it still needs
    (a prefill on the one rack with two free hosts, which a decode pair needed), or None
    when no role could be crowded out.

    Counted like the bottom-up counts: the node's room for the other role's pods before
    and after, in its replica domain. A role on the `from` side of a Required rule whose
    `to` side is placed counts its leaders only where the rule lets them go (in a rule
    domain holding a `to` pod): a router on the host a prefill must share with its
    decode crowds the prefill out, however much room other hosts have. (`remaining`:
    role index -> replicas still to place.)"""
    unit, role, space, depth, fresh = request.unit, request.role, request.space, request.depth, request.fresh
    if role.pods != 1:
        return None
    out: np.ndarray | None = None
    nodes = space.nodes
    after: np.ndarray | None = None  # the free capacity with the pod there, once needed
    for o, need in remaining.items():
        other = unit.roles[o]
        if o == role.index or need <= 0:
            continue
        near = _required_near(unit, o, space, fresh)
        leader_ok = other.leader_ok[nodes] if near is None else other.leader_ok[nodes] & near
        k_leader = fit(space.free, other.leader, leader_ok)
        k_worker = k_leader if other.pods == 1 or (other.same_shape and near is None) else fit(space.free, other.worker, other.worker_ok[nodes])
        compact, inverse = space.groups(unit.view, replica_depth(other, depth))
        most = int(k_leader.max()) if k_worker is k_leader else max(int(k_leader.max()), int(k_worker.max()))
        if int(replica_capacity(other, k_leader, k_worker, inverse, compact.size).sum()) - most >= need:
            continue  # one pod costs at most a node's pods of it in replicas: it cannot fall short
        after = space.free - role.leader if after is None else after
        k_after = fit(after, other.leader, leader_ok)
        leaders = np.bincount(inverse, weights=k_leader, minlength=compact.size).astype(np.int64)
        leaders_after = leaders[inverse] - k_leader + k_after
        if other.pods == 1:
            capacity, capacity_after = leaders, leaders_after
        elif other.same_shape and near is None:
            capacity, capacity_after = leaders // other.pods, leaders_after // other.pods
        else:
            k_worker_after = fit(after, other.worker, other.worker_ok[nodes])
            workers = np.bincount(inverse, weights=k_worker, minlength=compact.size).astype(np.int64)
            capacity = np.minimum(leaders, workers // (other.pods - 1))
            capacity_after = np.minimum(leaders_after, (workers[inverse] - k_worker + k_worker_after) // (other.pods - 1))
        total = int(capacity.sum())
        if total < need:
            continue  # short already: nothing this pod does makes it fit
        short = total - (capacity[inverse] - capacity_after) < need
        out = short if out is None else out | short
    return out


def _required_near(unit: UnitState, r: int, space: Space, fresh: Mapping[int, list[list[int]]]) -> np.ndarray | None:
    """[positions]: where a leader of role `r` may go under its Required rules whose `to`
    side has pods (in one of their rule domains), or None when no such rule binds it."""
    out: np.ndarray | None = None
    view = unit.view
    for rule in unit.rules:
        if not rule.required or rule.source != r:
            continue
        targets = [n for rep in staying_replicas(unit, rule.target, fresh) for n in rep]
        if not targets:
            continue
        doms = view.dom[rule.depth]
        near = member(doms[space.nodes], doms[np.array(targets)], view.domain_count(rule.depth))
        out = near if out is None else out & near
    return out
