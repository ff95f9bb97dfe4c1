"""A small cluster in the in-memory store, a toy kubelet, and a writer that fails on cue:
what the controller tests drive passes with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from support.builders import cluster, group, role
from tandem.api.naming import GPU_RESOURCE
from tandem.api.naming import GATE, HOSTNAME_LABEL
from tandem.api.quantity import MILLI, parse_quantity
from tandem.cluster.memory import MemoryStore
from tandem.cluster.pods import pod_gpus
from tandem.cluster.ports import ObjectRef
from tandem.errors import ApiError


def world(*groups: dict[str, Any], shape: str = "block=2,rack=2,host=8") -> MemoryStore:
    store = MemoryStore()
    for obj in cluster(shape):
        store.create(obj)
    for g in groups:
        store.create(g)
    return store


def design_group(name: str = "llama", **kw: Any) -> dict[str, Any]:
    """DESIGN.md's example: 4 prefill (1 pod, 8 GPUs) and 2 decode (2 pods of 8 GPUs) per
    unit, in one block, rack preferred, rolled out 2 prefill : 1 decode per step."""
    g = group(
        name,
        [role("prefill", 4, 1, gpus=8, required="host"), role("decode", 2, 1, gpus=8, pods=2, required="rack")],
        required="block",
        preferred="rack",
        affinity=[{"from": "prefill", "to": "decode", "level": "rack", "mode": "Preferred"}],
        **kw,
    )
    g["spec"]["coordination"] = {"rollout": {"steps": {"prefill": 2, "decode": 1}}}
    return g


def settle(cluster_: Any, store: MemoryStore, start: float = 0.0, passes: int = 40) -> float:
    """Passes (each followed by the kubelet) until nothing changes; returns the time reached."""
    from tandem.controller.reconcile import reconcile

    now = start
    for _ in range(passes):
        report = reconcile(cluster_, now)
        moved = kubelet(store)
        now += 1.0
        if moved == 0 and report.writes == 0 and not report.errors:
            break
    return now


def kubelet(store: MemoryStore) -> int:
    """Bind every ungated pod to the node tandem chose; make every bound pod Ready."""
    changes = 0
    for pod in store.list("Pod"):
        spec = pod["spec"]
        gated = any(g.get("name") == GATE for g in spec.get("schedulingGates", []))
        if not gated and not spec.get("nodeName") and spec.get("nodeSelector", {}).get(HOSTNAME_LABEL):
            store.bind(pod["metadata"]["namespace"], pod["metadata"]["name"], spec["nodeSelector"][HOSTNAME_LABEL])
            changes += 1
    return changes + ready_bound(store)


def ready_bound(store: MemoryStore) -> int:
    """Make every bound pod without conditions Running and Ready; the pods changed."""
    changes = 0
    for pod in store.list("Pod"):
        if pod["spec"].get("nodeName") and not pod.get("status", {}).get("conditions"):
            pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            store.update_status(pod)
            changes += 1
    return changes


def over_committed(store: MemoryStore) -> list[str]:
    """Nodes whose pods (bound, or placed by tandem and not yet bound) ask for more GPUs than they have."""
    used: dict[str, int] = {}
    for pod in store.list("Pod"):
        spec = pod["spec"]
        gated = any(g.get("name") == GATE for g in spec.get("schedulingGates", []))
        node = spec.get("nodeName") or (None if gated else spec.get("nodeSelector", {}).get(HOSTNAME_LABEL))
        if node and pod.get("status", {}).get("phase") != "Failed":
            used[node] = used.get(node, 0) + pod_gpus(pod)
    return [
        n["metadata"]["name"]
        for n in store.list("Node")
        if used.get(n["metadata"]["name"], 0) > parse_quantity(n["status"]["allocatable"].get(GPU_RESOURCE, 0)) // MILLI
    ]


class Crash(BaseException):
    """The controller process dies here (not an API error: nothing catches it)."""


@dataclass
class FaultyWriter:
    """The store's ports, with a fault on cue: `fail(n)` returns the error (or Crash) to
    raise instead of the n-th write (0-based, counted over creates, patches, status
    patches and deletes), or None to let it through. Reads go to the store."""

    store: MemoryStore
    fail: Callable[[int, str], BaseException | None] = lambda n, verb: None
    writes: int = 0
    log: list[str] = field(default_factory=list)

    def snapshot(self):
        return self.store.snapshot()

    def served(self, kinds):
        return self.store.served(kinds)

    def _gate(self, verb: str, what: str) -> None:
        error = self.fail(self.writes, verb)
        self.writes += 1
        if error is not None:
            self.log.append(f"{verb} {what}: {type(error).__name__}")
            raise error

    def create(self, obj):
        self._gate("create", obj["metadata"]["name"])
        return self.store.create(obj)

    def patch(self, kind, namespace, name, patch, *, resource_version=None):
        self._gate("patch", name)
        return self.store.patch(kind, namespace, name, patch, resource_version=resource_version)

    def patch_status(self, kind, namespace, name, patch, *, resource_version=None):
        self._gate("patch_status", name)
        return self.store.patch_status(kind, namespace, name, patch, resource_version=resource_version)

    def delete(self, kind, namespace, name, *, uid=None, resource_version=None, propagation="Background"):
        self._gate("delete", name)
        return self.store.delete(kind, namespace, name, uid=uid, resource_version=resource_version, propagation=propagation)

    def record_event(self, involved: ObjectRef, type, reason, message):
        return self.store.record_event(involved, type, reason, message)


def api(error: type[ApiError], message: str = "injected") -> ApiError:
    return error(message)
