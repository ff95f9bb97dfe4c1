"""Placing one complete replica: its replica domain, then a node for each of its pods."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from tandem.placement.capacity import fit, replica_capacity, replica_depth
from tandem.placement.locality import locality_keys, unit_nodes
from tandem.placement.state import RoleState, Space, UnitState, all_replicas

# How many replica domains are tried for one replica before it is declared unplaceable.
MAX_REPLICA_ATTEMPTS = 8


def _affinity_masks(
    unit: UnitState,
    role: RoleState,
    space: Space,
    fresh: Mapping[int, list[list[int]]],
    waiting: Mapping[int, int],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(required mask, preference score) over the space, for this replica's leader.

    As a `from` role: a position scores 1 per rule whose `to` side already sits in its
    affinity domain (and Required rules allow only such positions).
    As a `to` role: 1 per `from` replica sitting there with no `to` replica near it yet
    (one already served gains nothing from another), plus, while `from` replicas are
    still to come, how many of their leaders the domain could still take beside one pod
    of this replica — so decode goes where prefill fits too.
    """
    view = unit.view
    required: np.ndarray | None = None
    score: np.ndarray | None = None
    dominant = unit.dominant
    for rule in unit.rules:
        doms = view.dom[rule.depth][space.nodes]
        if rule.source == role.index:
            targets = [n for rep in all_replicas(unit, rule.target, fresh) for n in rep]
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
            served = {int(view.dom[rule.depth][n]) for rep in all_replicas(unit, rule.target, fresh) for n in rep}
            sources = [
                n
                for rep in all_replicas(unit, rule.source, fresh)
                if not served.intersection(int(view.dom[rule.depth][m]) for m in rep)
                for n in rep
            ]
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


def place_replica(
    unit: UnitState,
    role: RoleState,
    space: Space,
    depth: int,
    fresh: Mapping[int, list[list[int]]],
    waiting: Mapping[int, int],
    unit_preferred: np.ndarray | None,
    spread: bool = False,
    rest: int = 0,
) -> list[int] | None:
    """Place one complete replica of `role` in `space` (committing to its free copy).

    Candidate replica domains (at the replica's pack depth) are ranked: affinity score,
    inside the unit's preferred domain, locality at each level between the space and the
    replica domain (`locality.py`; `rest` is what the unit still has to place, in its
    dominant resource), tightest fit, then domain number. Returns the node of each pod,
    or None when no candidate takes the whole replica.
    """
    view = unit.view
    nodes = space.nodes
    k_leader = fit(space.free, role.leader, role.leader_ok[nodes])
    k_worker = k_leader if role.same_shape or role.pods == 1 else fit(space.free, role.worker, role.worker_ok[nodes])
    required, preferred = _affinity_masks(unit, role, space, fresh, waiting)
    compact, groups = np.unique(view.dom[replica_depth(role, depth)][nodes], return_inverse=True)
    size = compact.size
    capacity = replica_capacity(role, k_leader, k_worker, groups, size)
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
    inner = replica_depth(role, depth)
    used = unit_nodes(unit, fresh)
    rest = max(rest, int(role.replica_total[unit.dominant]))
    # A `to` replica whose `from` replicas are still to come goes where they fit beside it
    # (the affinity score), not where the unit already is: locality stops above the
    # rule's level, or the `to` side would crowd out the `from` side it is there for.
    stop = min([rule.depth for rule in unit.rules if rule.target == role.index and waiting.get(rule.source, 0) > 0], default=unit.view.depth_count)
    near: list[np.ndarray] = []
    if spread:
        leftover = -leftover
    elif min(inner, stop - 1) > depth:
        first = np.zeros(size, dtype=np.int64)
        first[groups[::-1]] = np.arange(groups.size - 1, -1, -1)
        near = [key[first] for key in locality_keys(unit, space, range(depth + 1, min(inner, stop - 1) + 1), used, rest)]
    keys = (compact[candidates], leftover[candidates], *(key[candidates] for key in reversed(near)), outside[candidates], -affinity[candidates])
    order = np.lexsort(keys)
    for group in candidates[order][:MAX_REPLICA_ATTEMPTS]:
        positions = np.nonzero(groups == group)[0]
        chosen = _assign_pods(unit, role, space, positions, required, preferred, unit_preferred, spread, (inner, used, rest, stop))
        if chosen is not None:
            return [int(nodes[p]) for p in chosen]
    return None


def _assign_pods(
    unit: UnitState,
    role: RoleState,
    space: Space,
    positions: np.ndarray,
    required: np.ndarray | None,
    preferred: np.ndarray | None,
    unit_preferred: np.ndarray | None,
    spread: bool = False,
    locality: tuple[int, np.ndarray, int, int] | None = None,
) -> list[int] | None:
    """Best-fit the pods of one replica onto `positions`; commit to the space on success.

    With a preferred replica pack narrower than the required one, first try to keep the
    whole replica inside one domain of the preferred level: best affinity score first, then
    tightest. A `to` replica being spread skips this: spreading it is the point.
    """
    attempts: list[np.ndarray] = []
    depth = role.preferred_depth
    spreading = spread and any(rule.target == role.index for rule in unit.rules)
    if depth is not None and role.pods > 1 and not spreading:
        view = unit.view
        compact, groups = np.unique(view.dom[depth][space.nodes[positions]], return_inverse=True)
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
            fitting = np.nonzero(capacity >= 1)[0]
            order = np.lexsort((compact[fitting], leftover[fitting], -affinity[fitting]))
            for group in fitting[order][:MAX_REPLICA_ATTEMPTS]:
                attempts.append(positions[groups == group])
    attempts.append(positions)
    for subset in attempts:
        chosen = _greedy_pods(unit, role, space, subset, required, preferred, unit_preferred, spread, locality)
        if chosen is not None:
            return chosen
    return None


def _greedy_pods(
    unit: UnitState,
    role: RoleState,
    space: Space,
    subset: np.ndarray,
    required: np.ndarray | None,
    preferred: np.ndarray | None,
    unit_preferred: np.ndarray | None,
    spread: bool = False,
    locality: tuple[int, np.ndarray, int, int] | None = None,
) -> list[int] | None:
    """Pods one by one, each to the node it fits best (least left over; most with `spread`);
    the leader near counterparts. With `locality` (replica depth, the unit's nodes, what it
    still has to place, the depth locality stops at) pods go to as few narrower domains
    as fit them first."""
    saved = space.free[subset].copy()
    chosen: list[int] = []
    # Spreading a `to` replica: its later pods go to affinity domains it does not cover yet.
    spread_depths = [rule.depth for rule in unit.rules if rule.target == role.index] if spread else []
    for pod in range(role.pods):
        vec, ok = (role.leader, role.leader_ok) if pod == 0 else (role.worker, role.worker_ok)
        fits = fit(space.free[subset], vec, ok[space.nodes[subset]]) >= 1
        leftover = space.free[subset, unit.dominant] - vec[unit.dominant]
        # Least significant first (np.lexsort): node number, fit, locality, the unit's
        # preferred domain, then affinity for the leader.
        keys: list[np.ndarray] = [subset, -leftover if spread else leftover]
        if locality is not None and not spread:
            inner, used, rest, stop = locality
            here = np.concatenate((used, space.nodes[np.array(chosen, dtype=np.int64)]))
            depths = range(inner + 1, stop)
            keys += reversed(locality_keys(unit, space, depths, here, rest - pod * int(vec[unit.dominant]), subset))
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
