"""An independent check of a plan against every promise of DESIGN.md §1.

Written apart from the engine (it shares no helper with it) so that tests, the
simulator and the reference solvers can all ask the same question: does this plan break
capacity, eligibility, replica gang, unit gang, required pack or required affinity?
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping, Sequence

import numpy as np

from tandem.placement.demand import UnitDemand
from tandem.placement.plan import Plan
from tandem.topology import ClusterSnapshot, TopologyView


def verify_plan(
    plan: Plan,
    snapshot: ClusterSnapshot,
    views: Mapping[str, TopologyView],
    units: Sequence[UnitDemand],
    *,
    allow_partial_units: bool = False,
) -> list[str]:
    """Every broken promise, as a sentence; empty when the plan keeps them all.

    `allow_partial_units` skips the unit-gang rule, for baselines that are known to break it.
    """
    problems: list[str] = []
    by_key = {unit.key: unit for unit in units}
    used = snapshot.used.copy()
    seen_names: set[str] = set()
    if len(plan.units) != len(units) or {u.unit.key for u in plan.units} != set(by_key):
        problems.append("the plan does not answer exactly the units asked for")

    for placement in plan.units:
        unit = by_key.get(placement.unit.key)
        if unit is None:
            continue
        view = views[unit.topology]
        label = unit.label
        role_specs = {role.name: role for role in unit.roles}
        if [name for name, _ in placement.roles] != [role.name for role in unit.roles]:
            problems.append(f"{label}: roles in the plan differ from the demand")
            continue
        unit_nodes: list[int] = []
        counts: dict[str, int] = {}
        leaders_doms: dict[tuple[str, int], set[int]] = defaultdict(set)
        for role_name, replicas in placement.roles:
            role = role_specs[role_name]
            counts[role_name] = len(replicas)
            if len(replicas) > role.desired:
                problems.append(f"{label}: {role_name} has {len(replicas)} replicas, more than desired {role.desired}")
            if [r.index for r in replicas] != list(range(len(replicas))):
                problems.append(f"{label}: {role_name} replica indices are not 0..{len(replicas) - 1}")
            for replica in replicas:
                if len(replica.pods) != role.pods_per_replica:
                    problems.append(
                        f"{label}: {role_name} replica {replica.index} has {len(replica.pods)} pods, "
                        f"not {role.pods_per_replica} (replica gang)"
                    )
                replica_nodes = []
                for pod_index, pod in enumerate(replica.pods):
                    expected = unit.pod_name(role_name, replica.index, pod_index)
                    if pod.name != expected:
                        problems.append(f"{label}: pod {pod.name!r} should be named {expected!r}")
                    if pod.name in seen_names:
                        problems.append(f"{label}: pod {pod.name!r} assigned twice")
                    seen_names.add(pod.name)
                    node = snapshot.node_index.get(pod.node)
                    if node is None:
                        problems.append(f"{label}: pod {pod.name} on unknown node {pod.node!r}")
                        continue
                    shape = role.leader if pod_index == 0 else role.worker
                    if not view.usable[node]:
                        problems.append(f"{label}: pod {pod.name} on unusable node {pod.node}")
                    if not _selector_ok(snapshot, node, shape.node_selector):
                        problems.append(f"{label}: pod {pod.name} on {pod.node}, which its nodeSelector excludes")
                    if not _tolerated(snapshot, node, shape.tolerations):
                        problems.append(f"{label}: pod {pod.name} on {pod.node} without tolerating its taints")
                    missing = snapshot.missing_resources(shape.requests)
                    if missing:
                        problems.append(f"{label}: pod {pod.name} on {pod.node}, which has no {', '.join(missing)}")
                    used[node] += snapshot.vector(shape.requests)
                    replica_nodes.append(node)
                unit_nodes += replica_nodes
                if role.pack_required is not None and replica_nodes:
                    depth = view.depth(role.pack_required)
                    if len({int(view.dom[depth][n]) for n in replica_nodes}) > 1:
                        problems.append(
                            f"{label}: {role_name} replica {replica.index} spans several {role.pack_required} domains"
                        )
                for rule in unit.affinity:
                    for role_side in ("from", "to"):
                        if (rule.from_role if role_side == "from" else rule.to_role) == role_name:
                            depth = view.depth(rule.level)
                            leaders_doms[(f"{role_side}:{rule.from_role}>{rule.to_role}", replica.index)] |= {
                                int(view.dom[depth][n]) for n in replica_nodes
                            }

        functional = all(counts[role.name] >= role.minimum for role in unit.roles)
        complete = all(counts[role.name] >= role.desired for role in unit.roles)
        expected_state = "Placed" if functional and complete else "MinimumPlaced" if functional else "Unschedulable"
        if placement.state == "Unschedulable":
            if unit_nodes and not allow_partial_units:
                problems.append(f"{label}: Unschedulable but holds {len(unit_nodes)} pods (unit gang)")
            if not placement.message:
                problems.append(f"{label}: Unschedulable without a reason")
        elif placement.state != expected_state:
            problems.append(f"{label}: state {placement.state} but the counts say {expected_state}")
        if placement.state != "Unschedulable" and not functional:
            problems.append(f"{label}: {placement.state} below a role minimum (unit gang)")
        if unit.pack_required is not None and unit_nodes:
            depth = view.depth(unit.pack_required)
            if len({int(view.dom[depth][n]) for n in unit_nodes}) > 1:
                problems.append(f"{label}: pods span several {unit.pack_required} domains (required pack)")
        for rule in unit.affinity:
            if not rule.required:
                continue
            key_from = f"from:{rule.from_role}>{rule.to_role}"
            key_to = f"to:{rule.from_role}>{rule.to_role}"
            targets: set[int] = set()
            for (key, _), doms in leaders_doms.items():
                if key == key_to:
                    targets |= doms
            for (key, index), doms in leaders_doms.items():
                if key == key_from and not doms & targets:
                    problems.append(
                        f"{label}: {rule.from_role} replica {index} shares no {rule.level} with any {rule.to_role} replica "
                        "(Required affinity)"
                    )

    # Over capacity in a resource the plan added to (bound pods may already overcommit a node).
    broken = (used > snapshot.allocatable) & (used > snapshot.used)
    for node in np.nonzero(broken.any(axis=1))[0][:5]:
        columns = [snapshot.resources[c] for c in np.nonzero(broken[node])[0]]
        problems.append(f"node {snapshot.node_names[node]} over capacity in {', '.join(columns)}")
    return problems


def _selector_ok(snapshot: ClusterSnapshot, node: int, selector: Mapping[str, str]) -> bool:
    labels = snapshot.labels[node]
    return all(labels.get(key) == value for key, value in selector.items())


def _tolerated(snapshot: ClusterSnapshot, node: int, tolerations) -> bool:
    return all(any(t.tolerates(taint) for t in tolerations) for taint in snapshot.taints[node])
