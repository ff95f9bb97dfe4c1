"""Placing a unit's minimum gang: choose the domain, then assign every replica inside it."""

from __future__ import annotations

from typing import Mapping, NamedTuple

import numpy as np

from tandem.placement.capacity import Counts
from tandem.placement.context import PlanContext
from tandem.placement.replica import ReplicaRequest, place_replica
from tandem.placement.reservations import Reservations
from tandem.placement.rows import all_at_least, all_equal, any_differ
from tandem.placement.space import Space
from tandem.placement.unit_state import UnitState, staying_replicas
from tandem.topology import TopologyView

# How many count-feasible domains of the required level get a real assignment before the
# gang gives up, and how many domains of each narrower level inside one of them.
MAX_DOMAIN_ATTEMPTS = 12
MAX_SUB_ATTEMPTS = 4
# Among equally ranked domains, how many real assignments are compared: the one opening
# the least capacity of wholly free nodes wins, so fragments are used before whole nodes.
GANG_TRIALS = 3


def place_gang(
    context: PlanContext,
    unit: UnitState,
    free: np.ndarray,
    needs: Mapping[int, int],
    reservations: Reservations | None = None,
    trials: int = GANG_TRIALS,
) -> bool:
    """Place `needs` (role index -> replicas) as one gang; commit to `free` on success.

    When a Required affinity cannot hold with the minimum number of `to` replicas (each
    `from` replica needs one nearby), the gang is retried with more `to` replicas, up to
    their desired count: the affinity is a hard rule and the minimum only a lower bound.
    """
    reservations = Reservations() if reservations is None else reservations
    if _place_gang_once(context, unit, free, needs, reservations, trials):
        return True
    for grown in _grown_needs(unit, needs):
        if _place_gang_once(context, unit, free, grown, reservations, trials):
            return True
    return False


def _grown_needs(unit: UnitState, needs: Mapping[int, int]) -> list[dict[int, int]]:
    """Gangs with 1, 2, ... more `to` replicas for the Required rules whose `from` side is needed."""
    targets = {rule.target for rule in unit.rules if rule.required and needs.get(rule.source, 0) > 0}
    # Room beside what already runs: a `to` replica beyond the desired count has no pod
    # waiting for it, so nothing the gang leans on it for would hold.
    room = {r: unit.roles[r].demand.desired - len(unit.roles[r].placed) - needs.get(r, 0) for r in targets}
    out = []
    for extra in range(1, max(room.values(), default=0) + 1):
        grown = dict(needs)
        for r in targets:
            grown[r] = needs.get(r, 0) + min(extra, room[r])
        out.append(grown)
    return out


class GangAttempt(NamedTuple):
    """One attempt at a gang of fixed `needs` for `unit`: what choosing its domain and
    assigning it there read, beside the domain or level at hand."""

    context: PlanContext
    unit: UnitState
    free: np.ndarray  # free capacity before the gang (written only once it is placed)
    needs: Mapping[int, int]  # role index -> replicas of the gang
    reservations: Reservations
    counts: Counts  # the unit's bottom-up counts on `free`
    wanted: Mapping[int, int]  # role index -> replicas of the whole unit, the gang's included
    demand: np.ndarray  # the gang's resources, over `counts.columns`
    full: np.ndarray  # the whole unit's
    inner: list[int]  # the levels below the required one, down to the preferred one, narrowest first


