"""The Kubernetes Workload API (`scheduling.k8s.io`, KEP-4671), for each version kubernetes-validate ships.

| version | Kubernetes | objects | pods join with |
|---|---|---|---|
| v1alpha1 | 1.35 | Workload `spec.podGroups[].policy.gang.minCount` | `spec.workloadRef` (+ `podGroupReplicaKey`) |
| v1alpha2 | 1.36 | Workload `podGroupTemplates`, runtime PodGroup (`podGroupTemplateRef`) | `spec.schedulingGroup.podGroupName` |
| v1beta1 | 1.37 | Workload `podGroupTemplates`, runtime PodGroup (`workloadRef`) | `spec.schedulingGroup.podGroupName` |
| v1alpha3 | 1.37 | Workload `compositePodGroupTemplates`, CompositePodGroup, PodGroup | `spec.schedulingGroup.podGroupName` |

Only v1alpha3 has the CompositePodGroup kind, the gang of gangs: there a unit is a
CompositePodGroup whose gang needs every role (`minGroupCount`), each role a
CompositePodGroup needing `minReplicas` replica groups, and each replica a PodGroup whose
gang is its pods (`minCount = podsPerReplica`). Topology constraints (v1alpha2 on) are
required only, one key per group: the unit's on its CompositePodGroup, a replica's on its
PodGroup.

v1beta1 (1.37) has the hierarchy's fields, the Workload's `compositePodGroupTemplates` and
the PodGroup's `parentCompositePodGroupName` (both used only with the CompositePodGroup
feature gate), but not the CompositePodGroup kind they refer to, which is served as
v1alpha3 only; a cluster able to run the hierarchy therefore serves v1alpha3, and tandem
renders it there. v1alpha2 and v1alpha1 have no hierarchy at all.

So in v1beta1, v1alpha2 and v1alpha1 tandem renders flat: a PodGroup is one role of one
unit (`<group>-<unit>-<role>`, gang `minCount = minReplicas x podsPerReplica`) with no
parent, an independent gang; a unit gang across roles is rejected (the gap tandem
closes), and a unit pack only fits a group with a single role.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

from tandem.api.kube import Node
from tandem.api.naming import GROUP_LABEL
from tandem.api.resources import API_VERSION as TANDEM_API_VERSION
from tandem.api.resources import ClusterTopology, InferenceGroup, Role
from tandem.backends.base import (
    EXCLUSIVE_AS_ANTI_AFFINITY,
    PREFERRED_AFFINITY_AS_POD_AFFINITY,
    Approximate,
    Backend,
    BackendOptions,
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
from tandem.backends.features import Feature
from tandem.backends.pods import pod_identity
from tandem.backends.priority import priority_class_field
from tandem.errors import InputError, Problem

GROUP = "scheduling.k8s.io"
MAX_TEMPLATES = 8  # per podGroupTemplates / compositePodGroupTemplates list


@dataclass(frozen=True)
class Profile:
    version: str
    kubernetes: str  # the Kubernetes minor version whose kubernetes-validate schemas define it
    hierarchical: bool  # the CompositePodGroup kind exists
    parent_fields: bool  # Workload compositePodGroupTemplates and PodGroup parentCompositePodGroupName exist
    topology: bool  # schedulingConstraints.topology exists
    runtime_ref: str | None  # how a runtime PodGroup names its template; None: no runtime objects


PROFILES: dict[str, Profile] = {
    "v1alpha3": Profile("v1alpha3", "1.37", hierarchical=True, parent_fields=True, topology=True, runtime_ref="workloadRef"),
    "v1beta1": Profile("v1beta1", "1.37", hierarchical=False, parent_fields=True, topology=True, runtime_ref="workloadRef"),
    "v1alpha2": Profile("v1alpha2", "1.36", hierarchical=False, parent_fields=False, topology=True, runtime_ref="podGroupTemplateRef"),
    "v1alpha1": Profile("v1alpha1", "1.35", hierarchical=False, parent_fields=False, topology=False, runtime_ref=None),
}
DEFAULT_VERSION = "v1alpha3"
UNIT_TEMPLATE = "unit"


def role_template(role: str) -> str:
    return f"role-{role}"


def replica_template(role: str) -> str:
    return f"replica-{role}"


class WorkloadApiBackend(Backend):
    name = "workload-api"
    scheduler_name = None  # kube-scheduler's gang and topology plugins

    def __init__(self, options: BackendOptions | None = None) -> None:
        super().__init__(options)
        version = self.options.workload_api_version
        if version not in PROFILES:
            raise InputError(
                Problem("--workload-api-version", f"must be one of {', '.join(PROFILES)}, got {version!r}")
            )
        self.profile = PROFILES[version]

    @property
    def label(self) -> str:
        return f"{self.name} {self.profile.version}"

    @property
    def api_version(self) -> str:
        return f"{GROUP}/{self.profile.version}"

    # ------------------------------------------------------------------ capabilities

    def capabilities(self) -> Mapping[str, Support]:
        common: dict[str, Support] = {
            "minimums-before-extras": Approximate(
                "kube-scheduler orders pod groups by priority, then age, not minimums first: an extra replica of one "
                "unit may be placed before another unit's minimum"
            ),
            "unit-pack-preferred": Approximate("dropped: Workload API topology constraints are required only"),
            "role-pack-preferred": Approximate("dropped: Workload API topology constraints are required only"),
            "affinity-required": Unsupported(
                "the Workload API has no cross-group proximity constraint; pack the unit at that level instead, or use backend 'native'"
            ),
            "affinity-preferred": PREFERRED_AFFINITY_AS_POD_AFFINITY,
            "priority": Full("priorityClassName on the groups and the pods"),
            "exclusive": Full(
                f"{EXCLUSIVE_AS_ANTI_AFFINITY}: kube-scheduler runs its InterPodAffinity filter for every pod of a "
                "pod group"
            ),
            "gang-timeout": Approximate("pod groups have no timeout; kube-scheduler binds a gang only when all of it fits"),
            **controller_only(),
        }
        if self.profile.hierarchical:
            return common | {
                "replica-gang": Full("a PodGroup per replica, gang minCount = podsPerReplica"),
                "complete-replica-minimum": Full("the role's CompositePodGroup counts replica PodGroups (minGroupCount)"),
                "unit-gang": Full("the unit's CompositePodGroup needs every role (minGroupCount)"),
                "role-minimums": Full("the role's CompositePodGroup gang minGroupCount = minReplicas"),
                "unit-pack-required": Full("the unit's CompositePodGroup schedulingConstraints.topology"),
                "role-pack-required": Full("the replica's PodGroup schedulingConstraints.topology"),
            }
        newer = "use workload-api version v1alpha3 (Kubernetes 1.37, CompositePodGroup) or backend 'native'"
        unit_pack: Support = (
            Unsupported(f"a PodGroup is one role and no object spans roles (a group with one role is accepted); {newer}")
            if self.profile.topology
            else Unsupported(f"this version has no topology constraints (they arrive in v1alpha2, Kubernetes 1.36); {newer}")
        )
        return common | {
            "replica-gang": Unsupported(f"a role is one PodGroup counting pods, so an extra multi-pod replica can be placed in part; {newer}"),
            "complete-replica-minimum": Unsupported(
                f"a role is one PodGroup counting pods (minCount = minReplicas x podsPerReplica), so incomplete replicas can satisfy it; {newer}"
            ),
            "unit-gang": Unsupported(f"{_flat_gangs(self.profile)}: one role can be placed while another waits; {newer}"),
            "role-minimums": Full("gang minCount below the role's pods"),
            "unit-pack-required": unit_pack,
            "role-pack-required": Unsupported(
                f"a topology constraint applies to the role's whole PodGroup, not to each replica; {newer}"
            ),
        }

    def support_for(self, feature: Feature, group: InferenceGroup, topology: ClusterTopology | None) -> Support:
        if feature.id == "unit-pack-required" and self.profile.topology and not self.profile.hierarchical:
            if len(active_roles(group)) <= 1:
                return Full("the single role's PodGroup carries the unit's topology constraint")
        return super().support_for(feature, group, topology)

    def extra_problems(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[Problem]:
        if len(group.spec.roles) > MAX_TEMPLATES:
            return [
                Problem(
                    "spec.roles",
                    f"backend {self.label!r} takes at most {MAX_TEMPLATES} roles: a Workload template list holds at most "
                    f"{MAX_TEMPLATES} entries, got {len(group.spec.roles)}",
                )
            ]
        return []

    # ------------------------------------------------------------------ group objects

    def shared_objects(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[dict[str, Any]]:
        return [self._workload(group, topology)]

    def unit_objects(
        self, group: InferenceGroup, topology: ClusterTopology | None, unit: int, manifest: Manifest | None = None,
        replicas: Replicas | None = None, alone: Collection[tuple[str, int]] = (),
    ) -> list[dict[str, Any]]:
        return self._runtime_objects(group, unit, topology, replicas)

    def _workload(self, group: InferenceGroup, topology: ClusterTopology | None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "controllerRef": {"apiGroup": TANDEM_API_VERSION.split("/")[0], "kind": "InferenceGroup", "name": group.metadata.name}
        }
        roles = group.spec.roles
        if self.profile.version == "v1alpha1":
            spec["podGroups"] = [{"name": role.name, "policy": _pods_policy(role.minimum * role.pods_per_replica)} for role in roles]
        elif self.profile.hierarchical:
            spec["compositePodGroupTemplates"] = [self._unit_template(group, topology)]
        else:
            spec["podGroupTemplates"] = [self._role_group_spec(group, role, topology, template=True) for role in roles]
        return {
            "apiVersion": self.api_version,
            "kind": "Workload",
            "metadata": {"name": group.metadata.name, "namespace": group.metadata.namespace, "labels": {GROUP_LABEL: group.metadata.name}},
            "spec": spec,
        }

    def _unit_template(self, group: InferenceGroup, topology: ClusterTopology | None) -> dict[str, Any]:
        template: dict[str, Any] = {"name": UNIT_TEMPLATE, **self._unit_spec(group, topology)}
        template["compositePodGroupTemplates"] = [
            {
                "name": role_template(role.name),
                "schedulingPolicy": _groups_policy(role.minimum),
                "podGroupTemplates": [{"name": replica_template(role.name), **self._replica_spec(role, topology)}],
            }
            for role in group.spec.roles
        ]
        return template

    def _unit_spec(self, group: InferenceGroup, topology: ClusterTopology | None) -> dict[str, Any]:
        """What the unit's CompositePodGroup (and its template) carries."""
        needed = any(role.minimum > 0 for role in group.spec.roles)
        # Every role is a child; a role without a minimum has a basic policy and is never what holds the unit back.
        spec: dict[str, Any] = {"schedulingPolicy": _groups_policy(len(group.spec.roles) if needed else 0)}
        required = group.spec.topology.pack.required
        if required is not None:
            spec["schedulingConstraints"] = _topology_constraint(topology, required)
        return spec | priority_class_field(group.spec.priority)

    @staticmethod
    def _replica_spec(role: Role, topology: ClusterTopology | None) -> dict[str, Any]:
        spec: dict[str, Any] = {"schedulingPolicy": _pods_policy(role.pods_per_replica)}
        required = role.topology.pack.required
        if required is not None and role.pods_per_replica > 1:
            spec["schedulingConstraints"] = _topology_constraint(topology, required)
        return spec

    def _role_group_spec(self, group: InferenceGroup, role: Role, topology: ClusterTopology | None, template: bool) -> dict[str, Any]:
        """A flat version's PodGroup for one role (or its template, which also has a name)."""
        spec: dict[str, Any] = {"name": role.name} if template else {}
        spec["schedulingPolicy"] = _pods_policy(role.minimum * role.pods_per_replica)
        required = group.spec.topology.pack.required
        if required is not None and self.profile.topology and len(active_roles(group)) <= 1:
            spec["schedulingConstraints"] = _topology_constraint(topology, required)
        return spec | priority_class_field(group.spec.priority)

    def _runtime_objects(self, group: InferenceGroup, unit: int, topology: ClusterTopology | None, replicas: Replicas | None = None) -> list[dict[str, Any]]:
        if self.profile.runtime_ref is None:
            return []  # v1alpha1: pods name the Workload and their pod group directly
        if not self.profile.hierarchical:
            return [
                self._object(
                    "PodGroup",
                    unit_object_name(group, unit, role.name),
                    group,
                    unit,
                    self._flat_template_ref(group, role.name) | self._role_group_spec(group, role, topology, template=False),
                    role.name,
                )
                for role in group.spec.roles
            ]
        unit_name = unit_object_name(group, unit)
        objects = [self._object("CompositePodGroup", unit_name, group, unit, {"workloadRef": _ref(group, UNIT_TEMPLATE), **self._unit_spec(group, topology)})]
        for role in group.spec.roles:
            role_name = unit_object_name(group, unit, role.name)
            objects.append(
                self._object(
                    "CompositePodGroup",
                    role_name,
                    group,
                    unit,
                    {
                        "parentCompositePodGroupName": unit_name,
                        "workloadRef": _ref(group, role_template(role.name)),
                        "schedulingPolicy": _groups_policy(role.minimum),
                    },
                    role.name,
                )
            )
            for replica in replica_indexes(role, replicas):
                objects.append(
                    self._object(
                        "PodGroup",
                        unit_object_name(group, unit, role.name, replica),
                        group,
                        unit,
                        {
                            "parentCompositePodGroupName": role_name,
                            "workloadRef": _ref(group, replica_template(role.name)),
                            **self._replica_spec(role, topology),
                        },
                        role.name,
                    )
                )
        return objects

    def _flat_template_ref(self, group: InferenceGroup, template: str) -> dict[str, Any]:
        if self.profile.runtime_ref == "podGroupTemplateRef":
            return {"podGroupTemplateRef": {"workload": {"podGroupTemplateName": template, "workloadName": group.metadata.name}}}
        return {"workloadRef": _ref(group, template)}

    def _object(self, kind: str, name: str, group: InferenceGroup, unit: int, spec: dict[str, Any], role: str | None = None) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": kind,
            "metadata": {"name": name, "namespace": group.metadata.namespace, "labels": unit_selector(group, unit, role)},
            "spec": spec,
        }

    # ------------------------------------------------------------------ pods and topology

    def _decorate(self, pod: dict[str, Any], group: InferenceGroup, topology: ClusterTopology | None) -> None:
        unit, role, replica, _ = pod_identity(pod)
        spec = pod["spec"]
        if self.profile.version == "v1alpha1":
            spec["workloadRef"] = {"name": group.metadata.name, "podGroup": role, "podGroupReplicaKey": str(unit)}
        elif self.profile.hierarchical:
            spec["schedulingGroup"] = {"podGroupName": unit_object_name(group, unit, role, replica)}
        else:
            spec["schedulingGroup"] = {"podGroupName": unit_object_name(group, unit, role)}
        add_preferred_affinity(pod, group, topology)
        add_exclusive_anti_affinity(pod, group, topology)

    def render_topology(self, topology: ClusterTopology, nodes: Sequence[Node]) -> list[dict[str, Any]]:
        return []  # constraints name node labels directly; kube-scheduler needs no topology object


