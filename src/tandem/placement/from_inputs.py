"""Plan for loaded inputs: build the snapshot and topology views, derive units, place."""

from __future__ import annotations

from dataclasses import dataclass

from tandem.api.loading import Inputs
from tandem.errors import InputError, Problem
from tandem.placement.bounds import beyond_capacity
from tandem.placement.demand import units_from_groups
from tandem.placement.engine import place
from tandem.placement.plan import Plan
from tandem.topology import ClusterSnapshot, TopologyView


@dataclass(frozen=True)
class PlanOutcome:
    plan: Plan
    views: dict[str, TopologyView]
    warnings: list[str]


def plan_inputs(inputs: Inputs) -> PlanOutcome:
    """Place every unit of every group in `inputs` on the nodes and pods in `inputs`."""
    if not inputs.groups:
        raise InputError(Problem("", "no InferenceGroup in the input files: nothing to plan"))
    missing = []
    for g in inputs.groups:
        if g.spec.topology_name not in inputs.topologies:
            where, prefix = inputs.source_of(g)
            path = f"{prefix}.spec.topologyName" if prefix else "spec.topologyName"
            missing.append(Problem(path, f"ClusterTopology {g.spec.topology_name!r} is not in the input files", where))
    if missing:
        raise InputError(missing)
    snapshot, warnings = ClusterSnapshot.build(inputs.nodes, inputs.pods)
    huge = []
    for g in inputs.groups:
        where, prefix = inputs.source_of(g)
        huge += [Problem(p.path, p.message, where) for p in beyond_capacity(g, snapshot, f"{prefix}." if prefix else "")]
    if huge:
        raise InputError(huge)
    used = {g.spec.topology_name for g in inputs.groups}
    views = {name: TopologyView.build(inputs.topologies[name], snapshot) for name in sorted(used)}
    plan = place(snapshot, views, units_from_groups(inputs.groups))
    return PlanOutcome(plan, views, list(inputs.warnings) + warnings)
