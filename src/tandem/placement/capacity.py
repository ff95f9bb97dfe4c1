"""Counting what fits: pods per node, complete replicas per domain (upper bounds)."""

from __future__ import annotations

import numpy as np

from tandem.placement.state import RoleState, UnitState


def fit(free: np.ndarray, vec: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """How many pods of shape `vec` each node (row of `free`) can still take."""
    cols = vec > 0
    counts = np.min(free[:, cols] // vec[cols], axis=1)
    return np.where(ok, counts, 0)


def replica_capacity(role: RoleState, k_leader: np.ndarray, k_worker: np.ndarray, groups: np.ndarray, size: int) -> np.ndarray:
    """Upper bound on the complete replicas of `role` each group of nodes can hold."""
    leaders = np.bincount(groups, weights=k_leader, minlength=size).astype(np.int64)
    if role.pods == 1:
        return leaders
    if role.same_shape:
        return leaders // role.pods
    workers = np.bincount(groups, weights=k_worker, minlength=size).astype(np.int64)
    return np.minimum(leaders, workers // (role.pods - 1))


def replica_depth(role: RoleState, unit_depth: int) -> int:
    """The depth a replica must stay within when its unit is packed at `unit_depth`."""
    return unit_depth if role.required_depth is None else max(unit_depth, role.required_depth)


def domain_capacity(unit: UnitState, role: RoleState, free: np.ndarray, depth: int) -> np.ndarray:
    """[domains at depth]: upper bound on complete replicas of `role` in each domain."""
    view = unit.view
    nodes = view._order[depth]
    rows = free[nodes]
    k_leader = fit(rows, role.leader, role.leader_ok[nodes])
    k_worker = k_leader if role.same_shape else fit(rows, role.worker, role.worker_ok[nodes])
    inner = replica_depth(role, depth)
    sub = view.dom[inner][nodes]
    per_sub = replica_capacity(role, k_leader, k_worker, sub, view.domain_count(inner))
    out = np.zeros(view.domain_count(depth), dtype=np.int64)
    np.add.at(out, view.ancestor[inner][depth], per_sub)
    return out
