"""A memory-store world for delegated groups: the scheduler kinds served, and a toy
scheduler that binds what tandem hands over (the controller's tests are about tandem's
side; the emulated schedulers of the local worlds have their own tests)."""

from __future__ import annotations

from typing import Any, Iterable

from support.builders import cluster
from support.controller_world import ready_bound
from tandem.api.naming import BACKEND_LABEL, GPU_RESOURCE
from tandem.api.quantity import MILLI, parse_quantity
from tandem.backends.delegated_kinds import DELEGATED_KINDS, PRIORITY_CLASS
from tandem.cluster.memory import MemoryStore
from tandem.cluster.pods import pod_gpus


def delegated_store(*groups: dict[str, Any], shape: str = "block=2,rack=2,host=8", backends: Iterable[str] = tuple(DELEGATED_KINDS)) -> MemoryStore:
    """Nodes of `shape`, every kind of `backends` registered (so served), then `groups`."""
    store = MemoryStore()
    for backend in backends:
        for kind in DELEGATED_KINDS[backend]:
            store.register_kind(kind.key, cluster_scoped=not kind.namespaced, status=kind.status)
    store.register_kind(PRIORITY_CLASS.key, cluster_scoped=True, status=False)
    for obj in cluster(shape):
        store.create(obj)
    for g in groups:
        store.create(g)
    return store


class Served:
    """The store as a world that serves only some kinds (`Discovery.served`)."""

    def __init__(self, store: MemoryStore, kinds: Iterable[str]):
        self.store, self.kinds = store, frozenset(kinds)

    def served(self, kinds: Iterable[str]) -> frozenset[str]:
        return frozenset(k for k in kinds if k in self.kinds)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def toy_scheduler(store: MemoryStore, hold: Iterable[str] = ()) -> int:
    """Bind every ungated pod made for a delegated backend (but those of `hold`) to the first
    node with room for its GPUs, make every bound pod Ready; the writes made."""
    held = set(hold)
    used: dict[str, int] = {}
    for pod in store.list("Pod"):
        node = pod["spec"].get("nodeName")
        if node and pod.get("status", {}).get("phase") != "Failed":
            used[node] = used.get(node, 0) + pod_gpus(pod)
    nodes = sorted(store.list("Node"), key=lambda n: n["metadata"]["name"])
    changes = 0
    for pod in sorted(store.list("Pod"), key=lambda p: p["metadata"]["name"]):
        labels, spec = pod["metadata"].get("labels") or {}, pod["spec"]
        backend = labels.get(BACKEND_LABEL)
        if backend is None or backend in held or spec.get("schedulingGates") or spec.get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            continue
        need = pod_gpus(pod)
        for node in nodes:
            name = node["metadata"]["name"]
            if used.get(name, 0) + need <= parse_quantity(node["status"]["allocatable"].get(GPU_RESOURCE, 0)) // MILLI:
                store.bind(pod["metadata"]["namespace"], pod["metadata"]["name"], name)
                used[name] = used.get(name, 0) + need
                changes += 1
                break
    return changes + ready_bound(store)
