"""A world for the topology controller's tests: the memory store with the scheduler kinds.

The backend kinds are served cluster-scoped (as their CRDs say) and the ClusterTopology
with a status subresource (as the topology controller needs it). Nodes carry labels only;
that is all the topology controller reads of them.
"""

from __future__ import annotations

from typing import Any, Iterable

from tandem.api.kube import Node
from tandem.api.resources import ClusterTopology
from tandem.cluster.memory import MemoryStore
from tandem.topology_controller.kinds import BACKEND_KINDS

HOST = "kubernetes.io/hostname"
BLOCK = "net.example.com/block"
RACK = "net.example.com/rack"
T0 = 1_764_003_217.0


class Clock:
    def __init__(self, now: float = T0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def store(clock: Clock | None = None) -> MemoryStore:
    world = MemoryStore(clock=clock or Clock())
    for kinds in BACKEND_KINDS.values():
        for kind in kinds:
            world.register_kind(kind.key, cluster_scoped=True, status=False)
    world.register_kind("ClusterTopology", cluster_scoped=True, status=True)
    return world


def node(name: str, **labels: str) -> dict[str, Any]:
    """A Node; keyword labels by short name: block, rack; the hostname label is its name."""
    keys = {"block": BLOCK, "rack": RACK}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOST: name, **{keys.get(k, k): v for k, v in labels.items()}}},
        "status": {"allocatable": {"cpu": "8"}},
    }


def levels(*names: str) -> list[dict[str, Any]]:
    label = {"block": BLOCK, "rack": RACK, "host": HOST}
    return [{"name": n, "nodeLabel": label[n]} for n in names]


def topology(name: str = "default", level_list: list[dict[str, Any]] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": meta,
            "spec": {"levels": level_list if level_list is not None else levels("block", "rack", "host")}}


def group(namespace: str, name: str, topology_name: str) -> dict[str, Any]:
    """An InferenceGroup as the topology controller reads it (only its topologyName matters)."""
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "metadata": {"name": name, "namespace": namespace},
            "spec": {"topologyName": topology_name, "roles": []}}


def typed(obj: dict[str, Any]) -> ClusterTopology:
    return ClusterTopology.model_validate({k: v for k, v in obj.items() if k != "status"})


def node_models(nodes: Iterable[dict[str, Any]]) -> list[Node]:
    return [Node.model_validate(n) for n in nodes]


def rack_nodes(blocks: int, racks: int, hosts: int, prefix: str = "n") -> list[dict[str, Any]]:
    out = []
    for b in range(blocks):
        for r in range(racks):
            for h in range(hosts):
                out.append(node(f"{prefix}-{b}-{r}-{h}", block=f"b{b}", rack=f"r{r}"))
    return out


def spec_and_labels(objects: Iterable[dict[str, Any]]) -> dict[tuple[str, str], tuple[Any, dict[str, str]]]:
    """(kind, name) -> (spec, labels): what the controller keeps of each object."""
    return {(o["kind"], o["metadata"]["name"]): (o.get("spec"), o["metadata"].get("labels", {})) for o in objects}
