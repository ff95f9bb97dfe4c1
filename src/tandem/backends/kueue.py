"""Kueue: each unit is a plain-pod group admitted whole, placed by Kueue's Topology Aware Scheduling.

- Pods of a unit share the label `kueue.x-k8s.io/pod-group-name: <group>-<unit>` and the
  annotation `kueue.x-k8s.io/pod-group-total-count` (every pod of the unit); Kueue admits
  the group all at once, so the unit and each replica are gangs, and there is no minimum
  below "everything": per-role minimums cannot be expressed and are rejected.
- `kueue.x-k8s.io/pod-group-serving: "true"` marks the group as serving (long-running).
- PodSets follow roles: `kueue.x-k8s.io/role-hash` is the role (leader and workers apart,
  `<role>-workers`, when a role has a workerTemplate), so two roles with identical pod
  specs stay two PodSets.
- The unit's pack is `kueue.x-k8s.io/podset-required-topology` (or `-preferred-`) on every
  pod, naming the level's node label; a unit of several PodSets adds
  `kueue.x-k8s.io/podset-group-name` so they share one domain (Kueue releases with
  generalized PodSet groups; older ones accept groups of exactly two PodSets).
- A multi-pod replica's required pack is a PodSet slice:
  `kueue.x-k8s.io/podset-slice-required-topology` with `kueue.x-k8s.io/podset-slice-size`
  = podsPerReplica.
- The topology is a Kueue `Topology` (`kueue.x-k8s.io/v1beta2`); the administrator
  references it from a ResourceFlavor (`spec.topologyName`) used by the LocalQueue's
  ClusterQueue.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from tandem.api.kube import Node
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.backends.base import Approximate, Backend, Full, Support, Unsupported, controller_only, node_label, unit_object_name
from tandem.backends.features import Feature
from tandem.backends.pods import pod_identity
from tandem.backends.topology_levels import group_problems, level_label_problems, level_list_topology
from tandem.errors import Problem

PREFIX = "kueue.x-k8s.io/"
QUEUE_LABEL = PREFIX + "queue-name"
GROUP_LABEL = PREFIX + "pod-group-name"
TOTAL_ANNOTATION = PREFIX + "pod-group-total-count"
SERVING_ANNOTATION = PREFIX + "pod-group-serving"
ROLE_HASH_ANNOTATION = PREFIX + "role-hash"
REQUIRED_ANNOTATION = PREFIX + "podset-required-topology"
PREFERRED_ANNOTATION = PREFIX + "podset-preferred-topology"
PODSET_GROUP_ANNOTATION = PREFIX + "podset-group-name"
SLICE_TOPOLOGY_ANNOTATION = PREFIX + "podset-slice-required-topology"
SLICE_SIZE_ANNOTATION = PREFIX + "podset-slice-size"
TOPOLOGY_API_VERSION = "kueue.x-k8s.io/v1beta2"


class KueueBackend(Backend):
    name = "kueue"
    scheduler_name = None  # Kueue gates and admits; kube-scheduler binds within Kueue's node choice

    def capabilities(self) -> Mapping[str, Support]:
        whole = "Kueue admits a pod group whole (kueue.x-k8s.io/pod-group-total-count)"
        return {
            "replica-gang": Full(f"{whole}, every replica with it"),
            "complete-replica-minimum": Full(f"{whole}: no partial minimum exists"),
            "unit-gang": Full(f"one pod group per unit; {whole}"),
            "role-minimums": Unsupported(
                f"{whole}: it cannot start a unit with fewer than all desired replicas; set minReplicas equal to "
                "replicas, or use backend 'volcano', 'kai' or 'workload-api'"
            ),
            "minimums-before-extras": Unsupported(f"{whole}: a unit's extras cannot wait behind other units' minimums"),
            "unit-pack-required": Full("podset-required-topology on every PodSet, tied by podset-group-name"),
            "unit-pack-preferred": Full("podset-preferred-topology, when the unit has no required pack and one PodSet"),
            "role-pack-required": Full("PodSet slices: podset-slice-required-topology, podset-slice-size = podsPerReplica"),
            "role-pack-preferred": Approximate("dropped: Kueue slices take only a required level"),
            "affinity-required": Unsupported(
                "Kueue's topology-aware scheduling places PodSets by capacity and ignores pod affinities; pack the "
                "unit at that level instead, or use backend 'native'"
            ),
            "affinity-preferred": Unsupported(
                "Kueue's topology-aware scheduling ignores pod affinities, so the preference could not even be scored; "
                "remove it, pack the unit at that level, or use backend 'native'"
            ),
            "priority": Full("pods' priorityClassName sets the Workload's priority"),
            "gang-timeout": Approximate(
                "Kueue's waitForPodsReady timeout is set cluster-wide in Kueue's Configuration, not per group"
            ),
            **controller_only("pods"),
        }

    def support_for(self, feature: Feature, group: InferenceGroup, topology: ClusterTopology | None) -> Support:
        if feature.id == "unit-pack-preferred":
            if group.spec.topology.pack.required is not None:
                return Approximate(
                    "a PodSet takes one of required or preferred: the required level is kept, and Kueue's best fit "
                    "already tries the narrowest domain that holds the unit"
                )
            if len(podsets(group)) > 1:
                return Approximate("each PodSet (role) is tried in one domain on its own; preferred PodSets cannot be grouped")
        return super().support_for(feature, group, topology)

    def extra_problems(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[Problem]:
        problems = [
            Problem(
                f"spec.roles[{i}].workerTemplate",
                f"backend 'kueue' cannot pack a replica whose leader and workers differ: they are two PodSets and a "
                f"PodSet slice spans one; drop the workerTemplate or the replica pack of role {role.name!r}",
            )
            for i, role in enumerate(group.spec.roles)
            if role.worker_template is not None and role.topology.pack.required is not None and role.pods_per_replica > 1
        ]
        if topology is not None:
            problems += group_problems(topology, level_label_problems(topology, "Kueue"))
        return problems

    # ------------------------------------------------------------------ group objects

    def group_objects(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[dict[str, Any]]:
        return []  # Kueue builds the Workload from the pods' labels and annotations

    def _decorate(self, pod: dict[str, Any], group: InferenceGroup, topology: ClusterTopology | None) -> None:
        unit, role_name, _, index = pod_identity(pod)
        role = group.role(role_name)
        labels = pod["metadata"].setdefault("labels", {})
        labels[QUEUE_LABEL] = self.options.queue
        labels[GROUP_LABEL] = unit_object_name(group, unit)
        annotations = pod["metadata"].setdefault("annotations", {})
        annotations[TOTAL_ANNOTATION] = str(sum(r.replicas * r.pods_per_replica for r in group.spec.roles))
        annotations[SERVING_ANNOTATION] = "true"
        annotations[ROLE_HASH_ANNOTATION] = podset_name(role_name, index, role.worker_template is not None)
        pack = group.spec.topology.pack
        if pack.required is not None:
            annotations[REQUIRED_ANNOTATION] = node_label(topology, pack.required)
            if len(podsets(group)) > 1:
                annotations[PODSET_GROUP_ANNOTATION] = unit_object_name(group, unit)
        elif pack.preferred is not None:
            annotations[PREFERRED_ANNOTATION] = node_label(topology, pack.preferred)
        if role.pods_per_replica > 1 and role.topology.pack.required is not None:
            annotations[SLICE_TOPOLOGY_ANNOTATION] = node_label(topology, role.topology.pack.required)
            annotations[SLICE_SIZE_ANNOTATION] = str(role.pods_per_replica)

    # ------------------------------------------------------------------ topology

    def render_topology(self, topology: ClusterTopology, nodes: Sequence[Node]) -> list[dict[str, Any]]:
        return [level_list_topology(topology, TOPOLOGY_API_VERSION, "Kueue")]


def podset_name(role: str, pod_index: int, has_worker_template: bool) -> str:
    return f"{role}-workers" if has_worker_template and pod_index > 0 else role


def podsets(group: InferenceGroup) -> list[str]:
    """The PodSets a unit of `group` becomes (roles with pods; leaders and workers apart)."""
    names = []
    for role in group.spec.roles:
        if role.replicas == 0:
            continue
        names.append(role.name)
        if role.worker_template is not None and role.pods_per_replica > 1:
            names.append(podset_name(role.name, 1, True))
    return names
