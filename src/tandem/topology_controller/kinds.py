"""The scheduler kinds the topology controller keeps, per backend name of `--backends`.

Each is served cluster-scoped by its scheduler's CRD (see ../shared/schemas). The
controller lists and watches exactly these (and RBAC grants exactly these). `owned` says
whether the controller makes and deletes objects of the kind; Kueue's ResourceFlavor is
only patched where a ClusterTopology asks (`tandem.dev/kueue-resource-flavors`), never
created or deleted.

KAI's and Kueue's `Topology` share a kind name, so both are named by their group-qualified
key (`Topology.kai.scheduler`, `Topology.kueue.x-k8s.io`; `tandem.cluster.kind_keys`) in
every port call and world, and both backends can be kept by one controller. The other
kinds keep their plain names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from tandem.backends.kai import TOPOLOGY_API_VERSION as KAI_TOPOLOGY
from tandem.backends.koordinator import TOPOLOGY_API_VERSION as KOORDINATOR_TOPOLOGY
from tandem.backends.kueue import TOPOLOGY_API_VERSION as KUEUE_TOPOLOGY
from tandem.api.resources import ClusterTopology
from tandem.backends.volcano import HYPERNODE_API_VERSION, tier_levels
from tandem.cluster.kind_keys import group_of, object_key, qualified


@dataclass(frozen=True)
class BackendKind:
    kind: str
    api_version: str
    plural: str
    namespaced: bool = False
    owned: bool = True  # made and deleted by the controller (else only patched where asked)
    qualified: bool = False  # named `Kind.group`: another backend's kind has the same name

    @property
    def key(self) -> str:
        """How the ports name the kind: `HyperNode`, or `Topology.kai.scheduler` when qualified."""
        return qualified(self.kind, group_of(self.api_version)) if self.qualified else self.kind


RESOURCE_FLAVOR = BackendKind("ResourceFlavor", KUEUE_TOPOLOGY, "resourceflavors", owned=False)

BACKEND_KINDS: dict[str, tuple[BackendKind, ...]] = {
    "volcano": (BackendKind("HyperNode", HYPERNODE_API_VERSION, "hypernodes"),),
    "kai": (BackendKind("Topology", KAI_TOPOLOGY, "topologies", qualified=True),),
    "kueue": (BackendKind("Topology", KUEUE_TOPOLOGY, "topologies", qualified=True), RESOURCE_FLAVOR),
    "koordinator": (BackendKind("ClusterNetworkTopology", KOORDINATOR_TOPOLOGY, "clusternetworktopologies"),),
}

QUALIFIED_KEYS = frozenset(k.key for kinds in BACKEND_KINDS.values() for k in kinds if k.qualified)


def owned_kinds(backend: str) -> tuple[str, ...]:
    """The keys of the kinds of `backend` the controller makes and deletes."""
    return tuple(k.key for k in BACKEND_KINDS[backend] if k.owned)


def key_of(obj: Mapping[str, Any]) -> str:
    """The key of a rendered or observed object's kind (`Topology.kueue.x-k8s.io`, `HyperNode`)."""
    return object_key(obj, QUALIFIED_KEYS)


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
