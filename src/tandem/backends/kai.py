"""KAI Scheduler: one PodGroup (`scheduling.run.ai/v2alpha2`) per unit with hierarchical subGroups.

- The unit's pack is the PodGroup's `topologyConstraint` (`requiredTopologyLevel`,
  `preferredTopologyLevel`, naming the level's node label, and `topology`, the KAI
  Topology's name).
- subGroups go role -> replica: a subGroup per role, and under it (`parent`) a leaf per
  replica, `<role>.<replica>` (a dot, so no role name can clash with a leaf). KAI reads
  `minMember` on leaves: the first `minReplicas` leaves of a role need all their pods, so
  minimums count complete replicas; the replica pack is the leaf's `topologyConstraint`.
  Extra replicas are leaves without `minMember` (the pinned CRD makes it optional, at least 1
  when set; KAI then reads 0): placed when they fit, pod by pod, so extra multi-pod replicas
  are rejected. Newer KAI (kai-scheduler PRs #1127, #1340) requires `minMember` on every leaf
  and adds `minSubGroup`, which would let extras be optional and whole; tandem's output
  targets the pinned CRD (docs/backends.md).
- Pods carry the annotation `pod-group-name`, the label `kai.scheduler/subgroup-name`
  (their leaf), the queue label `kai.scheduler/queue` and `schedulerName: kai-scheduler`.
- The topology is a KAI `Topology` (`kai.scheduler/v1alpha1`) listing the level labels.
"""

from __future__ import annotations

from typing import Any, Collection, Mapping, Sequence

from tandem.api.kube import Node
from tandem.api.resources import ClusterTopology, InferenceGroup, Pack
from tandem.backends.base import (
    EXCLUSIVE_AS_ANTI_AFFINITY,
    PREFERRED_AFFINITY_AS_POD_AFFINITY,
    Approximate,
    Backend,
    Full,
    Manifest,
    Replicas,
    Support,
    Unsupported,
    add_exclusive_anti_affinity,
    add_preferred_affinity,
    controller_only,
    node_label,
    replica_indexes,
    unit_object_name,
    unit_selector,
)
from tandem.backends.pods import pod_identity
from tandem.backends.priority import priority_class_field
from tandem.backends.topology_levels import group_problems, level_label_problems, level_list_topology
from tandem.errors import Problem

API_VERSION = "scheduling.run.ai/v2alpha2"
TOPOLOGY_API_VERSION = "kai.scheduler/v1alpha1"
GROUP_ANNOTATION = "pod-group-name"
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
QUEUE_LABEL = "kai.scheduler/queue"


def leaf_name(role: str, replica: int) -> str:
    return f"{role}.{replica}"


