"""Kueue: each unit is plain-pod groups adopting prebuilt Workloads, placed by Topology Aware Scheduling.

- Per unit a **base** Kueue `Workload` (`kueue.x-k8s.io/v1beta2`) named `<group>-<unit>`
  counting each role's minimum (`minReplicas x podsPerReplica` pods), and per replica beyond
  its role's minimum an **extra** Workload `<group>-<unit>-<role>-<replica>` of that one
  replica (`kueue_gangs.py`): Kueue admits a Workload whole (no `minCount`) and its PodSets
  cannot change once it exists, so this is the closest it comes to "minimums first, extras
  after". Each Workload has one PodSet per role it holds (leaders and workers apart,
  `<role>-workers`, when a role has a workerTemplate): `count`, the pod `template`, and the
  `topologyRequest`. A role without a minimum is not in the base; a unit without any
  minimum has no base.
- A pod joins by its replica index (below its role's minimum: the base, else its replica's
  extra): it carries `kueue.x-k8s.io/prebuilt-workload-name` and
  `kueue.x-k8s.io/pod-group-name` (both that Workload's name: Kueue requires them equal),
  `kueue.x-k8s.io/pod-group-total-count` (every pod of that Workload) and
  `kueue.x-k8s.io/role-hash` = its PodSet's name. Kueue recomputes the role hash from the
  pod spec for plain pods, so two roles with identical templates would become one PodSet;
  it keeps the given value only for pods adopting a prebuilt Workload, which is why tandem
  renders them (as Grove's Kueue backend does, GREP-704).
  `kueue.x-k8s.io/pod-group-serving: "true"` marks the group as serving (long-running), and
  the scheduling gate `kueue.x-k8s.io/admission` (what Kueue's pod webhook adds) keeps the
  pod for Kueue to release on admission, not kube-scheduler.
- Ranks: every pod has `tandem.dev/podset-index` (its rank in its PodSet, restarting in each
  Workload, a replica's pods consecutive; in a PodSet group the larger PodSet's ranks
  continue after the smaller's) and the annotation `kueue.x-k8s.io/pod-group-pod-index-label`
  naming it; Kueue copies it to `kueue.x-k8s.io/pod-group-pod-index`, the PodSet's
  `podIndexLabel`, and hands out slices in rank order, so a replica's pods share a slice.
- The unit's pack is the PodSets' `required` (or `preferred`) level, in the base and in each
  extra on its own (an extra is not kept in the base's domain: a warning says so). A base
  of one PodSet, or of a leader and workers (two PodSets, one a single pod) joined by
  `podSetGroupName`, is kept in one domain; Kueue's released TAS groups no other shape, so
  a required unit pack over other bases is rejected (a preferred one is kept per PodSet,
  with a warning).
- A multi-pod replica's required pack is a PodSet slice (`podSetSliceRequiredTopology`,
  `podSetSliceSize` = podsPerReplica). Slices inside a PodSet group need Kueue's
  `TASGroupedPodSetSlicing` feature gate (a warning says so).
- Pods carry the same TAS annotations as their PodSet's `topologyRequest`.
- The topology is a Kueue `Topology` (`kueue.x-k8s.io/v1beta2`); the administrator
  references it from a ResourceFlavor (`spec.topologyName`) used by the LocalQueue's
  ClusterQueue.
"""

from __future__ import annotations

import copy
from typing import Any, Collection, Mapping, Sequence

from tandem.api.kube import Node
from tandem.api.naming import GANG_ANNOTATION, OWN_GANG, LABEL_PREFIX, REPLICA_LABEL, ROLE_LABEL
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.backends.base import (
    Approximate,
    Backend,
    Full,
    Manifest,
    Replicas,
    Support,
    Unsupported,
    controller_only,
    node_label,
    unit_selector,
)
from tandem.backends.features import Feature
from tandem.backends.kueue_gangs import PodGang, base_gang, extra_gang, gang_of, has_extras, unit_gangs
from tandem.backends.kueue_podsets import PodSetShape, base_podsets, leader_and_workers, role_podsets, splits
from tandem.backends.pods import pod_identity, unit_pods
from tandem.backends.priority import priority_class_name
from tandem.backends.topology_levels import group_problems, level_label_problems, level_list_topology
from tandem.errors import Problem

