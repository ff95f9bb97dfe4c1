"""Koordinator: a PodGroup (`scheduling.sigs.k8s.io/v1alpha1`) per role of a unit, joined into a GangGroup.

Follows Grove's Koordinator backend (GREP-537):
- each role of a unit is a PodGroup `<group>-<unit>-<role>` with `minMember` = the role's
  minimum in pods; the annotation `gang.scheduling.koordinator.sh/groups` lists every
  PodGroup of the unit, so the unit is one GangGroup: all minimums or nothing.
- pods join with the label `pod-group.scheduling.sigs.k8s.io` and `schedulerName: koord-scheduler`.
- the unit's pack is `gang.scheduling.koordinator.sh/network-topology-spec`
  (`gatherStrategy`: MustGather for required, PreferGather for preferred), the same on every
  PodGroup of the GangGroup: Koordinator cannot apply distinct topology constraints to
  disjoint subsets of one GangGroup, so a replica pack narrower than the unit's is rejected.
- the topology is the ClusterNetworkTopology named `default` (the one koord-scheduler
  reads): one layer per level, `<Level>Layer`, and the node leaf `NodeTopologyLayer`.
"""

from __future__ import annotations

import json
from typing import Any, Collection, Mapping, Sequence

from tandem.api.kube import Node
from tandem.api.naming import HOSTNAME_LABEL, topology_object_labels
from tandem.api.resources import ClusterTopology, InferenceGroup
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
    topology_defining,
    unit_object_name,
    unit_selector,
)
from tandem.backends.pods import pod_identity
from tandem.backends.topology_levels import LevelProblem, group_problems, refuse_levels
from tandem.errors import Problem, key_path

API_VERSION = "scheduling.sigs.k8s.io/v1alpha1"
TOPOLOGY_API_VERSION = "scheduling.koordinator.sh/v1alpha1"
POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
GANG_PREFIX = "gang.scheduling.koordinator.sh/"
GROUPS_ANNOTATION = GANG_PREFIX + "groups"
MODE_ANNOTATION = GANG_PREFIX + "mode"
TOTAL_ANNOTATION = GANG_PREFIX + "total-number"
NETWORK_ANNOTATION = GANG_PREFIX + "network-topology-spec"
NODE_LAYER = "NodeTopologyLayer"
CLUSTER_LAYER = "ClusterTopologyLayer"
# koord-scheduler reads the ClusterNetworkTopology of this name.
TOPOLOGY_NAME = "default"
# The pod label of Koordinator's QoS class (koordinator-sh/koordinator apis/extension: LabelPodQoS).
QOS_LABEL = "koordinator.sh/qosClass"
# Grove GREP-537 (ai-dynamo/grove PR #562, docs/proposals/537-koordinator-scheduler-backend,
# "Scope and Limitations"): MNNVL depends on NVIDIA DRA ComputeDomains and ResourceClaims,
# which Koordinator's DeviceShare model does not honour, so the backend rejects workloads
# annotated `grove.io/auto-mnnvl: enabled`; GREP-417 later named the same opt-in
# `grove.io/mnnvl-group: <group>` ("none" opts out). Both are refused, and so are DRA claims.
AUTO_MNNVL_ANNOTATION = "grove.io/auto-mnnvl"
MNNVL_GROUP_ANNOTATION = "grove.io/mnnvl-group"


def layer_name(topology: ClusterTopology | None, level: str) -> str:
    """`rack` -> `RackLayer`, `nv-link` -> `NvLinkLayer`; the hostname level is the node leaf."""
    if level_is_node(topology_defining(topology, level), level):
        return NODE_LAYER
    return "".join(part.capitalize() for part in level.split("-")) + "Layer"


def level_is_node(topology: ClusterTopology, level: str) -> bool:
    levels = topology.spec.levels
    return levels[-1].name == level and levels[-1].node_label == HOSTNAME_LABEL