def _place_gang_once(
    context: PlanContext, unit: UnitState, free: np.ndarray, needs: Mapping[int, int], reservations: Reservations, trials_allowed: int
) -> bool:
    """One attempt with fixed `needs`: choose the unit's domain, then a place inside it.

    The domain is chosen at the required level for the WHOLE unit (every role at its
    desired count): candidates where the minimum fits are ranked by tier — the whole
    unit fits beside what earlier units hold and reserve (in the domain and around it);
    else the minimum does; else it must take reserved room, the least intrusion best —
    then, among whole fits, the fewest later units' whole fits spoiled (`lookahead.py`),
    and where only the minimum fits, the fewest desired replicas left without room
    (`_short`), then the tightest fit (large domains stay whole for the units that need
    them), then how well the preferred level can hold it (a preferred domain for the
    whole unit, then for the minimum). Inside the chosen domain the unit goes to the
    narrower domain that holds it whole, best fit level by level (`_whole_inside`), else
    the minimum to the best preferred-level domain that takes it, else the next broader
    level, else anywhere in the domain. Up to GANG_TRIALS domains of the best rank get a
    real assignment; the one that stays at the narrowest level, then opens the least
    capacity of wholly free nodes, wins (fragments are used before whole nodes). A trial
    that can lose to none still to come ends the search (`_deepest`).
    """
    view = unit.view
    counts = context.counts(unit, free)
    if counts.nodes.size == 0:
        return False
    wanted = {r: max(role.demand.heading_to, needs.get(r, 0)) for r, role in enumerate(unit.roles)}
    demand, full = counts.vector(needs), counts.vector(wanted)
    top = unit.required_depth
    inner = list(range(unit.preferred_depth, top, -1)) if unit.preferred_depth is not None else []
    gang = GangAttempt(context, unit, free, needs, reservations, counts, wanted, demand, full, inner)
    ranks = {depth: _rank(gang, depth) for depth in [top, *inner]}
    feasible, tier, leftover, room, short = ranks[top]
    candidates = np.flatnonzero(feasible)
    if candidates.size == 0:
        return False
    # How well the preferred level can hold the unit inside each candidate (3: not at all).
    preferred = np.full(view.domain_count(top), 3, dtype=np.int64)
    if inner:
        ok, sub_tier, *_ = ranks[inner[0]]
        subs = np.flatnonzero(ok)
        np.minimum.at(preferred, view.ancestor[inner[0]][top][subs], sub_tier[subs])
    # Last before the domain number: the least free capacity, i.e. among domains equally
    # tight beside reservations the one with the least reserved room (a domain's number
    # follows its name: for hosts, the node's name).
    spare = counts.free_by_domain(top)[candidates, counts.dominant]
    narrowest = view.depth_count - 1
    # Before tightness: the fewest later units' whole fits spoiled (`lookahead.py`).
    spoils = np.zeros(tier.size, np.int64)
    whole_fit = candidates[tier[candidates] == 0]
    if context.later is not None:
        spoils[whole_fit] = context.later.spoiled(unit, room[whole_fit], int(full[counts.dominant]))
    signed = np.where(tier[candidates] < 2, leftover[candidates], -leftover[candidates])
    # Then, for hosts, one no other unit of this plan uses (`Counts.taken_by_domain`).
    taken = counts.taken_by_domain(top)[candidates] if candidates.size > 1 and top == narrowest else np.zeros(candidates.size, np.int64)
    key = (candidates, *context.ties.domain_keys(view, top, candidates), taken, spare, preferred[candidates], signed, short[candidates], spoils[candidates], tier[candidates])
    ranked = candidates[np.lexsort(key)]
    # A domain whose counted nodes are all wholly free opens at least the gang's demand,
    # so it cannot beat a trial that opened no more than that.
    bound = int(demand[counts.dominant])
    deepest: list[int] = []  # how narrow the gang can be at all, once asked (`_deepest`)
    best: tuple[tuple[int, ...], int, int, Space, dict[int, list[list[int]]]] | None = None
    trials = 0
    for domain in ranked[:MAX_DOMAIN_ATTEMPTS]:
        rank = (int(tier[domain]), int(spoils[domain]), int(short[domain]), int(leftover[domain]), int(preferred[domain]))
        if best is not None and (trials >= trials_allowed or rank != best[0][:5]):
            break
        if (
            best is not None
            and best[0][6] <= bound
            and -best[0][5] == _deepest(counts, demand, top, deepest)
            and not _has_fragments(unit, counts, int(domain))
        ):
            continue
        whole = _whole_inside(gang, int(domain))
        found = _assign_in_domain(gang, int(domain), ranks, whole)
        if found is None:
            continue
        trials += 1
        depth, where, space, placed = found
        score = (*rank, -depth, _opened(unit, free, space))
        if best is None or score[5:] < best[0][5:]:
            best = (score, depth, where, space, placed)
        if score[6] == 0 and -score[5] == _deepest(counts, demand, top, deepest):
            break  # as narrow as the gang can be, opening no free node: no other trial can do better
    if best is None:
        return False
    _, depth, where, space, placed = best
    free[space.nodes] = space.free
    for r, replicas in placed.items():
        unit.roles[r].placed.extend(replicas)
    unit.domain = (top, view.node_domain(int(space.nodes[0]), top))
    unit.preferred_domain = (depth, where) if depth != top else None
    return True


def _deepest(counts: Counts, demand: np.ndarray, top: int, memo: list[int]) -> int:
    """The narrowest level with a domain whose free capacity holds the gang's `demand`
    (kept in `memo`): no assignment of the gang is narrower."""
    if not memo:
        narrowest = counts.unit.view.depth_count - 1
        memo.append(next((d for d in range(narrowest, top, -1) if all_at_least(counts.free_by_domain(d), demand).any()), top))
    return memo[0]