PREFIX = "kueue.x-k8s.io/"
ADMISSION_GATE = PREFIX + "admission"  # what Kueue's pod webhook adds and its pod controller removes on admission
QUEUE_LABEL = PREFIX + "queue-name"
GROUP_LABEL = PREFIX + "pod-group-name"
PREBUILT_LABEL = PREFIX + "prebuilt-workload-name"
TOTAL_ANNOTATION = PREFIX + "pod-group-total-count"
SERVING_ANNOTATION = PREFIX + "pod-group-serving"
ROLE_HASH_ANNOTATION = PREFIX + "role-hash"
POD_INDEX_LABEL_ANNOTATION = PREFIX + "pod-group-pod-index-label"
KUEUE_POD_INDEX_LABEL = PREFIX + "pod-group-pod-index"  # Kueue copies the named label here
PODSET_INDEX_LABEL = LABEL_PREFIX + "podset-index"
REQUIRED_ANNOTATION = PREFIX + "podset-required-topology"
PREFERRED_ANNOTATION = PREFIX + "podset-preferred-topology"
PODSET_GROUP_ANNOTATION = PREFIX + "podset-group-name"
SLICE_TOPOLOGY_ANNOTATION = PREFIX + "podset-slice-required-topology"
SLICE_SIZE_ANNOTATION = PREFIX + "podset-slice-size"
API_VERSION = "kueue.x-k8s.io/v1beta2"
TOPOLOGY_API_VERSION = API_VERSION
MAX_PODSETS = 18  # Workload spec.podSets maxItems (v1beta2 CRD)
GROUPED_SLICING_GATE = "TASGroupedPodSetSlicing"

# topologyRequest field -> the pod annotation that says the same
ANNOTATION_OF = {
    "required": REQUIRED_ANNOTATION,
    "preferred": PREFERRED_ANNOTATION,
    "podSetGroupName": PODSET_GROUP_ANNOTATION,
    "podSetSliceRequiredTopology": SLICE_TOPOLOGY_ANNOTATION,
    "podSetSliceSize": SLICE_SIZE_ANNOTATION,
}

UNGROUPABLE = (
    "Kueue keeps PodSets in one domain only as one PodSet, or as a leader and workers (a group of exactly two "
    "PodSets, one of them a single pod: ValidatePodSetGroupingTopology, and the leader-worker placement of its "
    "topology-aware scheduling; larger groups await the unreleased TASPodSetGroupGeneralization gate, "
    "kubernetes-sigs/kueue#12274)"
)

EXTRAS_APART = (
    "the base pod group (each role's minimum) is admitted whole, and each extra replica is its own pod group "
    "admitted separately: Kueue orders them by its queue (priority, then creation), not every unit's minimums "
    "before any extra, and cannot keep an extra in the base's domain"
)
EXTRAS_PACKED_APART = (
    "the base pod group (each role's minimum) is packed at that level; each extra replica is its own pod group, "
    "packed at that level on its own: Kueue cannot keep an extra in the base's domain"
)


