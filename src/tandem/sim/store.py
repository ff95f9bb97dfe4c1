"""An in-memory API server: small, and exact about the semantics the controller relies on.

- Every write bumps one global `resourceVersion`; `update`/`patch`/`delete` with a stale
  one fail with `Conflict` (compare-and-swap).
- `metadata.generation` counts spec changes only; status and metadata changes keep it.
- Kinds with a status subresource (Pod, Node, InferenceGroup) ignore `status` on `update`
  and change only `status` on `update_status`.
- `delete` of an object with finalizers sets `deletionTimestamp` and keeps it until the
  last finalizer is removed; finalizers cannot be added once deletion started.
- Removing an object deletes its dependents (owner references by uid), recursively.
- `watch(kind, since)` returns every change after `since`; a `since` older than the
  retained history raises `Gone`, so the caller re-lists, as with a real server.
- Pods: `spec` is immutable except removing scheduling gates, and adding `nodeSelector`
  entries while the pod is still gated (KEP-3838); `bind` sets `spec.nodeName` and is
  refused while the pod is gated or already bound.

Time comes from an injected clock (the simulator's, in seconds), never from the wall, and
is written as RFC 3339 text like a real server writes it.
"""

from __future__ import annotations

import copy
from collections import deque
from typing import Any, Callable, Mapping

from tandem.controller.cluster import AlreadyExists, Conflict, Event, Gone, Invalid, ListResult, NotFound, Object, rfc3339
from tandem.controller.selectors import matches

STATUS_SUBRESOURCE = frozenset({"Pod", "Node", "InferenceGroup"})
CLUSTER_SCOPED = frozenset({"Node", "ClusterTopology"})
HISTORY = 10_000


