"""What marks a scheduler object as the topology controller's, and the finalizer it keeps.

An object is tandem's when it carries BOTH labels: `app.kubernetes.io/managed-by: tandem`
and `tandem.dev/topology: <ClusterTopology name>`. One without either is never changed nor
deleted, whoever made it (a Volcano discoverer, a user). Each object also carries an
ownerReference to its ClusterTopology (not a controller reference, blocking nothing), so
garbage collection follows a topology removed while the controller is not running.
"""

from __future__ import annotations

from typing import Any, Mapping

from tandem.api.naming import MANAGED_BY, MANAGED_BY_LABEL, TOPOLOGY_LABEL, topology_object_labels

__all__ = ["FINALIZER", "FLAVORS_ANNOTATION", "MANAGED_BY", "MANAGED_BY_LABEL", "TOPOLOGY_LABEL", "owner_reference", "owner_topology", "ownership_labels"]

FINALIZER = "tandem.dev/topology-in-use"
# On a ClusterTopology: the Kueue ResourceFlavors whose `spec.topologyName` should name its Topology.
FLAVORS_ANNOTATION = "tandem.dev/kueue-resource-flavors"


def owner_topology(obj: Mapping[str, Any]) -> str | None:
    """The ClusterTopology an object belongs to, or None when it is not tandem's."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(MANAGED_BY_LABEL) != MANAGED_BY:
        return None
    topology = labels.get(TOPOLOGY_LABEL)
    return topology if topology else None


def ownership_labels(topology: str) -> dict[str, str]:
    return topology_object_labels(topology)


def owner_reference(topology: Mapping[str, Any]) -> dict[str, Any]:
    meta = topology["metadata"]
    return {
        "apiVersion": topology.get("apiVersion", "tandem.dev/v1alpha1"),
        "kind": "ClusterTopology",
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "controller": False,
        "blockOwnerDeletion": False,
    }