class KoordinatorBackend(Backend):
    name = "koordinator"
    scheduler_name = "koord-scheduler"

    def capabilities(self) -> Mapping[str, Support]:
        return {
            "replica-gang": Unsupported(
                "a role's PodGroup counts pods, so an extra multi-pod replica can be placed in part; "
                "set minReplicas equal to replicas for this role, or use backend 'volcano' or 'workload-api'"
            ),
            "complete-replica-minimum": Unsupported(
                "a role's PodGroup counts pods (minMember = minReplicas x podsPerReplica), so pods of several "
                "incomplete replicas can satisfy it; use backend 'volcano', 'kai' or 'workload-api'"
            ),
            "unit-gang": Full("one GangGroup per unit (gang.scheduling.koordinator.sh/groups)"),
            "role-minimums": Full("minMember below gang.scheduling.koordinator.sh/total-number"),
            "minimums-before-extras": Approximate(
                "koord-scheduler orders gangs by priority, not minimums first: an extra replica of one unit may "
                "be placed before another unit's minimum"
            ),
            "unit-pack-required": Full("network-topology-spec gatherStrategy MustGather"),
            "unit-pack-preferred": Full("network-topology-spec gatherStrategy PreferGather"),
            "role-pack-required": Unsupported(
                "Koordinator cannot apply distinct topology constraints to disjoint subsets of one GangGroup "
                "(Grove GREP-537); pack the whole unit at that level instead, or use backend 'volcano' or 'kai'"
            ),
            "role-pack-preferred": Approximate("dropped: only the GangGroup-wide gather strategy is expressible"),
            "affinity-required": Unsupported(
                "Koordinator has no cross-role proximity constraint; pack the unit at that level instead, or use backend 'native'"
            ),
            "affinity-preferred": PREFERRED_AFFINITY_AS_POD_AFFINITY,
            "priority": Full("priorityClassName on the pods"),
            "exclusive": Full(
                f"{EXCLUSIVE_AS_ANTI_AFFINITY}: koord-scheduler keeps kube-scheduler's default filters, InterPodAffinity "
                "among them, and schedules a gang pod by pod through them"
            ),
            "gang-timeout": Full("PodGroup scheduleTimeoutSeconds"),
            **controller_only(),
        }

    def extra_problems(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[Problem]:
        layers = group_problems(topology, _layer_clashes(topology)) if topology is not None else []
        return _device_problems(group) + layers

    # ------------------------------------------------------------------ group objects

    def unit_objects(
        self, group: InferenceGroup, topology: ClusterTopology | None, unit: int, manifest: Manifest | None = None,
        replicas: Replicas | None = None, alone: Collection[tuple[str, int]] = (),
    ) -> list[dict[str, Any]]:
        objects = []
        namespace = group.metadata.namespace
        network = self._network_spec(group, topology)
        members = [f"{namespace}/{unit_object_name(group, unit, role.name)}" for role in group.spec.roles]
        for role in group.spec.roles:
            annotations = {
                GROUPS_ANNOTATION: json.dumps(members, separators=(",", ":")),
                MODE_ANNOTATION: "Strict",
                TOTAL_ANNOTATION: str(role.replicas * role.pods_per_replica),
            }
            if network is not None:
                annotations[NETWORK_ANNOTATION] = network
            spec: dict[str, Any] = {
                "minMember": role.minimum * role.pods_per_replica,
                "scheduleTimeoutSeconds": group.spec.scheduler.gang_timeout_seconds,
            }
            objects.append(
                {
                    "apiVersion": API_VERSION,
                    "kind": "PodGroup",
                    "metadata": {
                        "name": unit_object_name(group, unit, role.name),
                        "namespace": namespace,
                        "labels": unit_selector(group, unit, role.name),
                        "annotations": dict(sorted(annotations.items())),
                    },
                    "spec": spec,
                }
            )
        return objects

    @staticmethod
    def _network_spec(group: InferenceGroup, topology: ClusterTopology | None) -> str | None:
        pack = group.spec.topology.pack
        strategies = []
        if pack.required is not None:
            strategies.append({"layer": layer_name(topology, pack.required), "strategy": "MustGather"})
        if pack.preferred is not None and pack.preferred != pack.required:
            strategies.append({"layer": layer_name(topology, pack.preferred), "strategy": "PreferGather"})
        if not strategies:
            return None
        return json.dumps({"gatherStrategy": strategies}, separators=(",", ":"))

    def _decorate(self, pod: dict[str, Any], group: InferenceGroup, topology: ClusterTopology | None) -> None:
        unit, role, _, _ = pod_identity(pod)
        pod["metadata"].setdefault("labels", {})[POD_GROUP_LABEL] = unit_object_name(group, unit, role)
        if group.spec.scheduler.qos_class is not None:
            pod["metadata"]["labels"][QOS_LABEL] = group.spec.scheduler.qos_class
        add_preferred_affinity(pod, group, topology)
        add_exclusive_anti_affinity(pod, group, topology)

    # ------------------------------------------------------------------ topology

    def render_topology(self, topology: ClusterTopology, nodes: Sequence[Node]) -> list[dict[str, Any]]:
        refuse_levels(_layer_clashes(topology), "name")
        entries: list[dict[str, Any]] = []
        parent: str | None = None
        for level in topology.spec.levels:
            layer = layer_name(topology, level.name)
            entry: dict[str, Any] = {"topologyLayer": layer}
            if layer != NODE_LAYER:
                entry["labelKey"] = [level.node_label]
            if parent is not None:
                entry["parentTopologyLayer"] = parent
            entries.append(dict(sorted(entry.items())))
            parent = layer
        if parent != NODE_LAYER:
            entries.append({"parentTopologyLayer": parent, "topologyLayer": NODE_LAYER})
        return [
            {
                "apiVersion": TOPOLOGY_API_VERSION,
                "kind": "ClusterNetworkTopology",
                "metadata": {
                    "name": TOPOLOGY_NAME,
                    "labels": topology_object_labels(topology.metadata.name),
                },
                "spec": {"networkTopologySpec": entries},
            }
        ]


def _device_problems(group: InferenceGroup) -> list[Problem]:
    """DRA claims and the MNNVL opt-in in any pod template: Koordinator cannot honour them (GREP-537)."""
    problems = []
    for index, role in enumerate(group.spec.roles):
        templates = [("template", role.template)] + ([("workerTemplate", role.worker_template)] if role.worker_template else [])
        for field, template in templates:
            path = f"spec.roles[{index}].{field}"
            if template.spec.resource_claims:
                problems.append(Problem(
                    f"{path}.spec.resourceClaims",
                    "backend 'koordinator' cannot honour DRA resource claims: koord-scheduler allocates devices "
                    "through its DeviceShare model, not DRA (Grove GREP-537); remove them, or use another backend",
                ))
            annotations = template.metadata.annotations
            mnnvl = [key for key in (AUTO_MNNVL_ANNOTATION, MNNVL_GROUP_ANNOTATION)
                     if key in annotations and annotations[key] not in ("disabled", "none")]
            for key in mnnvl:
                problems.append(Problem(
                    f"{path}.metadata.annotations{key_path(key)}",
                    "backend 'koordinator' cannot honour MNNVL: it needs DRA ComputeDomains, which Koordinator "
                    "does not schedule (Grove GREP-537); remove the annotation, or use another backend",
                ))
    return problems


def _layer_clashes(topology: ClusterTopology) -> list[LevelProblem]:
    """(level index, why) for levels whose layer names clash or take a name Koordinator reserves."""
    clashes = []
    seen: dict[str, int] = {}
    for index, level in enumerate(topology.spec.levels):
        layer = layer_name(topology, level.name)
        if layer in (NODE_LAYER, CLUSTER_LAYER) and not level_is_node(topology, level.name):
            clashes.append((index, f"level {level.name!r} would become Koordinator's reserved layer {layer!r}; rename the level"))
        elif layer in seen:
            first = topology.spec.levels[seen[layer]].name
            clashes.append((index, f"levels {first!r} and {level.name!r} would both become Koordinator layer {layer!r}; rename one"))
        seen.setdefault(layer, index)
    return clashes
