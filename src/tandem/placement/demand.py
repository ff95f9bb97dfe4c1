"""What is to be placed: units of InferenceGroups reduced to shapes, counts and constraints.

The engine never sees pydantic models; it sees these small frozen records, which makes it
easy to drive from the CLI, the controller, the simulator and tests alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Mapping, Sequence

from tandem.api.kube import PodTemplateSpec, Toleration
from tandem.api.naming import pod_name
from tandem.api.resources import InferenceGroup

Requests = tuple[tuple[str, int], ...]  # (resource, milli-units), sorted
Admission = tuple[tuple[tuple[str, str], ...], tuple[str, ...]]  # (selector items, tolerations as JSON)
PodShapeKey = tuple[Requests, Admission]
# name, desired, minimum, eventual, pods per replica, packs, leader's and worker's shapes
RoleShapeKey = tuple[str, int, int, int, int, str | None, str | None, PodShapeKey, PodShapeKey]


@dataclass(frozen=True)
class PodShape:
    """What one pod asks of a node."""

    requests: Mapping[str, int]  # milli-units
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()

    @classmethod
    def from_template(cls, template: PodTemplateSpec) -> "PodShape":
        spec = template.spec
        return cls(dict(spec.requests()), dict(spec.node_selector), tuple(spec.tolerations))

    def key(self) -> Admission:
        """Hashable identity, for caching eligibility per distinct shape."""
        return self._identity[1]

    def shape(self) -> PodShapeKey:
        """Hashable identity of everything placement reads: requests, selector, tolerations."""
        return self._identity

    @cached_property
    def _identity(self) -> PodShapeKey:
        """(requests, (selector, tolerations)), made once per shape: the units of a
        group share their shapes, and a plan of a thousand units asks thousands of times."""
        key = (tuple(sorted(self.node_selector.items())), tuple(t.model_dump_json() for t in self.tolerations))
        return (tuple(sorted(self.requests.items())), key)


@dataclass(frozen=True)
class RoleDemand:
    name: str
    desired: int  # replicas wanted in the unit
    minimum: int  # complete replicas for the unit to be functional
    pods_per_replica: int
    leader: PodShape  # pod 0 of each replica
    worker: PodShape  # pods 1..N-1
    pack_required: str | None = None
    pack_preferred: str | None = None
    # The count the unit is heading to when fewer are admitted now (a stepped rollout
    # admits the minimum first): the domain is chosen, and room reserved, for this many.
    eventual: int = 0

    @property
    def heading_to(self) -> int:
        """The count the role is heading to: its desired count, or the eventual one
        when fewer are admitted now."""
        return max(self.desired, self.eventual)


@dataclass(frozen=True)
class AffinityRule:
    from_role: str
    to_role: str
    level: str
    required: bool


@dataclass(frozen=True)
class PlacedReplica:
    """A replica that already runs (its pods are bound): kept where it is, counted, built on."""

    role: str
    index: int
    nodes: tuple[str, ...]  # the node of each pod, the leader first
    # Of a revision a rolling update replaces: it holds its nodes until it goes, but no new
    # replica counts on it for a Required affinity (it would lose its counterpart).
    leaving: bool = False


@dataclass(frozen=True)
class UnitDemand:
    """One copy of a group: all roles, placed as a gang within one domain."""

    namespace: str
    group: str
    unit: int
    priority: int
    topology: str
    roles: tuple[RoleDemand, ...]
    pack_required: str | None = None
    pack_preferred: str | None = None
    affinity: tuple[AffinityRule, ...] = ()
    # Replicas already running; their pods must be in the snapshot as bound pods.
    existing: tuple[PlacedReplica, ...] = ()
    # A level whose domains this unit holds to itself among exclusive units.
    exclusive: str | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.namespace, self.group, self.unit)

    def shape(self) -> "UnitShapeKey":
        """Hashable identity of what placement reads, without the unit's name and order:
        two units of one shape on the same free capacity get the same answer."""
        roles: tuple[RoleShapeKey, ...] = tuple(
            (r.name, r.desired, r.minimum, r.eventual, r.pods_per_replica, r.pack_required, r.pack_preferred, r.leader.shape(), r.worker.shape())
            for r in self.roles
        )
        return (self.topology, self.pack_required, self.pack_preferred, self.affinity, roles, self.existing, self.exclusive)

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.group}[{self.unit}]"

    def pod_name(self, role: str, replica: int, pod: int) -> str:
        return pod_name(self.group, self.unit, role, replica, pod)


# topology, packs, affinity, roles, running replicas, exclusive level
UnitShapeKey = tuple[str, str | None, str | None, tuple[AffinityRule, ...], tuple[RoleShapeKey, ...], tuple[PlacedReplica, ...], str | None]


def units_from_group(group: InferenceGroup, count: int | None = None) -> list[UnitDemand]:
    """The group's units in order (the first `count` of them, when given)."""
    spec = group.spec
    roles = tuple(
        RoleDemand(
            name=role.name,
            desired=role.replicas,
            minimum=role.minimum,
            pods_per_replica=role.pods_per_replica,
            leader=PodShape.from_template(role.template),
            worker=PodShape.from_template(role.pod_template(1)),
            pack_required=role.topology.pack.required,
            pack_preferred=role.topology.pack.preferred,
        )
        for role in spec.roles
    )
    affinity = tuple(AffinityRule(a.from_, a.to, a.level, a.mode == "Required") for a in spec.affinity)
    return [
        UnitDemand(
            namespace=group.metadata.namespace,
            group=group.metadata.name,
            unit=unit,
            priority=spec.priority,
            topology=spec.topology_name,
            roles=roles,
            pack_required=spec.topology.pack.required,
            pack_preferred=spec.topology.pack.preferred,
            affinity=affinity,
            exclusive=spec.topology.exclusive,
        )
        for unit in range(spec.replicas if count is None else min(count, spec.replicas))
    ]


def units_from_groups(groups: Sequence[InferenceGroup]) -> list[UnitDemand]:
    """Every unit of every group, in placement order: priority, then age, then unit index.

    Age is `metadata.creationTimestamp` (RFC 3339 sorts as text). Groups read from files
    usually have none; they come first, in input order, since input order is then the
    only age there is.
    """
    ordered = sorted(
        enumerate(groups),
        key=lambda item: (-item[1].spec.priority, item[1].metadata.creation_timestamp or "", item[0]),
    )
    return [unit for _, group in ordered for unit in units_from_group(group)]