def _flat_gangs(profile: Profile) -> str:
    """Why a flat version's PodGroups are independent gangs, for that version."""
    if profile.parent_fields:
        return (
            f"a {profile.version} PodGroup without a parent is an independent gang, and the parent it would need, a "
            f"CompositePodGroup, is a v1alpha3-only kind ({profile.version} has only the fields that refer to it: the "
            "Workload's compositePodGroupTemplates and the PodGroup's parentCompositePodGroupName)"
        )
    return f"{profile.version} has no pod-group hierarchy, so each role's PodGroup is an independent gang"


def active_roles(group: InferenceGroup) -> list[str]:
    return [role.name for role in group.spec.roles if role.replicas > 0]


def _topology_constraint(topology: ClusterTopology | None, level: str) -> dict[str, Any]:
    """`schedulingConstraints`: one domain of `level` (the API keys it by the level's node label)."""
    return {"topology": [{"key": node_label(topology, level)}]}


def _ref(group: InferenceGroup, template: str) -> dict[str, str]:
    return {"templateName": template, "workloadName": group.metadata.name}


def _pods_policy(min_count: int) -> dict[str, Any]:
    return {"gang": {"minCount": min_count}} if min_count > 0 else {"basic": {}}


def _groups_policy(min_groups: int) -> dict[str, Any]:
    return {"gang": {"minGroupCount": min_groups}} if min_groups > 0 else {"basic": {}}