class KueueBackend(Backend):
    name = "kueue"
    scheduler_name = None  # Kueue gates and admits; kube-scheduler binds within Kueue's node choice
    fixed_minimums = True  # a pod below its role's minimum joins the base pod group for good

    def capabilities(self) -> Mapping[str, Support]:
        whole = "Kueue admits a Workload whole (no minCount)"
        return {
            "replica-gang": Full(f"each extra replica is a prebuilt Workload of its own; {whole}"),
            "complete-replica-minimum": Full(f"the base Workload counts each role's minimum in whole replicas; {whole}"),
            "unit-gang": Full(f"one base Workload per unit holds every role's minimum; {whole}"),
            "role-minimums": Full("the base Workload counts minReplicas of each role; the other replicas are extras"),
            "minimums-before-extras": Approximate(EXTRAS_APART),
            "unit-pack-required": Unsupported(
                f"{UNGROUPABLE}; a unit whose minimums make one PodSet, or two PodSets one of which is a single pod (a "
                "one-pod role beside another role, or one replica with a workerTemplate), is accepted; pack the unit "
                "with a preferred level, or use backend 'volcano' or 'kai'"
            ),
            "unit-pack-preferred": Full(
                "the PodSets' preferred level, joined by podSetGroupName for a leader and workers (other units of several "
                "PodSets: each PodSet on its own, with a warning)"
            ),
            "role-pack-required": Full(
                "PodSet slices: podSetSliceRequiredTopology, podSetSliceSize = podsPerReplica, pods ranked replica by "
                f"replica; inside a PodSet group Kueue needs its {GROUPED_SLICING_GATE} feature gate (a warning says so)"
            ),
            "role-pack-preferred": Approximate("dropped: Kueue slices take only a required level"),
            "affinity-required": Unsupported(
                "Kueue's topology-aware scheduling places PodSets by capacity and ignores pod affinities; pack the "
                "unit at that level instead, or use backend 'native'"
            ),
            "affinity-preferred": Approximate("dropped: Kueue TAS ignores pod affinity"),
            "priority": Full("the Workload's priorityClassRef and priority, and the pods' priorityClassName"),
            "exclusive": Unsupported(
                "Kueue's topology-aware scheduling assigns domains by capacity and ignores pod affinities "
                "(kubernetes-sigs/kueue#15057, open, asks for LWS's exclusive-topology), so the anti-affinity that "
                "keeps a domain to one unit could leave an admitted unit Pending in a domain another unit holds; its "
                "Topology Spreading (KEP-13746, alpha) caps a domain's share of one namespace's workloads, which is not "
                "exclusivity; use backend 'native', 'volcano', 'koordinator', 'kai' or 'workload-api'"
            ),
            "gang-timeout": Approximate(
                "Kueue's waitForPodsReady timeout is set cluster-wide in Kueue's Configuration, not per group"
            ),
            **controller_only("objects"),
        }

    def support_for(self, feature: Feature, group: InferenceGroup, topology: ClusterTopology | None) -> Support:
        if feature.id == "unit-pack-required" and groupable(base_podsets(group)):
            if has_extras(group):
                return Approximate(EXTRAS_PACKED_APART)
            return Full("one PodSet, or a leader and workers joined by podSetGroupName")
        if feature.id == "unit-pack-preferred":
            if group.spec.topology.pack.required is not None:
                return Approximate(
                    "a PodSet takes one of required or preferred: the required level is kept, and Kueue's best fit "
                    "already tries the narrowest domain that holds the unit"
                )
            if not groupable(base_podsets(group)):
                return Approximate(
                    f"{UNGROUPABLE}: each PodSet (role) is tried in one domain on its own, not the unit as a whole"
                )
            if has_extras(group):
                return Approximate(EXTRAS_PACKED_APART)
        return super().support_for(feature, group, topology)

    def extra_problems(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[Problem]:
        problems = [
            Problem(
                f"spec.roles[{i}].workerTemplate",
                f"backend 'kueue' cannot pack a replica whose leader and workers differ: they are two PodSets and a "
                f"PodSet slice spans one; drop the workerTemplate or the replica pack of role {role.name!r}",
            )
            for i, role in enumerate(group.spec.roles)
            if splits(role) and role.topology.pack.required is not None
        ]
        seen: dict[str, str] = {}
        for i, role in enumerate(group.spec.roles):
            for shape in role_podsets(role, role.replicas):
                if seen.setdefault(shape.name, role.name) != role.name:
                    problems.append(
                        Problem(
                            f"spec.roles[{i}].name",
                            f"backend 'kueue' names PodSets after roles: role {role.name!r} and role {seen[shape.name]!r} "
                            f"would both be PodSet {shape.name!r}; rename one",
                        )
                    )
        podsets = len(base_podsets(group))  # an extra replica's Workload has one or two
        if podsets > MAX_PODSETS:
            problems.append(Problem("spec.roles", f"backend 'kueue' takes at most {MAX_PODSETS} PodSets per Workload, got {podsets}"))
        if topology is not None:
            problems += group_problems(topology, level_label_problems(topology, "Kueue"))
        return problems

    def extra_warnings(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[Problem]:
        """A slice inside a PodSet group needs a Kueue feature gate that is off by default where it was backported.
        Only the base can be such a group with a slice: an extra of a sliced role is one PodSet."""
        base = base_gang(group, 0)
        if base is None or not grouped(group, base):
            return []
        return [
            Problem(
                f"spec.roles[{i}].topology.pack.required",
                f"backend {self.label!r} puts a PodSet slice inside a PodSet group: Kueue needs its {GROUPED_SLICING_GATE} "
                "feature gate for that (kubernetes-sigs/kueue#15111), otherwise its pod webhook refuses "
                "podset-group-name together with podset-slice annotations",
            )
            for i, role in enumerate(group.spec.roles)
            if any(slice_level(shape, group) is not None for shape in base.shapes if shape.role == role.name)
        ]

    # ------------------------------------------------------------------ group objects

    def unit_objects(
        self, group: InferenceGroup, topology: ClusterTopology | None, unit: int, manifest: Manifest | None = None,
        replicas: Replicas | None = None, alone: Collection[tuple[str, int]] = (),
    ) -> list[dict[str, Any]]:
        """The unit's base Workload (when a role has a minimum), then one Workload per extra replica.
        Pass the same `group` (the unit's step view) to `prepare_pod`, so each pod names the Workload
        rendered here for its replica; a Workload's PodSets cannot change, so one whose counts
        differ from what exists is a new Workload (delete, then create)."""
        workloads, _ = self._unit_workloads_and_pods(group, topology, unit, manifest, replicas, alone)
        return workloads

    def applied_objects(self, group: InferenceGroup, topology: ClusterTopology | None, manifest: Manifest | None) -> list[dict[str, Any]]:
        """The Workloads are built from the prepared pods, so each PodSet's template is its pods' spec."""
        workloads: list[dict[str, Any]] = []
        pods: list[dict[str, Any]] = []
        for unit in range(group.spec.replicas):
            these_workloads, these_pods = self._unit_workloads_and_pods(group, topology, unit, manifest)
            workloads += these_workloads
            pods += these_pods
        return self.priority_objects(group) + workloads + pods

    def _unit_workloads_and_pods(
        self, group: InferenceGroup, topology: ClusterTopology | None, unit: int, manifest: Manifest | None,
        replicas: Replicas | None = None, alone: Collection[tuple[str, int]] = (),
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The unit's Workloads and pods: each pod group that has a member among the replicas
        (`replicas`: those admitted; all when None), a replica made `alone` in one of its own."""
        own = set(alone)
        pods = []
        for pod in unit_pods(group, unit, manifest):
            _, role, replica, _ = pod_identity(pod)
            if (role, replica) in own:
                pod["metadata"].setdefault("annotations", {})[GANG_ANNOTATION] = OWN_GANG
            pods.append(self.prepare_pod(pod, group, topology))
        wanted = None if replicas is None else {(role, index) for role, indexes in replicas.items() for index in indexes}
        members: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            _, role, replica, _ = pod_identity(pod)
            if wanted is None or (role, replica) in wanted:
                members.setdefault(pod["metadata"]["labels"][PREBUILT_LABEL], []).append(pod)
        gangs = unit_gangs(group, unit) + [extra_gang(group, unit, role, index) for role, index in sorted(own) if index < group.role(role).minimum]
        # (a PodSet's template is the first pod of its role's shape, a member or not)
        workloads = [self._workload(group, topology, unit, gang, pods) for gang in gangs if gang.name in members]
        return workloads, pods

    def _workload(
        self, group: InferenceGroup, topology: ClusterTopology | None, unit: int, gang: PodGang, pods: list[dict[str, Any]]
    ) -> dict[str, Any]:
        first_pod: dict[str, dict[str, Any]] = {}
        for pod in pods:
            first_pod.setdefault(pod["metadata"]["annotations"][ROLE_HASH_ANNOTATION], pod)
        pod_sets = []
        for shape in gang.shapes:
            entry: dict[str, Any] = {
                "name": shape.name,
                "count": shape.count,
                "template": {"spec": copy.deepcopy(first_pod[shape.name]["spec"])},
            }
            request = topology_request(group, topology, gang, shape)
            if request:
                entry["topologyRequest"] = request | {"podIndexLabel": KUEUE_POD_INDEX_LABEL}
            pod_sets.append(entry)
        spec: dict[str, Any] = {"queueName": self.queue(group), "podSets": pod_sets}
        class_name = priority_class_name(group.spec.priority)
        if class_name:
            spec["priorityClassRef"] = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": class_name}
            spec["priority"] = group.spec.priority  # the CRD wants it whenever priorityClassRef is set
        labels = unit_selector(group, unit)
        if gang.extra_of is not None:  # say whose replica it is
            labels = dict(sorted((labels | {ROLE_LABEL: gang.extra_of, REPLICA_LABEL: str(gang.first_replica)}).items()))
        return {
            "apiVersion": API_VERSION,
            "kind": "Workload",
            "metadata": {"name": gang.name, "namespace": group.metadata.namespace, "labels": labels},
            "spec": spec,
        }

    def _decorate(self, pod: dict[str, Any], group: InferenceGroup, topology: ClusterTopology | None) -> None:
        unit, role_name, replica, index = pod_identity(pod)
        alone = (pod["metadata"].get("annotations") or {}).get(GANG_ANNOTATION) == OWN_GANG
        gang = gang_of(group, unit, role_name, replica, alone)
        shape = gang.podset(role_name, index)
        labels = pod["metadata"].setdefault("labels", {})
        labels[QUEUE_LABEL] = self.queue(group)
        labels[GROUP_LABEL] = gang.name
        labels[PREBUILT_LABEL] = gang.name
        labels[PODSET_INDEX_LABEL] = str(gang.rank(role_name, replica, index, grouped(group, gang)))
        annotations = pod["metadata"].setdefault("annotations", {})
        annotations[TOTAL_ANNOTATION] = str(gang.total)
        annotations[SERVING_ANNOTATION] = "true"
        annotations[ROLE_HASH_ANNOTATION] = shape.name
        annotations[POD_INDEX_LABEL_ANNOTATION] = PODSET_INDEX_LABEL
        for field, value in topology_request(group, topology, gang, shape).items():
            annotations[ANNOTATION_OF[field]] = str(value)
        gates = pod["spec"].setdefault("schedulingGates", [])
        if not any(gate.get("name") == ADMISSION_GATE for gate in gates):
            gates.append({"name": ADMISSION_GATE})

    # ------------------------------------------------------------------ topology

    def render_topology(self, topology: ClusterTopology, nodes: Sequence[Node]) -> list[dict[str, Any]]:
        return [level_list_topology(topology, TOPOLOGY_API_VERSION, "Kueue")]


def groupable(shapes: list[PodSetShape]) -> bool:
    """Kueue can keep these PodSets in one domain: one PodSet, or a leader and workers."""
    return len(shapes) <= 1 or leader_and_workers(shapes)


def grouped(group: InferenceGroup, gang: PodGang) -> bool:
    """The pod group's PodSets are joined by podSetGroupName (a unit pack over a leader and workers)."""
    pack = group.spec.topology.pack
    return (pack.required is not None or pack.preferred is not None) and gang.leader_and_workers


def slice_level(shape: PodSetShape, group: InferenceGroup) -> str | None:
    """The required level of each replica's slice, for a PodSet holding whole multi-pod replicas."""
    role = group.role(shape.role)
    if shape.part != "replica" or shape.pods_per_replica < 2:
        return None
    return role.topology.pack.required


def topology_request(group: InferenceGroup, topology: ClusterTopology | None, gang: PodGang, shape: PodSetShape) -> dict[str, Any]:
    """The PodSet's topologyRequest fields (without podIndexLabel), in the CRD's names. The unit's
    pack applies to each pod group on its own: an extra is packed at the unit's level, not in
    the base's domain."""
    pack = group.spec.topology.pack
    request: dict[str, Any] = {}
    if pack.required is not None:
        request["required"] = node_label(topology, pack.required)
    elif pack.preferred is not None:
        request["preferred"] = node_label(topology, pack.preferred)
    if request and grouped(group, gang):
        request["podSetGroupName"] = gang.name
    level = slice_level(shape, group)
    if level is not None:
        request["podSetSliceRequiredTopology"] = node_label(topology, level)
        request["podSetSliceSize"] = shape.pods_per_replica
    return request
