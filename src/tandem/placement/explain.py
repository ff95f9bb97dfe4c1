"""Why a unit could not be placed, in words a platform engineer can act on.

A reason names the constraint, the level and the best domain's shortfall, e.g.
`no block has room for 3 prefill replicas (1 pod × 8 nvidia.com/gpu); best is block-2 with 2`.
The checks go from the most basic cause to the most subtle: a resource nobody offers,
no eligible node, one role that fits nowhere, roles that do not fit together, and last a
gang that fits by the numbers but not on the nodes (affinity or fragmentation).
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping

import numpy as np

from tandem.topology.snapshot import PODS, format_amount

from tandem.placement.context import PlanContext
from tandem.placement.gang import place_gang
from tandem.placement.unit_state import RoleState, UnitState


def describe_replica(unit: UnitState, role: RoleState) -> str:
    """`1 pod × 8 nvidia.com/gpu` or `2 pods × 8 nvidia.com/gpu within one rack`."""
    pods = role.pods
    text = f"{pods} pod{'s' if pods > 1 else ''} × {_main_request(unit, role.leader)}"
    if pods > 1 and role.required_depth is not None:
        text += f" within one {unit.view.level_names[role.required_depth]}"
    return text


def describe_domain(unit: UnitState) -> str:
    """The unit's domain at its required level, `block block-0` (or `the cluster`)."""
    if unit.domain is None or unit.domain[0] == 0:
        return "the cluster"
    depth, domain = unit.domain
    return f"{unit.view.level_names[depth]} {unit.view.domain_name(depth, domain)}"


def short_role_list(roles: Iterable[RoleState]) -> str:
    names = [role.demand.name for role in roles]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def unresolvable(context: PlanContext, unit: UnitState, needs: Mapping[int, int]) -> bool:
    """True when the gang would not fit even if every usable node were empty.

    Such a unit waits for the cluster or the group to change, not for capacity to free up
    (the scheduler framework's UnschedulableAndUnresolvable). The counts answer most
    cases; when they allow a fit, a real placement on the empty cluster decides, since
    a Required affinity or the pods' shapes on the nodes can rule out what counts allow.
    Domains held by other exclusive units count as empty too.
    """
    empty = unit.view.snapshot.allocatable
    allowed, saved = unit.allowed, unit.release(None)
    unit.allowed = unit.eligible
    try:
        return not _fits_by_counts(context, unit, empty, needs).any() or not place_gang(context, unit, empty.copy(), needs)
    finally:
        unit.allowed = allowed
        unit.release(None)
        unit.restore(saved)


def describe_gang_failure(context: PlanContext, unit: UnitState, free: np.ndarray, needs: Mapping[int, int]) -> str:
    view = unit.view
    roles = {r: unit.roles[r] for r in needs}
    if not view.snapshot.node_names:
        return "the cluster has no nodes"
    for role in roles.values():
        if role.missing:
            return f"no node offers {', '.join(role.missing)} (requested by {role.demand.name})"
    for role in roles.values():
        if not role.leader_ok.any() or (role.pods > 1 and not role.worker_ok.any()):
            return f"no usable node for {role.demand.name}: {_exclusion_summary(unit, role)}"

    depth = unit.required_depth
    level = view.level_names[depth]
    held = _held_by_exclusive_units(context, unit, free, needs)
    if held:
        return held
    counts = context.counts(unit, free)
    capacity = {r: counts.capacity(r, depth) for r in roles}
    for r, need in needs.items():
        best = int(np.argmax(capacity[r])) if capacity[r].size else 0
        have = int(capacity[r][best]) if capacity[r].size else 0
        if have < need:
            role = roles[r]
            what = f"{need} {role.demand.name} replica{'s' if need > 1 else ''} ({describe_replica(unit, role)})"
            if depth == 0:
                return f"the cluster has room for only {have} of {what}"
            return f"no {level} has room for {what}; best is {view.domain_name(depth, best)} with {have}"

    demand = sum((count * roles[r].replica_total for r, count in needs.items()), np.zeros(free.shape[1], np.int64))
    free_here = view.free_by_domain(free, depth)
    role_ok = np.array([capacity[r] >= need for r, need in needs.items()])
    total_ok = free_here >= demand
    joint = role_ok.all(axis=0) & total_ok.all(axis=1)
    gang = " + ".join(f"{need} {roles[r].demand.name}" for r, need in needs.items())
    if not joint.any():
        score = role_ok.sum(axis=0) + total_ok.all(axis=1)
        best = int(np.lexsort((-free_here[:, unit.dominant], -score))[0])
        short = [
            f"needs {format_amount(res, int(demand[c]))} {res}, has {format_amount(res, int(free_here[best, c]))} free"
            for c, res in enumerate(view.snapshot.resources)
            if demand[c] > free_here[best, c] and res != PODS
        ] or [
            f"room for {' and '.join(f'{int(capacity[r][best])}/{need} {roles[r].demand.name}' for r, need in needs.items())}"
        ]
        if depth == 0:
            return f"the cluster does not fit the minimum gang ({gang} replicas) together: {short[0]}"
        return f"no {level} fits the minimum gang ({gang} replicas) together; best is {view.domain_name(depth, best)}: {short[0]}"

    required = [rule for rule in unit.rules if rule.required]
    if required:
        rule = required[0]
        return (
            f"Required affinity {unit.roles[rule.source].demand.name}→{unit.roles[rule.target].demand.name} "
            f"at {view.level_names[rule.depth]} cannot be met: no {level if depth else 'placement'} that fits the "
            f"minimum gang ({gang}) keeps them within one {view.level_names[rule.depth]}"
        )
    count = int(joint.sum())
    return (
        f"{count} {level}{'s' if count > 1 else ''} have room for the minimum gang ({gang}) by total capacity, "
        f"but not on their nodes (fragmented)"
    )


