"""The engine's answer: per unit, a state, a reason, and a node for every placed pod."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tandem.placement.demand import UnitDemand

State = Literal["Placed", "MinimumPlaced", "Unschedulable"]


@dataclass(frozen=True)
class PodAssignment:
    name: str
    node: str


@dataclass(frozen=True)
class ReplicaAssignment:
    index: int
    pods: tuple[PodAssignment, ...]
    existing: bool = False  # already running before this plan (kept as it was)


@dataclass(frozen=True)
class UnitPlacement:
    unit: UnitDemand
    state: State
    message: str
    roles: tuple[tuple[str, tuple[ReplicaAssignment, ...]], ...]
    domain: str | None = None  # the domain the unit was packed into, as "level/name"
    # For Unschedulable units, as in the scheduler framework: "Unschedulable" may fit once
    # capacity frees up; "UnschedulableAndUnresolvable" would not fit an empty cluster.
    code: str | None = None

    def replicas(self, role: str) -> tuple[ReplicaAssignment, ...]:
        for name, replicas in self.roles:
            if name == role:
                return replicas
        raise KeyError(role)

    def pods(self) -> list[tuple[str, PodAssignment]]:
        """(role, pod) for every placed pod."""
        return [(name, pod) for name, replicas in self.roles for replica in replicas for pod in replica.pods]


@dataclass(frozen=True)
class Plan:
    units: tuple[UnitPlacement, ...]

    def unit(self, namespace: str, group: str, unit: int) -> UnitPlacement:
        for placement in self.units:
            if placement.unit.key == (namespace, group, unit):
                return placement
        raise KeyError((namespace, group, unit))

    def functional_units(self) -> int:
        return sum(1 for u in self.units if u.state != "Unschedulable")


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """The JSON contract of `tandem plan -o json` (DESIGN.md §2); extra keys are additive."""
    return {
        "groups": [
            {
                "namespace": u.unit.namespace,
                "name": u.unit.group,
                "unit": u.unit.unit,
                "state": u.state,
                "message": u.message,
                "domain": u.domain,
                "code": u.code,
                "roles": [
                    {
                        "name": name,
                        "desiredReplicas": next(r.desired for r in u.unit.roles if r.name == name),
                        "minReplicas": next(r.minimum for r in u.unit.roles if r.name == name),
                        "replicas": [
                            {"index": rep.index, "pods": [{"name": p.name, "node": p.node} for p in rep.pods]}
                            | ({"existing": True} if rep.existing else {})
                            for rep in replicas
                        ],
                    }
                    for name, replicas in u.roles
                ],
            }
            for u in plan.units
        ]
    }
