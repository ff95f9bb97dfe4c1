"""The pods of one unit as plain manifests, named and labelled as tandem's controller names them.

Backends that hand placement to another scheduler render the pods themselves: the pod
template as the user wrote it (every field kept when the raw manifest is given), plus
tandem's labels so selectors can tell units, roles and replicas apart (and, for a group
with `spec.topology.exclusive`, `tandem.dev/exclusive`, which other exclusive units'
anti-affinity and tandem's engine look for, as on the controller's pods). Gates and owner
references are the controller's business and are not added here.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

from tandem.api.kube import PodTemplateSpec
from tandem.api.naming import EXCLUSIVE_LABEL, GROUP_LABEL, POD_INDEX_LABEL, REPLICA_LABEL, ROLE_LABEL, UNIT_LABEL, pod_name
from tandem.api.quantity import MILLI
from tandem.api.resources import InferenceGroup


def unit_pods(group: InferenceGroup, unit: int, manifest: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every pod of `unit`, role by role (spec order), replica by replica, leader first."""
    raw_roles = {r.get("name"): r for r in (manifest or {}).get("spec", {}).get("roles", []) if isinstance(r, dict)}
    pods = []
    for role in group.spec.roles:
        raw = raw_roles.get(role.name)
        for replica in range(role.replicas):
            for index in range(role.pods_per_replica):
                template = _raw_template(raw, index) if raw is not None else modelled_template(role.pod_template(index))
                labels = dict(template.get("metadata", {}).get("labels", {}))
                labels.update(
                    {
                        GROUP_LABEL: group.metadata.name,
                        UNIT_LABEL: str(unit),
                        ROLE_LABEL: role.name,
                        REPLICA_LABEL: str(replica),
                        POD_INDEX_LABEL: str(index),
                    }
                )
                if group.spec.topology.exclusive is not None:
                    labels[EXCLUSIVE_LABEL] = group.spec.topology.exclusive
                metadata: dict[str, Any] = {
                    "name": pod_name(group.metadata.name, unit, role.name, replica, index),
                    "namespace": group.metadata.namespace,
                    "labels": dict(sorted(labels.items())),
                }
                annotations = template.get("metadata", {}).get("annotations", {})
                if annotations:
                    metadata["annotations"] = dict(sorted(annotations.items()))
                pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]})
    return pods


def pod_identity(pod: Mapping[str, Any]) -> tuple[int, str, int, int]:
    """(unit, role, replica, pod index) of a pod built by `unit_pods`."""
    labels = pod["metadata"]["labels"]
    return int(labels[UNIT_LABEL]), labels[ROLE_LABEL], int(labels[REPLICA_LABEL]), int(labels[POD_INDEX_LABEL])


def _raw_template(raw_role: Mapping[str, Any], index: int) -> dict[str, Any]:
    template = raw_role["workerTemplate"] if index > 0 and raw_role.get("workerTemplate") else raw_role["template"]
    return copy.deepcopy(dict(template))


def modelled_template(template: PodTemplateSpec) -> dict[str, Any]:
    """A template from the typed model: only the fields tandem reads, quantities written back."""
    dumped = template.model_dump(by_alias=True, exclude_defaults=True, exclude_none=True)
    spec = dumped["spec"]
    for key in ("containers", "initContainers"):
        for container in spec.get(key, []):
            resources = container.get("resources", {})
            for kind in ("requests", "limits"):
                if kind in resources:
                    resources[kind] = {name: _quantity(amount) for name, amount in resources[kind].items()}
    if "overhead" in spec:
        spec["overhead"] = {name: _quantity(amount) for name, amount in spec["overhead"].items()}
    return dumped


def _quantity(milli: int) -> str:
    return str(milli // MILLI) if milli % MILLI == 0 else f"{milli}m"
