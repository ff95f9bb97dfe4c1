"""The Kueue pod groups a unit becomes: a base for the minimums, and one per extra replica.

Kueue admits a Workload whole (no `minCount`), and a Workload's PodSets cannot change once
it exists (the CRD: "podSets cannot be changed"), so one Workload per unit could neither
start a unit at its minimums nor grow with tandem's scaling steps. The closest Kueue can
express is:

- a **base** pod group `<group>-<unit>` counting each role's minimum replicas
  (`minimum x podsPerReplica` pods), admitted whole: the unit gang, and
- per replica beyond its role's minimum (replica index >= minimum) an **extra** pod group
  `<group>-<unit>-<role>-<replica>` of that one replica, admitted whole: the replica gang.

A pod joins by its replica index: below its role's minimum the base, else its replica's
extra. Ranks restart in each pod group. A unit whose roles have no minimum has no base.
"""

from __future__ import annotations

from dataclasses import dataclass

from tandem.api.resources import InferenceGroup
from tandem.backends.base import unit_object_name
from tandem.backends.kueue_podsets import PodSetShape, base_podsets, by_name, index_offsets, leader_and_workers, podset_of, role_podsets


@dataclass(frozen=True)
class PodGang:
    """One Kueue pod group (a prebuilt Workload of the same name) and the replicas it holds."""

    name: str
    shapes: tuple[PodSetShape, ...]  # sorted by name: the Workload's PodSets
    first_replica: int  # 0 for the base; the replica's index for an extra
    extra_of: str | None = None  # the role of an extra replica; None for the base

    @property
    def total(self) -> int:
        """Every pod of the group: `kueue.x-k8s.io/pod-group-total-count`."""
        return sum(shape.count for shape in self.shapes)

    @property
    def leader_and_workers(self) -> bool:
        """Two PodSets one of which is a single pod: the only PodSet group Kueue places together."""
        return leader_and_workers(list(self.shapes))

    def podset(self, role: str, pod_index: int) -> PodSetShape:
        return podset_of(list(self.shapes), role, pod_index)

    def rank(self, role: str, replica: int, pod_index: int, grouped: bool) -> int:
        """The pod's index Kueue reads (`tandem.dev/podset-index`): its rank in its PodSet, after
        the other PodSet's pods when the two are a PodSet group (`index_offsets`)."""
        shape = self.podset(role, pod_index)
        offset = index_offsets(list(self.shapes), grouped)[shape.name]
        return shape.rank(replica - self.first_replica, pod_index) + offset


def base_gang(group: InferenceGroup, unit: int) -> PodGang | None:
    """The unit's minimums as one pod group, or None when no role has a minimum."""
    shapes = base_podsets(group)
    return PodGang(unit_object_name(group, unit), tuple(shapes), 0) if shapes else None


def extra_gang(group: InferenceGroup, unit: int, role: str, replica: int) -> PodGang:
    """Replica `replica` of `role`, beyond the role's minimum, as a pod group of its own."""
    shapes = by_name(role_podsets(group.role(role), 1))
    return PodGang(unit_object_name(group, unit, role, replica), tuple(shapes), replica, role)


def gang_of(group: InferenceGroup, unit: int, role: str, replica: int, alone: bool = False) -> PodGang:
    """The pod group a pod of `role`'s replica `replica` joins: the base below the role's
    minimum, unless the replica was made `alone` (while its unit ran: the base, counting
    every minimum replica, would wait for pods that are not coming)."""
    if replica < group.role(role).minimum and not alone:
        base = base_gang(group, unit)
        assert base is not None  # the role's minimum is in it
        return base
    return extra_gang(group, unit, role, replica)


def unit_gangs(group: InferenceGroup, unit: int) -> list[PodGang]:
    """Every pod group of the unit: the base (when any role has a minimum), then the extras
    role by role (spec order), replica by replica."""
    base = base_gang(group, unit)
    extras = [
        extra_gang(group, unit, role.name, replica) for role in group.spec.roles for replica in range(role.minimum, role.replicas)
    ]
    return ([base] if base is not None else []) + extras


def has_extras(group: InferenceGroup) -> bool:
    """Some replica of the group is beyond its role's minimum (an extra pod group)."""
    return any(role.replicas > role.minimum for role in group.spec.roles)
