"""The scheduler kinds the topology controller keeps, per backend name of `--backends`.

Each is served cluster-scoped by its scheduler's CRD (see ../shared/schemas). The
controller lists and watches exactly these (and RBAC grants exactly these). `owned` says
whether the controller makes and deletes objects of the kind; Kueue's ResourceFlavor is
only patched where a ClusterTopology asks (`tandem.dev/kueue-resource-flavors`), never
created or deleted.

KAI's and Kueue's `Topology` share a kind name, and tandem's ports, memory store, local
API server and Kubernetes adapter name objects by kind alone: `--backends` with both is
refused (`reconcile.check_settings`) until kinds are qualified by group.
"""

from __future__ import annotations

from dataclasses import dataclass

from tandem.backends.kai import TOPOLOGY_API_VERSION as KAI_TOPOLOGY
from tandem.backends.koordinator import TOPOLOGY_API_VERSION as KOORDINATOR_TOPOLOGY
from tandem.backends.kueue import TOPOLOGY_API_VERSION as KUEUE_TOPOLOGY
from tandem.api.resources import ClusterTopology
from tandem.backends.volcano import HYPERNODE_API_VERSION, tier_levels


@dataclass(frozen=True)
class BackendKind:
    kind: str
    api_version: str
    plural: str
    namespaced: bool = False
    owned: bool = True  # made and deleted by the controller (else only patched where asked)


RESOURCE_FLAVOR = BackendKind("ResourceFlavor", KUEUE_TOPOLOGY, "resourceflavors", owned=False)

BACKEND_KINDS: dict[str, tuple[BackendKind, ...]] = {
    "volcano": (BackendKind("HyperNode", HYPERNODE_API_VERSION, "hypernodes"),),
    "kai": (BackendKind("Topology", KAI_TOPOLOGY, "topologies"),),
    "kueue": (BackendKind("Topology", KUEUE_TOPOLOGY, "topologies"), RESOURCE_FLAVOR),
    "koordinator": (BackendKind("ClusterNetworkTopology", KOORDINATOR_TOPOLOGY, "clusternetworktopologies"),),
}

# Backends whose kinds share a name: at most one of each set may be enabled at once.
CLASHING_KINDS: tuple[frozenset[str], ...] = (frozenset({"kai", "kueue"}),)


def owned_kinds(backend: str) -> tuple[str, ...]:
    """The kinds of `backend` the controller makes and deletes."""
    return tuple(k.kind for k in BACKEND_KINDS[backend] if k.owned)


NodeKeys = tuple[tuple[str, ...], frozenset[str]]  # (labels, those of which only presence matters)


def render_keys(backend: str, topology: ClusterTopology) -> NodeKeys:
    """What of the nodes `backend`'s renderer reads: Volcano the tier labels' values and
    that a node carries every level label (hostname is not a tier: a node joining an
    existing rack changes no HyperNode); the others read no node. The controller renders
    again only when the nodes' paths over these keys change."""
    if backend != "volcano":
        return ((), frozenset())
    labels = tuple(level.node_label for level in topology.spec.levels)
    tiers = {level.node_label for level in tier_levels(topology)}
    return (labels, frozenset(label for label in labels if label not in tiers))