class MemoryStore:
    def __init__(self, clock: Callable[[], float] = lambda: 0.0, history: int = HISTORY):
        self._clock = clock
        self._objects: dict[tuple[str, str, str], Object] = {}
        self._events: deque[Event] = deque(maxlen=history)
        self._version = 0
        self._uids = 0

    # ------------------------------------------------------------------ reads

    def get(self, kind: str, namespace: str | None, name: str) -> Object:
        obj = self._objects.get(self._key(kind, namespace, name))
        if obj is None:
            raise NotFound(f"{kind} {self._where(namespace, name)} not found")
        return copy.deepcopy(obj)

    def list(self, kind: str, namespace: str | None = None, selector: str | Mapping[str, str] | None = None) -> ListResult:
        items = [
            copy.deepcopy(obj)
            for (k, ns, _), obj in sorted(self._objects.items())
            if k == kind and (namespace is None or ns == namespace) and matches(selector, obj["metadata"].get("labels", {}))
        ]
        return ListResult(items, self._version)

    def watch(
        self, kind: str, since: int, namespace: str | None = None, selector: str | Mapping[str, str] | None = None
    ) -> list[Event]:
        if self._events and since < self._events[0].resource_version - 1:
            raise Gone(f"too old resource version: {since} (oldest kept: {self._events[0].resource_version})")
        return [
            Event(e.type, copy.deepcopy(e.object), e.resource_version)
            for e in self._events
            if e.resource_version > since
            and e.object["kind"] == kind
            and (namespace is None or e.object["metadata"].get("namespace") == namespace)
            and matches(selector, e.object["metadata"].get("labels", {}))
        ]

    @property
    def resource_version(self) -> int:
        return self._version

    # ------------------------------------------------------------------ writes

    def create(self, obj: Object) -> Object:
        obj = copy.deepcopy(obj)
        kind, meta = obj.get("kind"), obj.setdefault("metadata", {})
        if not kind or not meta.get("name"):
            raise Invalid("kind and metadata.name are required")
        if kind not in CLUSTER_SCOPED:
            meta.setdefault("namespace", "default")
        key = self._key(kind, meta.get("namespace"), meta["name"])
        if key in self._objects:
            raise AlreadyExists(f"{kind} {self._where(meta.get('namespace'), meta['name'])} already exists")
        if kind == "Pod" and obj.get("spec", {}).get("nodeName") and obj.get("spec", {}).get("schedulingGates"):
            raise Invalid("a pod with scheduling gates cannot be created bound to a node")
        self._uids += 1
        meta["uid"] = f"uid-{self._uids:08d}"
        meta["creationTimestamp"] = self._now()
        meta["generation"] = 1
        meta.pop("deletionTimestamp", None)
        return self._write(key, obj, "ADDED")

    def update(self, obj: Object) -> Object:
        """Replace the object (not its status, for kinds with a status subresource)."""
        current = self._current(obj)
        new = copy.deepcopy(obj)
        if obj["kind"] in STATUS_SUBRESOURCE:
            if "status" in current:
                new["status"] = copy.deepcopy(current["status"])
            else:
                new.pop("status", None)
        return self._replace(current, new)

    def update_status(self, obj: Object) -> Object:
        """Change only `status` (the status subresource)."""
        current = self._current(obj)
        new = copy.deepcopy(current)
        new["status"] = copy.deepcopy(obj.get("status", {}))
        return self._replace(current, new)

    def patch(
        self, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any], resource_version: str | None = None
    ) -> Object:
        """JSON merge patch (RFC 7386) of everything but status; optional resourceVersion precondition."""
        current = self.get(kind, namespace, name)
        if resource_version is not None and current["metadata"]["resourceVersion"] != resource_version:
            raise Conflict(self._stale(kind, namespace, name))
        new = _merge(copy.deepcopy(current), {k: v for k, v in patch.items() if k != "status"})
        new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return self._replace(current, new)

    def delete(self, kind: str, namespace: str | None, name: str, resource_version: str | None = None) -> None:
        current = self.get(kind, namespace, name)
        if resource_version is not None and current["metadata"]["resourceVersion"] != resource_version:
            raise Conflict(self._stale(kind, namespace, name))
        if current["metadata"].get("finalizers"):
            if not current["metadata"].get("deletionTimestamp"):
                current["metadata"]["deletionTimestamp"] = self._now()
                self._write(self._key(kind, namespace, name), current, "MODIFIED")
            return
        self._remove(self._key(kind, namespace, name))

    def bind(self, namespace: str, pod: str, node: str) -> Object:
        current = self.get("Pod", namespace, pod)
        spec = current.setdefault("spec", {})
        if spec.get("schedulingGates"):
            gates = ", ".join(g.get("name", "?") for g in spec["schedulingGates"])
            raise Conflict(f"pod {namespace}/{pod} is gated ({gates}); it cannot be bound")
        if spec.get("nodeName"):
            raise Conflict(f"pod {namespace}/{pod} is already bound to {spec['nodeName']}")
        if ("Node", "", node) not in self._objects:
            raise NotFound(f"node {node} not found")
        spec["nodeName"] = node
        return self._write(self._key("Pod", namespace, pod), current, "MODIFIED")

    # ------------------------------------------------------------------ internals

    def _current(self, obj: Object) -> Object:
        meta = obj.get("metadata", {})
        current = self.get(obj["kind"], meta.get("namespace"), meta.get("name", ""))
        if meta.get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise Conflict(self._stale(obj["kind"], meta.get("namespace"), meta.get("name", "")))
        return current

    def _replace(self, current: Object, new: Object) -> Object:
        kind = current["kind"]
        old_meta, meta = current["metadata"], new.setdefault("metadata", {})
        for field in ("uid", "creationTimestamp", "deletionTimestamp", "generation"):
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        if meta.get("name") != old_meta["name"] or meta.get("namespace") != old_meta.get("namespace"):
            raise Invalid("metadata.name and metadata.namespace are immutable")
        if old_meta.get("deletionTimestamp") and set(meta.get("finalizers", [])) - set(old_meta.get("finalizers", [])):
            raise Invalid("finalizers cannot be added to an object that is being deleted")
        if kind == "Pod":
            _check_pod_spec(current.get("spec", {}), new.get("spec", {}))
        if new.get("spec") != current.get("spec"):
            meta["generation"] = old_meta.get("generation", 1) + 1
        key = self._key(kind, old_meta.get("namespace"), old_meta["name"])
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(key)
            return new
        return self._write(key, new, "MODIFIED")

    def _write(self, key: tuple[str, str, str], obj: Object, kind_of_event: str) -> Object:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        self._objects[key] = obj
        self._events.append(Event(kind_of_event, copy.deepcopy(obj), self._version))  # type: ignore[arg-type]
        return copy.deepcopy(obj)

    def _remove(self, key: tuple[str, str, str]) -> None:
        obj = self._objects.pop(key)
        self._version += 1
        self._events.append(Event("DELETED", copy.deepcopy(obj), self._version))
        uid = obj["metadata"]["uid"]
        dependents = [
            k for k, o in sorted(self._objects.items()) if any(ref.get("uid") == uid for ref in o["metadata"].get("ownerReferences", []))
        ]
        for dependent in dependents:
            if dependent in self._objects:
                kind, namespace, name = dependent
                self.delete(kind, namespace or None, name)

    def _now(self) -> str:
        """The injected clock (seconds) as the RFC 3339 text a real API server writes."""
        return rfc3339(self._clock())

    def _key(self, kind: str, namespace: str | None, name: str) -> tuple[str, str, str]:
        return (kind, "" if kind in CLUSTER_SCOPED else (namespace or "default"), name)

    @staticmethod
    def _where(namespace: str | None, name: str) -> str:
        return f"{namespace}/{name}" if namespace else name

    def _stale(self, kind: str, namespace: str | None, name: str) -> str:
        return f"{kind} {self._where(namespace, name)} was modified since it was read; re-read and retry"


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: null deletes, objects merge, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge(target.get(key), value)
    return target


def _check_pod_spec(old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """Pod spec is immutable, but for gate removal and nodeSelector additions while gated."""
    old_gates = [g.get("name") for g in old.get("schedulingGates", [])]
    new_gates = [g.get("name") for g in new.get("schedulingGates", [])]
    if set(new_gates) - set(old_gates):
        raise Invalid("spec.schedulingGates: gates can only be removed after creation")
    old_selector, new_selector = dict(old.get("nodeSelector", {})), dict(new.get("nodeSelector", {}))
    if old_selector != new_selector:
        if not old_gates:
            raise Invalid("spec.nodeSelector: can only change while the pod is gated")
        if any(new_selector.get(k) != v for k, v in old_selector.items()):
            raise Invalid("spec.nodeSelector: existing entries cannot change, only new ones be added")
    rest_old = {k: v for k, v in old.items() if k not in ("schedulingGates", "nodeSelector", "nodeName")}
    rest_new = {k: v for k, v in new.items() if k not in ("schedulingGates", "nodeSelector", "nodeName")}
    if rest_old != rest_new:
        raise Invalid("spec: pod spec is immutable apart from scheduling gates and nodeSelector")
    if old.get("nodeName") != new.get("nodeName"):
        raise Invalid("spec.nodeName: set by binding only")
