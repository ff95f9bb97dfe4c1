"""Volcano: one PodGroup (`scheduling.volcano.sh/v1beta1`) per unit, HyperNodes for the topology.

- Unit gang: `minMember` is the sum of every role's minimum in pods; `minTaskMember`
  gives each single-pod role its minimum (the task is the pod annotation
  `volcano.sh/task-spec`, set to the role).
- Multi-pod roles get a `subGroupPolicy` entry instead: pods of the role grouped by the
  replica label (`matchLabelKeys`), `subGroupSize` pods per replica and `minSubGroups`
  complete replicas, so minimums count whole replicas and each replica is its own gang;
  the replica's required pack is that entry's `networkTopology`.
- Unit pack: `networkTopology {mode: hard, highestTierAllowed}`; a preferred-only pack is
  `mode: soft`, which carries no tier.
- Topology: a HyperNode per domain of every level. For N levels (broadest first) level i
  is tier N - i, so the narrowest level is tier 1 and the whole tree hangs from a
  synthetic root HyperNode (tier N + 1) named after the ClusterTopology. Leaf HyperNodes
  select their nodes by every level label of their path; a hostname level therefore
  yields one HyperNode per node, which is what keeps a host pack exact (GREP-377).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from tandem.api.kube import Node
from tandem.api.naming import REPLICA_LABEL
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.backends.base import (
    EXCLUSIVE_AS_ANTI_AFFINITY,
    PREFERRED_AFFINITY_AS_POD_AFFINITY,
    Approximate,
    Backend,
    Full,
    Support,
    Unsupported,
    add_exclusive_anti_affinity,
    add_preferred_affinity,
    controller_only,
    topology_defining,
    unit_object_name,
    unit_selector,
)
from tandem.backends.domains import node_paths, object_name
from tandem.backends.pods import pod_identity
from tandem.backends.priority import priority_class_field
from tandem.errors import InputError, Problem

API_VERSION = "scheduling.volcano.sh/v1beta1"
HYPERNODE_API_VERSION = "topology.volcano.sh/v1alpha1"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_ANNOTATION = "volcano.sh/task-spec"


def tier(topology: ClusterTopology | None, level: str) -> int:
    """Volcano counts tiers from the nodes up: the narrowest level is tier 1."""
    known = topology_defining(topology, level)
    return len(known.spec.levels) - known.depth(level)


class VolcanoBackend(Backend):
    name = "volcano"
    scheduler_name = "volcano"

    def capabilities(self) -> Mapping[str, Support]:
        return {
            "replica-gang": Full("subGroupPolicy: subGroupSize pods per replica, grouped by the replica label"),
            "complete-replica-minimum": Full("subGroupPolicy minSubGroups counts whole replicas"),
            "unit-gang": Full("one PodGroup per unit; minMember is every role's minimum"),
            "role-minimums": Full("minTaskMember per single-pod role, minSubGroups per multi-pod role"),
            "minimums-before-extras": Approximate(
                "Volcano orders PodGroups by priority and queue, not minimums first: an extra replica of one unit "
                "may be placed before another unit's minimum"
            ),
            "unit-pack-required": Full("networkTopology mode hard, highestTierAllowed"),
            "unit-pack-preferred": Approximate(
                "mode soft names no tier: Volcano packs as tightly as it can (within the required tier, if any), "
                "not at this level first"
            ),
            "role-pack-required": Full("subGroupPolicy networkTopology mode hard per replica"),
            "role-pack-preferred": Approximate("dropped: a subGroupPolicy entry takes only a hard tier"),
            "affinity-required": Unsupported(
                "Volcano has no cross-role proximity constraint; pack the unit at that level instead, or use backend 'native'"
            ),
            "affinity-preferred": PREFERRED_AFFINITY_AS_POD_AFFINITY,
            "priority": Full("priorityClassName on the PodGroup and the pods"),
            "exclusive": Full(
                f"{EXCLUSIVE_AS_ANTI_AFFINITY}: Volcano's predicates plugin runs kube-scheduler's InterPodAffinity "
                "filter (predicate.PodAffinityEnable, on by default) and counts pods allocated in the same session"
            ),
            "gang-timeout": Approximate(
                "the PodGroup has no timeout; Volcano allocates a gang whole, so nothing is held while it waits"
            ),
            **controller_only(),
        }

    # ------------------------------------------------------------------ group objects

    def group_objects(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[dict[str, Any]]:
        return [self._pod_group(group, unit, topology) for unit in range(group.spec.replicas)]

    def _pod_group(self, group: InferenceGroup, unit: int, topology: ClusterTopology | None) -> dict[str, Any]:
        roles = group.spec.roles
        spec: dict[str, Any] = {"minMember": sum(r.minimum * r.pods_per_replica for r in roles)}
        tasks = {r.name: r.minimum for r in roles if r.pods_per_replica == 1 and r.minimum > 0}
        if tasks:
            spec["minTaskMember"] = dict(sorted(tasks.items()))
        network = self._network_topology(group.spec.topology.pack.required, group.spec.topology.pack.preferred, topology)
        if network:
            spec["networkTopology"] = network
        spec |= priority_class_field(group.spec.priority)
        spec["queue"] = self.options.queue
        policies = []
        for role in roles:
            if role.pods_per_replica == 1:
                continue
            policy: dict[str, Any] = {
                "name": role.name,
                "labelSelector": {"matchLabels": unit_selector(group, unit, role.name)},
                "matchLabelKeys": [REPLICA_LABEL],
                "subGroupSize": role.pods_per_replica,
                "minSubGroups": role.minimum,
            }
            if role.topology.pack.required is not None:
                policy["networkTopology"] = {"mode": "hard", "highestTierAllowed": tier(topology, role.topology.pack.required)}
            policies.append(policy)
        if policies:
            spec["subGroupPolicy"] = policies
        return {
            "apiVersion": API_VERSION,
            "kind": "PodGroup",
            "metadata": {"name": unit_object_name(group, unit), "namespace": group.metadata.namespace, "labels": unit_selector(group, unit)},
            "spec": spec,
        }

    @staticmethod
    def _network_topology(required: str | None, preferred: str | None, topology: ClusterTopology | None) -> dict[str, Any] | None:
        if required is not None:
            return {"mode": "hard", "highestTierAllowed": tier(topology, required)}
        if preferred is not None:
            return {"mode": "soft"}
        return None

    def _decorate(self, pod: dict[str, Any], group: InferenceGroup, topology: ClusterTopology | None) -> None:
        unit, role, _, _ = pod_identity(pod)
        annotations = pod["metadata"].setdefault("annotations", {})
        annotations[GROUP_ANNOTATION] = unit_object_name(group, unit)
        annotations[TASK_ANNOTATION] = role
        add_preferred_affinity(pod, group, topology)
        add_exclusive_anti_affinity(pod, group, topology)

    # ------------------------------------------------------------------ topology

    def render_topology(self, topology: ClusterTopology, nodes: Sequence[Node]) -> list[dict[str, Any]]:
        levels = topology.spec.levels
        paths = node_paths(topology, nodes)
        if not paths:
            raise InputError(
                Problem(
                    "spec.levels",
                    f"no node carries every level label of ClusterTopology {topology.metadata.name!r} "
                    f"({', '.join(lv.node_label for lv in levels)}): Volcano HyperNodes are built from the nodes",
                )
            )
        count = len(levels)
        root = topology.metadata.name
        domains = {depth: sorted({path[:depth] for path in paths}) for depth in range(1, count + 1)}
        children: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
        for depth in range(1, count + 1):
            for prefix in domains[depth]:
                children.setdefault(prefix[:-1], []).append(prefix)
        objects = [_hypernode(root, count + 1, "cluster", [hypernode_name(topology, p) for p in children[()]], None)]
        for depth in range(1, count + 1):
            level = levels[depth - 1]
            for prefix in domains[depth]:
                if depth < count:
                    members = [hypernode_name(topology, child) for child in children[prefix]]
                    objects.append(_hypernode(hypernode_name(topology, prefix), count - depth + 1, level.name, members, None))
                else:
                    selector = dict(sorted(zip((lv.node_label for lv in levels), prefix)))
                    objects.append(_hypernode(hypernode_name(topology, prefix), 1, level.name, [], selector))
        return objects


def hypernode_name(topology: ClusterTopology, path: tuple[str, ...]) -> str:
    """`<topology>-<level>-<value>-...` along the path, so equal values under different parents differ."""
    parts = [topology.metadata.name]
    for level, value in zip(topology.spec.levels, path):
        parts += [level.name, value]
    return object_name(*parts)


def _hypernode(name: str, tier_number: int, tier_name: str, children: list[str], selector: dict[str, str] | None) -> dict[str, Any]:
    if selector is not None:
        members = [{"type": "Node", "selector": {"labelMatch": {"matchLabels": selector}}}]
    else:
        members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": child}}} for child in children]
    return {
        "apiVersion": HYPERNODE_API_VERSION,
        "kind": "HyperNode",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "tandem"}},
        "spec": {"tier": tier_number, "tierName": tier_name, "members": members},
    }
