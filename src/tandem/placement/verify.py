"""An independent check of a plan against every promise of DESIGN.md §1.

Written apart from the engine (it shares no helper with it) so that tests, the
simulator and the reference solvers can all ask the same question: does this plan break
capacity, eligibility, replica gang, unit gang, required pack or required affinity?
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Literal, Mapping, Sequence

import numpy as np

from tandem.api.kube import Toleration
from tandem.placement.demand import UnitDemand
from tandem.placement.plan import Plan
from tandem.topology import ClusterSnapshot, TopologyView


Kind = Literal[
    "coverage",  # the plan does not answer the units asked for
    "naming",  # pod names or replica indices off the contract
    "capacity",  # a node over capacity in a resource the plan added to
    "eligibility",  # unusable node, selector, taint or missing resource
    "replica-gang",  # a replica with the wrong number of pods
    "unit-gang",  # a functional state below a role minimum, or more replicas than desired
    "partial-unit",  # an Unschedulable unit holding pods
    "state",  # the state does not match the counts, or lacks a reason
    "replica-pack",  # a replica across several domains of its required pack
    "unit-pack",  # a unit across several domains of its required pack
    "affinity",  # a from-replica without its Required counterpart
    "exclusive",  # an exclusive unit's domain holding a pod of another exclusive unit
]


@dataclass(frozen=True)
class Violation:
    kind: Kind
    unit: tuple[str, str, int] | None  # (namespace, group, unit), None for node-level ones
    message: str

    def __str__(self) -> str:
        return self.message


def verify_plan(
    plan: Plan,
    snapshot: ClusterSnapshot,
    views: Mapping[str, TopologyView],
    units: Sequence[UnitDemand],
    *,
    allow_partial_units: bool = False,
) -> list[str]:
    """Every broken promise, as a sentence; empty when the plan keeps them all.

    `allow_partial_units` skips the unit-gang rule for Unschedulable units, for baselines
    that are known to break it.
    """
    return [
        v.message
        for v in check_plan(plan, snapshot, views, units)
        if not (allow_partial_units and v.kind == "partial-unit")
    ]


def check_plan(
    plan: Plan,
    snapshot: ClusterSnapshot,
    views: Mapping[str, TopologyView],
    units: Sequence[UnitDemand],
) -> list[Violation]:
    """Every broken promise, typed by kind and unit."""
    problems: list[Violation] = []

    def report(kind: Kind, key: tuple[str, str, int] | None, message: str) -> None:
        problems.append(Violation(kind, key, message))

    by_key = {unit.key: unit for unit in units}
    # (namespace, group, unit index as text) -> (level, nodes) of every exclusive unit,
    # running ones from the snapshot and planned ones from the plan.
    exclusive: dict[tuple[str, str, str], tuple[str, set[int]]] = {}
    for pod_node, level, owner in snapshot.exclusive_pods:
        exclusive.setdefault(owner, (level, set()))[1].add(pod_node)
    used = snapshot.used.copy()
    seen_names: set[str] = set()
    if len(plan.units) != len(units) or {u.unit.key for u in plan.units} != set(by_key):
        report("coverage", None, "the plan does not answer exactly the units asked for")

    for placement in plan.units:
        unit = by_key.get(placement.unit.key)
        if unit is None:
            continue
        view = views[unit.topology]
        label = unit.label
        key = unit.key
        role_specs = {role.name: role for role in unit.roles}
        if [name for name, _ in placement.roles] != [role.name for role in unit.roles]:
            report("coverage", key, f"{label}: roles in the plan differ from the demand")
            continue
        unit_nodes: list[int] = []
        counts: dict[str, int] = {}
        # (rule number, "from"|"to") -> replica index -> domains at the rule's level of its pods
        rule_domains: dict[tuple[int, str], dict[int, set[int]]] = defaultdict(dict)
        for role_name, replicas in placement.roles:
            role = role_specs[role_name]
            counts[role_name] = len(replicas)
            if len(replicas) > role.desired:
                report("unit-gang", key, f"{label}: {role_name} has {len(replicas)} replicas, more than desired {role.desired}")
            indices = [r.index for r in replicas]
            fresh = sorted(r.index for r in replicas if not r.existing)
            free = [i for i in range(len(replicas) + len(fresh)) if i not in {r.index for r in replicas if r.existing}]
            if len(set(indices)) != len(indices) or fresh != free[: len(fresh)]:
                report("naming", key, f"{label}: {role_name} replica indices are not unique or new ones skip free indices")
            for replica in replicas:
                if len(replica.pods) != role.pods_per_replica:
                    report(
                        "replica-gang",
                        key,
                        f"{label}: {role_name} replica {replica.index} has {len(replica.pods)} pods, "
                        f"not {role.pods_per_replica} (replica gang)",
                    )
                replica_nodes: list[int] = []
                for pod_index, pod in enumerate(replica.pods):
                    expected = unit.pod_name(role_name, replica.index, pod_index)
                    if pod.name != expected:
                        report("naming", key, f"{label}: pod {pod.name!r} should be named {expected!r}")
                    if pod.name in seen_names:
                        report("naming", key, f"{label}: pod {pod.name!r} assigned twice")
                    seen_names.add(pod.name)
                    node = snapshot.node_index.get(pod.node)
                    if node is None:
                        report("eligibility", key, f"{label}: pod {pod.name} on unknown node {pod.node!r}")
                        continue
                    shape = role.leader if pod_index == 0 else role.worker
                    if replica.existing:
                        # Already running: its capacity is in the snapshot, and where it runs
                        # was decided before; only the constraints it takes part in count.
                        replica_nodes.append(node)
                        continue
                    if not view.usable[node]:
                        report("eligibility", key, f"{label}: pod {pod.name} on unusable node {pod.node}")
                    if not _selector_ok(snapshot, node, shape.node_selector):
                        report("eligibility", key, f"{label}: pod {pod.name} on {pod.node}, which its nodeSelector excludes")
                    if not _tolerated(snapshot, node, shape.tolerations):
                        report("eligibility", key, f"{label}: pod {pod.name} on {pod.node} without tolerating its taints")
                    missing = snapshot.missing_resources(shape.requests)
                    if missing:
                        report("eligibility", key, f"{label}: pod {pod.name} on {pod.node}, which has no {', '.join(missing)}")
                    used[node] += snapshot.vector(shape.requests)
                    replica_nodes.append(node)
                unit_nodes += replica_nodes
                if role.pack_required is not None and replica_nodes:
                    depth = view.depth(role.pack_required)
                    if len({int(view.dom[depth][n]) for n in replica_nodes}) > 1:
                        report(
                            "replica-pack", key, f"{label}: {role_name} replica {replica.index} spans several {role.pack_required} domains"
                        )
                for number, rule in enumerate(unit.affinity):
                    for side, side_role in (("from", rule.from_role), ("to", rule.to_role)):
                        if side_role == role_name:
                            depth = view.depth(rule.level)
                            if side == "to" or not replica.existing:
                                # A running from-replica whose counterpart is gone cannot be
                                # moved by this plan; only the from-replicas it places must
                                # land near a to-replica (running ones count as targets).
                                rule_domains[(number, side)][replica.index] = {int(view.dom[depth][n]) for n in replica_nodes}

        functional = all(counts[role.name] >= role.minimum for role in unit.roles)
        complete = all(counts[role.name] >= role.desired for role in unit.roles)
        expected_state = "Placed" if functional and complete else "MinimumPlaced" if functional else "Unschedulable"
        if placement.state == "Unschedulable":
            new_pods = sum(len(r.pods) for _, replicas in placement.roles for r in replicas if not r.existing)
            if new_pods:
                report("partial-unit", key, f"{label}: Unschedulable but this plan gives it {new_pods} pods (unit gang)")
            if not placement.message:
                report("state", key, f"{label}: Unschedulable without a reason")
        elif placement.state != expected_state:
            report("state", key, f"{label}: state {placement.state} but the counts say {expected_state}")
        if placement.state != "Unschedulable" and not functional:
            report("unit-gang", key, f"{label}: {placement.state} below a role minimum (unit gang)")
        if unit.exclusive is not None and unit_nodes:
            owner = (unit.namespace, unit.group, str(unit.unit))
            exclusive.setdefault(owner, (unit.exclusive, set()))[1].update(unit_nodes)
        if unit.pack_required is not None and unit_nodes:
            depth = view.depth(unit.pack_required)
            if len({int(view.dom[depth][n]) for n in unit_nodes}) > 1:
                report("unit-pack", key, f"{label}: pods span several {unit.pack_required} domains (required pack)")
        for number, rule in enumerate(unit.affinity):
            if not rule.required:
                continue
            targets = set().union(*rule_domains[(number, "to")].values())
            for index, doms in sorted(rule_domains[(number, "from")].items()):
                if not doms & targets:
                    report(
                        "affinity",
                        key,
                        f"{label}: {rule.from_role} replica {index} shares no {rule.level} with any {rule.to_role} replica "
                        "(Required affinity)",
                    )

    problems += _exclusive_violations(exclusive, by_key, views)
    # Over capacity in a resource the plan added to (bound pods may already overcommit a node).
    broken = (used > snapshot.allocatable) & (used > snapshot.used)
    for node in np.nonzero(broken.any(axis=1))[0][:5]:
        columns = [snapshot.resources[c] for c in np.nonzero(broken[node])[0]]
        report("capacity", None, f"node {snapshot.node_names[node]} over capacity in {', '.join(columns)}")
    return problems


def _exclusive_violations(
    exclusive: Mapping[tuple[str, str, str], tuple[str, set[int]]],
    by_key: Mapping[tuple[str, str, int], UnitDemand],
    views: Mapping[str, TopologyView],
) -> list[Violation]:
    """A planned exclusive unit sharing a domain with another exclusive unit: one of them
    holds the domain (at its own level) and the other has a pod in it."""

    def overlap(view: TopologyView, level: str, holder: set[int], guest: set[int]) -> bool:
        if level not in view.level_names:
            return bool(holder & guest)
        doms = view.dom[view.depth(level)]
        held = {int(doms[n]) for n in holder}
        return any(int(doms[n]) in held for n in guest)

    out = []
    for key, unit in sorted(by_key.items()):
        owner = (unit.namespace, unit.group, str(unit.unit))
        if unit.exclusive is None or owner not in exclusive:
            continue
        view = views[unit.topology]
        mine = exclusive[owner][1]
        for other, (level, nodes) in sorted(exclusive.items()):
            if other != owner and (overlap(view, unit.exclusive, mine, nodes) or overlap(view, level, nodes, mine)):
                out.append(
                    Violation("exclusive", key, f"{unit.label}: a {unit.exclusive} it holds exclusively also holds pods of {'/'.join(other)}")
                )
    return out


def _selector_ok(snapshot: ClusterSnapshot, node: int, selector: Mapping[str, str]) -> bool:
    labels = snapshot.labels[node]
    return all(labels.get(key) == value for key, value in selector.items())


def _tolerated(snapshot: ClusterSnapshot, node: int, tolerations: Sequence[Toleration]) -> bool:
    return all(any(t.tolerates(taint) for t in tolerations) for taint in snapshot.taints.get(node, ()))
