"""The PodSets of a Kueue Workload (a unit's base, or one extra replica), and each pod's rank inside its PodSet.

A PodSet is a set of identical pods: a role, or, for a role whose workers have their own
template, its leaders and its workers apart. Kueue needs two things tandem computes here:

- Names. A PodSet name is a DNS label of at most 63 characters (the Workload CRD); it is
  also the value of each pod's `kueue.x-k8s.io/role-hash`, which is how Kueue matches a pod
  to its PodSet. The list is sorted by name, the order in which Kueue's pod-group controller
  builds and compares PodSets (`constructGroupPodSets` sorts them; `equivalentToWorkload`
  matches a prebuilt Workload's PodSets in that order).
- Ranks. Kueue's topology ungater hands out a PodSet's domains to pods in rank order
  (`readRanksIfAvailable`), so pods with consecutive ranks land in the same slice. Ranking a
  replica's pods consecutively (`replica x podsPerReplica + pod index`) keeps each replica in
  one slice; without ranks, pods would be spread greedily and a replica could be split. In a
  PodSet group Kueue numbers both PodSets as one sequence, as LeaderWorkerSet does (leader 0,
  workers 1..N): the larger PodSet's indexes start after the smaller one's (the ungater
  subtracts that offset, `rankOffsets` in topology_ungater.go, PR #6150), so its pods carry
  rank + offset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tandem.api.resources import InferenceGroup, Role

MAX_PODSET_NAME = 63
Part = Literal["replica", "leader", "workers"]


@dataclass(frozen=True)
class PodSetShape:
    name: str
    role: str
    part: Part  # which pods of each replica: all of them, the leader only, or the workers only
    pods_per_replica: int  # pods of one replica in this PodSet
    replicas: int

    @property
    def count(self) -> int:
        return self.replicas * self.pods_per_replica

    def holds(self, pod_index: int) -> bool:
        return self.part == "replica" or (pod_index == 0) == (self.part == "leader")

    def rank(self, replica: int, pod_index: int) -> int:
        """The pod's index within the PodSet: a replica's pods are consecutive."""
        within = pod_index - 1 if self.part == "workers" else (0 if self.part == "leader" else pod_index)
        return replica * self.pods_per_replica + within


def splits(role: Role) -> bool:
    """Leaders and workers are separate PodSets when the workers have their own template."""
    return role.worker_template is not None and role.pods_per_replica > 1


def role_podsets(role: Role, replicas: int) -> list[PodSetShape]:
    """The PodSets `replicas` replicas of `role` make (none for no replicas)."""
    if replicas == 0:
        return []
    if not splits(role):
        return [PodSetShape(podset_name(role.name), role.name, "replica", role.pods_per_replica, replicas)]
    return [
        PodSetShape(podset_name(role.name), role.name, "leader", 1, replicas),
        PodSetShape(podset_name(role.name, "workers"), role.name, "workers", role.pods_per_replica - 1, replicas),
    ]


def by_name(shapes: list[PodSetShape]) -> list[PodSetShape]:
    """PodSets sorted by name (Kueue's own order)."""
    return sorted(shapes, key=lambda shape: shape.name)


def base_podsets(group: InferenceGroup) -> list[PodSetShape]:
    """The PodSets of a unit's base Workload: each role's minimum, sorted by name."""
    return by_name([shape for role in group.spec.roles for shape in role_podsets(role, role.minimum)])


def podset_of(shapes: list[PodSetShape], role: str, pod_index: int) -> PodSetShape:
    """The PodSet among `shapes` that holds pod `pod_index` of a replica of `role`."""
    return next(shape for shape in shapes if shape.role == role and shape.holds(pod_index))


def leader_and_workers(shapes: list[PodSetShape]) -> bool:
    """The only PodSet group Kueue's released TAS places together: two PodSets, one of them
    a single pod (jobframework.ValidatePodSetGroupingTopology; findLeaderAndWorkers)."""
    return len(shapes) == 2 and any(shape.count == 1 for shape in shapes)


def index_offsets(shapes: list[PodSetShape], grouped: bool) -> dict[str, int]:
    """What Kueue's topology ungater subtracts from each PodSet's pod indexes: for a group of
    two it takes them in Workload order (by name), calls the one with more pods the larger
    (the second on a tie) and offsets it by the smaller one's count; otherwise nothing."""
    offsets = {shape.name: 0 for shape in shapes}
    if grouped and len(shapes) == 2:
        smaller, larger = shapes if shapes[0].count <= shapes[1].count else shapes[::-1]
        offsets[larger.name] = smaller.count
    return offsets


def podset_name(role: str, suffix: str = "") -> str:
    """`<role>` or `<role>-<suffix>`. Always a DNS label of at most 63 characters: a role name
    fits in a pod name `<group>-<unit>-<role>-<replica>-<pod>` of at most 63, so it has at most
    55 characters, and `-workers` adds 8."""
    return f"{role}-{suffix}" if suffix else role