class KaiBackend(Backend):
    name = "kai"
    scheduler_name = "kai-scheduler"

    def capabilities(self) -> Mapping[str, Support]:
        return {
            "replica-gang": Unsupported(
                "in the PodGroup API tandem targets (v2alpha2 as of NVIDIA/KAI-Scheduler 72de64fc) a leaf subGroup "
                "without minMember needs none of its pods (KAI reads it as 0), and every minMember that is set must be "
                "met before the PodGroup runs: an extra replica is either mandatory or placed pod by pod, never "
                "optional and whole; set minReplicas equal to replicas for this role, or use backend 'volcano' or "
                "'workload-api'"
            ),
            "complete-replica-minimum": Full("one leaf subGroup per minimum replica, minMember = podsPerReplica"),
            "unit-gang": Full("one PodGroup per unit, scheduled atomically with its subGroups"),
            "role-minimums": Full("only the first minReplicas leaves of a role carry minMember"),
            "minimums-before-extras": Approximate(
                "KAI orders PodGroups by queue fairness and priority, not minimums first: an extra replica of one "
                "unit may be placed before another unit's minimum"
            ),
            "unit-pack-required": Full("topologyConstraint.requiredTopologyLevel"),
            "unit-pack-preferred": Full("topologyConstraint.preferredTopologyLevel"),
            "role-pack-required": Full("leaf subGroup topologyConstraint.requiredTopologyLevel"),
            "role-pack-preferred": Full("leaf subGroup topologyConstraint.preferredTopologyLevel"),
            "affinity-required": Unsupported(
                "KAI constrains each subGroup on its own, not one relative to another; pack the unit at that level "
                "instead, or use backend 'native'"
            ),
            "affinity-preferred": PREFERRED_AFFINITY_AS_POD_AFFINITY,
            "priority": Full("priorityClassName on the PodGroup and the pods"),
            "exclusive": Full(
                f"{EXCLUSIVE_AS_ANTI_AFFINITY}: KAI's predicates plugin runs kube-scheduler's InterPodAffinity filter "
                "on every pod, in each candidate topology domain it tries"
            ),
            "gang-timeout": Approximate("the PodGroup has no timeout; KAI allocates a gang whole, so nothing is held while it waits"),
            **controller_only(),
        }

    def extra_problems(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[Problem]:
        return group_problems(topology, level_label_problems(topology, "KAI")) if topology is not None else []

    # ------------------------------------------------------------------ group objects

    def unit_objects(
        self, group: InferenceGroup, topology: ClusterTopology | None, unit: int, manifest: Manifest | None = None,
        replicas: Replicas | None = None, alone: Collection[tuple[str, int]] = (),
    ) -> list[dict[str, Any]]:
        return [self._pod_group(group, unit, topology, replicas)]

    def _pod_group(self, group: InferenceGroup, unit: int, topology: ClusterTopology | None, replicas: Replicas | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"queue": self.queue(group)}
        minimum = sum(role.minimum * role.pods_per_replica for role in group.spec.roles)
        if minimum > 0:
            spec["minMember"] = minimum  # the CRD wants >= 1; no minimum at all leaves it unset
        spec |= priority_class_field(group.spec.priority)
        constraint = _constraint(group.spec.topology.pack, topology, group.spec.topology_name)
        if constraint:
            spec["topologyConstraint"] = constraint
        subgroups: list[dict[str, Any]] = []
        for role in group.spec.roles:
            subgroups.append({"name": role.name})
            indexes = replica_indexes(role, replicas)
            for position, replica in enumerate(indexes):
                leaf: dict[str, Any] = {"name": leaf_name(role.name, replica), "parent": role.name}
                if position < role.minimum:  # the lowest indexes there are: after an update, not always 0..
                    leaf["minMember"] = role.pods_per_replica
                leaf_constraint = _constraint(role.topology.pack, topology, group.spec.topology_name) if role.pods_per_replica > 1 else None
                if leaf_constraint:
                    leaf["topologyConstraint"] = leaf_constraint
                subgroups.append(leaf)
        spec["subGroups"] = subgroups
        return {
            "apiVersion": API_VERSION,
            "kind": "PodGroup",
            "metadata": {
                "name": unit_object_name(group, unit),
                "namespace": group.metadata.namespace,
                "labels": dict(sorted({**unit_selector(group, unit), QUEUE_LABEL: self.queue(group)}.items())),
            },
            "spec": spec,
        }

    def _decorate(self, pod: dict[str, Any], group: InferenceGroup, topology: ClusterTopology | None) -> None:
        unit, role, replica, _ = pod_identity(pod)
        pod["metadata"].setdefault("annotations", {})[GROUP_ANNOTATION] = unit_object_name(group, unit)
        labels = pod["metadata"].setdefault("labels", {})
        labels[SUBGROUP_LABEL] = leaf_name(role, replica)
        labels[QUEUE_LABEL] = self.queue(group)
        add_preferred_affinity(pod, group, topology)
        add_exclusive_anti_affinity(pod, group, topology)

    # ------------------------------------------------------------------ topology

    def render_topology(self, topology: ClusterTopology, nodes: Sequence[Node]) -> list[dict[str, Any]]:
        return [level_list_topology(topology, TOPOLOGY_API_VERSION, "KAI")]


def _constraint(pack: Pack, topology: ClusterTopology | None, topology_name: str) -> dict[str, str]:
    out: dict[str, str] = {}
    if pack.preferred is not None and pack.preferred != pack.required:
        out["preferredTopologyLevel"] = node_label(topology, pack.preferred)
    if pack.required is not None:
        out["requiredTopologyLevel"] = node_label(topology, pack.required)
    if out:
        out["topology"] = topology_name
    return dict(sorted(out.items()))
