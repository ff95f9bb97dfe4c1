"""The Kubernetes adapter as a contract-suite world: `kube_over_http(base_url)`.

A `KubeCluster` reads from informer caches, which trail the server; the contract suite
writes and at once reads back. `ReadYourWrites.snapshot()` therefore waits, after any
write of its own, until every informer's cache holds exactly what a fresh list of the
server holds, (namespace, name) -> resourceVersion for every object, and every optional
kind's informer agrees with the server on whether the kind is served (`served()` waits
alike, so a CRD created or deleted is seen at once). Versions are only
compared for equality (they are opaque), and a delete, which has no version to wait for,
and what the server did in its wake (a cascade) are covered alike. The production adapter
reads its own writes but not the server's side effects at once (docs/kube.md).

For the contract suite (tests/contract/conftest.py), against `tandem apiserver`:

    def _kube_over_http():
        server = ...start tandem apiserver...
        world = kube_over_http(server.url)
        yield world
        world.stop()
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Mapping

from tandem.backends.delegated_kinds import DELEGATED_BACKENDS, delegated_keys
from tandem.cluster.ports import EventType, NotFound, Object, ObjectRef, Propagation
from tandem.kube import kinds
from tandem.kube.cluster import KubeCluster
from tandem.kube.rest import Rest

# One kind name in two groups (KAI's and Kueue's Topology), named by their qualified keys.
TWINS = (
    kinds.register(kinds.Kind("Topology", "kai.scheduler/v1alpha1", "topologies", namespaced=False, qualified=True)),
    kinds.register(kinds.Kind("Topology", "kueue.x-k8s.io/v1beta2", "topologies", namespaced=False, qualified=True)),
)

# What the contract suite reads: a pass's kinds and Events, and the twins; the Lease is read live.
CONTRACT_KINDS = ("InferenceGroup", "ClusterTopology", "Node", "Pod", "Service", "ConfigMap", "Event", *(k.key for k in TWINS))
# Watched as the operator watches them: served only while their CRDs are installed.
OPTIONAL_KINDS = delegated_keys(DELEGATED_BACKENDS)


class ReadYourWrites(KubeCluster):
    """A KubeCluster whose `snapshot()` first waits (up to `catch_up` seconds) for its own writes."""

    def __init__(self, rest: Rest, *, catch_up: float = 5.0, **options: Any):
        super().__init__(rest, **options)
        self.catch_up = catch_up
        self._dirty = True

    def snapshot(self):  # type: ignore[no-untyped-def]
        if self._dirty:
            self.wait_caught_up(self.catch_up)
            self._dirty = False
        return super().snapshot()

    def served(self, kinds: Iterable[str]) -> frozenset[str]:
        if self._dirty:
            self.wait_caught_up(self.catch_up)
            self._dirty = False
        return super().served(kinds)

    def wait_caught_up(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            behind = self.behind()
            if not behind:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the informers did not catch up with the server in {timeout}s: {behind}")
            time.sleep(0.005)

    def behind(self) -> dict[str, dict[str, tuple[str | None, str | None]]]:
        """Per kind, the objects whose cached version differs from the server's: name -> (cached, server)."""
        out: dict[str, dict[str, tuple[str | None, str | None]]] = {}
        for informer in self.informers:
            try:
                answer = self.rest.request("GET", informer.kind.path(informer.namespace))
            except NotFound:
                if not informer.optional:
                    raise
                answer = None  # not served: its informer must say so
            server = {_key(o): _version(o) for o in (answer or {}).get("items") or []}
            with self._lock:
                cached = {key: _version(o) for key, o in informer.items.items()}
                serving = informer.serving
            if serving is not (answer is not None):
                out.setdefault(informer.kind.key, {})["(served)"] = (str(serving), str(answer is not None))
            if server != cached:
                diff = {f"{ns}/{name}": (cached.get((ns, name)), server.get((ns, name))) for ns, name in set(server) | set(cached)
                        if cached.get((ns, name)) != server.get((ns, name))}
                out.setdefault(informer.kind.key, {}).update(diff)
        return out

    # Every write marks the next snapshot as one to wait for.

    def create(self, obj: Object) -> Object:
        self._dirty = True
        return super().create(obj)

    def patch(self, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any], *, resource_version: str | None = None) -> Object:
        self._dirty = True
        return super().patch(kind, namespace, name, patch, resource_version=resource_version)

    def patch_status(self, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any], *, resource_version: str | None = None) -> Object:
        self._dirty = True
        return super().patch_status(kind, namespace, name, patch, resource_version=resource_version)

    def delete(self, kind: str, namespace: str | None, name: str, *, uid: str | None = None, resource_version: str | None = None,
               propagation: Propagation = "Background") -> None:
        self._dirty = True
        super().delete(kind, namespace, name, uid=uid, resource_version=resource_version, propagation=propagation)

    def record_event(self, involved: ObjectRef, type: EventType, reason: str, message: str) -> None:
        self._dirty = True
        super().record_event(involved, type, reason, message)


def kube_over_http(base_url: str, *, kinds: Iterable[str] = CONTRACT_KINDS, optional_kinds: Iterable[str] = OPTIONAL_KINDS,
                   catch_up: float = 5.0, sync: float = 10.0, **options: Any) -> ReadYourWrites:
    """A started `ReadYourWrites` cluster against the API at `base_url` (no authentication),
    its informers listed; `stop()` it when done."""
    world = ReadYourWrites(Rest.connect(base_url, trust_env=False), kinds=kinds, optional_kinds=optional_kinds, catch_up=catch_up, **options)
    world.start()
    if not world.wait_synced(sync):
        world.stop()
        raise AssertionError(f"the informers did not list {base_url} within {sync}s")
    return world


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