def _rank(gang: GangAttempt, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(feasible, tier, leftover, room, short) for every domain at `depth`.

    Feasible: the minimum fits by the counts (and, for a unit already running, the
    domain is inside its own). Tier 0: the whole unit fits beside what others reserved
    in the domain and in each domain around it (by resources, by each role's replicas
    and by pods: `Counts.pod_slots`); 1: the minimum does; 2: it must take reserved
    room. Leftover: room in the dominant resource after the unit (tiers 0-1) or the
    intrusion (tier 2). Room: the dominant resource free beside reservations. Short
    (tier 1 at the unit's required level, else 0): how many of the unit's desired
    replicas the domain has no room for (`_short`).
    """
    unit, counts, needs, wanted, demand, full, reservations = gang.unit, gang.counts, gang.needs, gang.wanted, gang.demand, gang.full, gang.reservations
    view = unit.view
    free_here = counts.free_by_domain(depth)
    feasible = all_at_least(free_here, demand)
    for r, count in needs.items():
        feasible &= counts.capacity(r, depth) >= count
    if unit.domain is not None:
        # Replicas already run: the unit stays in their domain.
        feasible &= view.ancestor[depth][unit.required_depth] == unit.domain[1]
    width = unit.roles[0].replica_total.size
    room = free_here - reservations.reserved(view, depth, width)[:, counts.columns]
    for broader in range(1, depth) if reservations else ():
        # Room another unit reserves in a broader domain (its block) is not this unit's
        # in any domain inside it.
        above = counts.free_by_domain(broader) - reservations.reserved(view, broader, width)[:, counts.columns]
        room = np.minimum(room, above[view.ancestor[depth][broader]])
    whole = all_at_least(room, full)
    for r, count in wanted.items():
        if count > 0:
            whole &= counts.capacity(r, depth) >= count
    whole &= counts.pod_slots(depth) >= sum(count * unit.roles[r].pods for r, count in wanted.items())
    tier = np.where(whole, 0, np.where(all_at_least(room, demand), 1, 2))
    dominant = counts.dominant
    leftover = room[:, dominant] - np.where(whole, full[dominant], demand[dominant])
    short = _short(gang, depth, room, tier == 1) if depth == unit.required_depth else np.zeros(tier.size, np.int64)
    return feasible, tier, leftover, room[:, dominant], short


def _short(gang: GangAttempt, depth: int, room: np.ndarray, partial: np.ndarray) -> np.ndarray:
    """[domains]: desired replicas a `partial` domain (the minimum fits, the whole unit
    does not) has no room for; 0 elsewhere. Beside the minimum, the domain holds a
    fraction of the extras: the least of spare room / the extras' demand over resources
    and of spare replicas / extras wanted over roles; every role gets that fraction of
    its extras, rounded down. Where no domain holds the whole unit, the one that holds
    the most of it comes before the tightest."""
    counts, needs, wanted, demand, full = gang.counts, gang.needs, gang.wanted, gang.demand, gang.full
    short = np.zeros(partial.size, np.int64)
    where = np.flatnonzero(partial)
    if where.size == 0:
        return short
    extras = {r: count - needs.get(r, 0) for r, count in wanted.items() if count > needs.get(r, 0)}
    wanting = full - demand
    asked = wanting > 0
    fraction = np.ones(where.size)
    if asked.any():
        fraction = np.min((room[where][:, asked] - demand[asked]) / wanting[asked], axis=1)
    for r, count in extras.items():
        fraction = np.minimum(fraction, (counts.capacity(r, depth)[where] - needs.get(r, 0)) / count)
    fraction = np.maximum(np.minimum(fraction, 1.0), 0.0)  # np.clip, without its overhead
    missing = np.zeros(where.size, np.int64)
    for count in extras.values():
        missing += count - np.floor(fraction * count + 1e-9).astype(np.int64)
    short[where] = missing
    return short


def _assign_in_domain(
    gang: GangAttempt,
    domain: int,
    ranks: Mapping[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
    whole: list[tuple[int, int]],
) -> tuple[int, int, Space, dict[int, list[list[int]]]] | None:
    """(depth, domain, space, replicas) of the narrowest place inside `domain` (of the
    unit's required level) that takes the gang: first the domains that hold the WHOLE
    unit beside reservations (`whole`, from `_whole_inside`: best fit level by level,
    the narrowest first); else the preferred level's domains that hold the minimum, then
    each broader level's; else the whole domain (`ranks`: `_rank` at each level)."""
    unit, counts, free = gang.unit, gang.counts, gang.free
    view = unit.view
    top = unit.required_depth
    for depth, sub in whole:
        space = _space(view, depth, sub, counts, free)
        placed = _assign_gang(gang, space, depth)
        if placed is not None:
            return depth, sub, space, placed
    for depth in gang.inner:
        feasible, tier, leftover, *_ = ranks[depth]
        subs = np.flatnonzero(feasible & (view.ancestor[depth][top] == domain))
        if unit.preferred_domain is not None and unit.preferred_domain[0] == depth:
            subs = subs[subs == unit.preferred_domain[1]]
        spare = counts.free_by_domain(depth)[subs, counts.dominant]
        hosts = depth == view.depth_count - 1
        taken = counts.taken_by_domain(depth)[subs] if subs.size > 1 and hosts else np.zeros(subs.size, np.int64)
        key = (subs, *gang.context.ties.domain_keys(view, depth, subs), taken, spare, np.where(tier[subs] < 2, leftover[subs], -leftover[subs]), tier[subs])
        for sub in subs[np.lexsort(key)][:MAX_SUB_ATTEMPTS]:
            space = _space(view, depth, int(sub), counts, free)
            placed = _assign_gang(gang, space, depth)
            if placed is not None:
                return depth, int(sub), space, placed
    space = _space(view, top, domain, counts, free)
    placed = _assign_gang(gang, space, top)
    return None if placed is None else (top, domain, space, placed)


def _whole_inside(gang: GangAttempt, domain: int) -> list[tuple[int, int]]:
    """(depth, domain) of the narrower domains inside `domain` (of the required level)
    that hold the whole unit beside what others hold and reserve, best fit level by
    level: the tightest such domain one level down, then inside it the tightest one
    level further down, and so on (a large domain stays whole for the unit that needs
    it, at every level). The candidates of the narrowest level reached come first
    (at most MAX_SUB_ATTEMPTS, tightest first), then the domains chosen above them,
    narrowest first. Counted over that domain's nodes only; between equally tight
    domains, the one with less free capacity on all its nodes (fragments no pod of this
    unit fits count too: they may be another unit's room)."""
    unit, counts, free, wanted, full, reservations = gang.unit, gang.counts, gang.free, gang.wanted, gang.full, gang.reservations
    view = unit.view
    top = unit.required_depth
    if unit.domain is not None or top == view.depth_count - 1:
        return []  # a unit with running replicas stays around them instead
    local = counts.inside(top, domain)
    members = view.members(top, domain)
    width = unit.roles[0].replica_total.size
    dominant = counts.dominant
    found: list[tuple[int, int]] = []
    chosen: list[tuple[int, int]] = []  # the tightest holding domain at each level so far
    for depth in range(top + 1, view.depth_count):
        domains, free_here, capacity = local.local(depth)
        room = free_here - reservations.reserved(view, depth, width)[domains][:, counts.columns]
        whole = all_at_least(room, full)
        for r, count in wanted.items():
            if count > 0:
                whole &= capacity[r] >= count
        if chosen:
            whole &= view.ancestor[depth][depth - 1][domains] == chosen[-1][1]
        if not whole.any():
            break
        subs = np.flatnonzero(whole)
        spare = taken = np.zeros(subs.size, np.int64)
        if subs.size > 1:
            if depth == view.depth_count - 1:
                taken = local.taken_local(depth, domains)[subs]
            present, inverse = np.unique(view.dom[depth][members], return_inverse=True)
            everything = np.bincount(inverse, weights=free[members, unit.dominant], minlength=present.size)
            spare = everything[np.searchsorted(present, domains[subs])]
        order = np.lexsort((domains[subs], *gang.context.ties.domain_keys(view, depth, domains[subs]), taken, spare, room[subs, dominant]))
        found = [(depth, int(domains[sub])) for sub in subs[order][:MAX_SUB_ATTEMPTS]]
        chosen.append(found[0])
    return found + chosen[-2::-1]


def _space(view: TopologyView, depth: int, domain: int, counts: Counts, free: np.ndarray) -> Space:
    """The counted nodes of one domain, with a private copy of their free capacity."""
    nodes = counts.nodes[view.dom[depth][counts.nodes] == domain]
    return Space.of(nodes, free)


def _has_fragments(unit: UnitState, counts: Counts, domain: int) -> bool:
    """Whether a counted node of `domain` (at the required level) is partly in use."""
    inside = unit.view.dom[unit.required_depth][counts.nodes] == domain
    allocatable = unit.view.snapshot.allocatable[counts.nodes[inside]][:, counts.columns]
    return bool((counts.free[inside] != allocatable).any())


def _opened(unit: UnitState, free: np.ndarray, space: Space) -> int:
    """Capacity (in the unit's dominant resource) of the wholly free nodes a trial
    assignment starts using: whole nodes are precious, whatever their size."""
    touched = np.flatnonzero(any_differ(space.free, free[space.nodes]))
    nodes = space.nodes[touched]
    allocatable = unit.view.snapshot.allocatable[nodes]
    empty = all_equal(free[nodes], allocatable)
    return int(allocatable[empty, unit.dominant].sum())


def _gang_sequence(unit: UnitState, needs: Mapping[int, int], order: str = "roles") -> list[int]:
    """The role of each replica of the gang, in placement order.

    "roles": `to` roles first, then roles without affinity, then `from` roles, role by
    role, bigger replicas first. "sources": the `from` roles first, then the others.
    "pairs": the same roles as "roles", but replica by replica across them in
    proportion to their counts (to, from, to, from, ...), so each `to` replica's `from`
    partners are placed before the next `to` replica takes their room.
    """
    sources = {rule.source for rule in unit.rules}
    targets = {rule.target for rule in unit.rules}

    def rank(r: int) -> tuple[int, int, int]:
        tier = 0 if r in targets and r not in sources else 2 if r in sources else 1
        if order in ("sources", "source-pairs"):
            tier = 0 if r in sources else 1
        return (tier, -int(unit.roles[r].replica_total[unit.dominant]), r)

    roles = sorted(needs, key=rank)
    if order not in ("pairs", "source-pairs"):
        return [r for r in roles for _ in range(needs[r])]
    slots = [((k + 0.5) / needs[r], position, r) for position, r in enumerate(roles) for k in range(needs[r])]
    return [r for *_, r in sorted(slots)]


def _assign_gang(gang: GangAttempt, space: Space, depth: int) -> dict[int, list[list[int]]] | None:
    """Place the gang inside `space` (updating its free copy), or None if it does not fit.

    Best fit first. If that fails and the unit has affinity rules, once more with the `to`
    side spread (each pod where the most room is left), which keeps room for `from` pods
    next to it; then with the `from` side first, wherever it fits best, and the `to`
    side around it; then replica by replica across roles, `to` and `from` in turn (the
    `to` side placed all first can take the only room the `from` side had, whichever
    way ties between nodes are broken).
    """
    attempts = ((False, "roles"), (True, "roles"), (False, "sources"), (False, "pairs"), (False, "source-pairs")) if gang.unit.rules else ((False, "roles"),)
    for spread, order in attempts:
        trial = space.copy()
        placed = _try_gang(gang, trial, depth, spread, order)
        if placed is not None:
            space.free[:] = trial.free
            return placed
    return None


def _try_gang(gang: GangAttempt, space: Space, depth: int, spread: bool, order: str = "roles") -> dict[int, list[list[int]]] | None:
    """Every replica of the gang, in `_gang_sequence` order; None at the first that does not fit.

    Besides the gang, the unit's later extras count as what is still to come when pods
    are ranked by where the rest of the unit can go (`locality.pending_demand`): a gang
    of one CPU-only router goes where the unit's GPU pods can follow it.
    """
    unit, needs = gang.unit, gang.needs
    placed: dict[int, list[list[int]]] = {r: [] for r in needs}
    waiting = dict(needs)
    later = {o: max(role.demand.heading_to - len(role.placed) - needs.get(o, 0), 0) for o, role in enumerate(unit.roles)}
    targets = {rule.target for rule in unit.rules}
    for r in _gang_sequence(unit, needs, order):
        role = unit.roles[r]
        rest = sum(int(unit.roles[o].replica_total[unit.dominant]) * n for o, n in waiting.items())
        remaining = {o: n + waiting.get(o, 0) for o, n in later.items()}
        request = ReplicaRequest(gang.context, unit, role, space, depth, placed, waiting, None, spread and r in targets, rest, remaining, gang.reservations)
        replica = place_replica(request)
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
        targets = {int(view.dom[rule.depth][n]) for rep in staying_replicas(unit, rule.target, fresh) for n in rep}
        for replica in fresh.get(rule.source, []):
            if not any(int(view.dom[rule.depth][n]) in targets for n in replica):
                return False
    return True