def _fits_by_counts(context: PlanContext, unit: UnitState, free: np.ndarray, needs: Mapping[int, int]) -> np.ndarray:
    """[domains at the required level]: where the gang fits by the counts on `free`."""
    counts = context.counts(unit, free)
    depth = unit.required_depth
    fits: np.ndarray = np.all(counts.free_by_domain(depth) >= counts.vector(needs), axis=1)
    for r, need in needs.items():
        fits &= counts.capacity(r, depth) >= need
    return fits


def _held_by_exclusive_units(context: PlanContext, unit: UnitState, free: np.ndarray, needs: Mapping[int, int]) -> str | None:
    """The reason when the minimum would fit but for domains other exclusive units hold."""
    if unit.exclusive_depth is None or np.array_equal(unit.allowed, unit.eligible):
        return None
    allowed = unit.allowed
    unit.allowed = unit.eligible
    try:
        fits = _fits_by_counts(context, unit, free, needs)
    finally:
        unit.allowed = allowed
    if not fits.any():
        return None
    depth = unit.required_depth
    view = unit.view
    level = view.level_names[unit.exclusive_depth]
    held = np.unique(view.dom[unit.exclusive_depth][unit.eligible & ~allowed])
    return (
        f"exclusive {level}: every {view.level_names[depth] if depth else 'placement'} with room for the minimum gang "
        f"needs a {level} that another exclusive unit holds ({len(held)} {level}{'s' if len(held) != 1 else ''} held)"
    )


def _main_request(unit: UnitState, vec: np.ndarray) -> str:
    """The resource a pod asks most of relative to the cluster, e.g. `8 nvidia.com/gpu`."""
    snapshot = unit.view.snapshot
    resources = snapshot.resources
    totals = snapshot.totals
    best, best_share = None, -1.0
    for c, res in enumerate(resources):
        if res == PODS or vec[c] <= 0:
            continue
        share = vec[c] / max(int(totals[c]), 1)
        if share > best_share:
            best, best_share = c, share
    if best is None:
        return "no resources"
    return f"{format_amount(resources[best], int(vec[best]))} {resources[best]}"


def _exclusion_summary(unit: UnitState, role: RoleState) -> str:
    """Counts of why nodes are out for this role: labels, cordons, readiness, taints, selectors."""
    view = unit.view
    snapshot = view.snapshot
    reasons: Counter[str] = Counter(reason for _, reason in view.exclusions)
    shape = role.demand.leader
    for i in np.nonzero(view.usable)[0].tolist():
        labels = snapshot.labels[i]
        if any(labels.get(k) != v for k, v in shape.node_selector.items()):
            reasons["nodeSelector does not match"] += 1
            continue
        for taint in snapshot.taints.get(i, ()):
            if not any(t.tolerates(taint) for t in shape.tolerations):
                value = f"={taint.value}" if taint.value else ""
                reasons[f"untolerated taint {taint.key}{value}:{taint.effect}"] += 1
                break
    return ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
