"""An in-memory API server: small, and exact about the semantics the controller relies on.

- It serves the controller's ports (`tandem.cluster.ports`): `snapshot()` is a
  `Reader` frozen at one resourceVersion (stored objects are never changed in place, and
  the table of them is a persistent map, so it costs nothing), and the store itself is the `Writer`.
- Every write bumps one global `resourceVersion` (opaque text to callers); `update`,
  `patch`, `patch_status` and `delete` with a stale one fail with `Conflict`
  (compare-and-swap), and so does `delete` with a uid that is not the object's.
- `metadata.generation` counts spec changes only; status and metadata changes keep it.
- Kinds with a status subresource (Pod, Node, InferenceGroup, ClusterTopology by default) ignore `status`
  on `update` and change only `status` on `update_status`. Which kinds have one, and which
  are cluster-scoped, is per store: `register_kind` adds one (the local API server
  registers each CustomResourceDefinition's kind).
- `served(kinds)` (the `Discovery` port) says which kinds it serves: the built-in ones
  (`BUILT_IN`: what every Kubernetes API server serves, and tandem's own kinds) and
  those registered; `forget_kind` stops serving one (its CRD was deleted), as a world
  without a backend's CRDs does not serve that backend's kinds.
- Objects are keyed by kind name, or by `Kind.group` for a kind registered under that
  qualified key (`cluster/kind_keys.py`): KAI's and Kueue's `Topology` are two kinds here,
  `Topology.kai.scheduler` and `Topology.kueue.x-k8s.io`. Every method's `kind` is that key.
- `delete` of an object with finalizers sets `deletionTimestamp` and keeps it until the
  last finalizer is removed; finalizers cannot be added once deletion started.
  `delete_gracefully` marks a pod as a real server does for a running one (deletion
  timestamp and grace period, status unchanged); a later `delete` removes it.
- Removing an object deletes its dependents (owner references by uid), recursively,
  unless the delete asks for `Orphan` propagation (then their references are dropped).
- `record_event` keeps one `Event` object per (object, type, reason, message) and
  counts repeats, as the Kubernetes event recorder aggregates them.
- `watch(kind, since)` returns every change after `since`; a `since` older than the
  retained history raises `Gone`, so the caller re-lists, as with a real server.
- A snapshot also says which objects changed since an earlier one (`changes_since`, from a
  journal of keys), so a controller pass reads what changed, not everything
  (`cluster/index.py`). Taking one costs nothing: the table is an `immutables.Map`, which
  a write replaces by a new one sharing all but a few nodes with the old.
- A list answers in key order (kind, namespace, name), from each kind's keys kept sorted
  and patched from the journal (`cluster/key_order.py`), a namespace a run of them.
- Watching (`watch`) and binding (`bind`) are the world's, not the controller's.
- Pods: `spec` is immutable except removing scheduling gates, and adding `nodeSelector`
  entries while the pod is still gated (KEP-3838); `bind` sets `spec.nodeName` and is
  refused while the pod is gated or already bound.

Time comes from an injected clock (the simulator's, in seconds), never from the wall, and
is written as RFC 3339 text like a real server writes it.
"""

from __future__ import annotations

import builtins
import copy
import hashlib
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any, Callable, Collection, Hashable, Iterable, Literal, Mapping

import immutables

from tandem.api.merge import merge_patch
from tandem.api.timestamps import rfc3339
from tandem.cluster.key_order import KeyOrder, in_namespace
from tandem.cluster.kind_keys import is_qualified, object_key
from tandem.cluster.ports import AlreadyExists, Conflict, EventType, Gone, Invalid, NotFound, Object, ObjectRef, Propagation, Selector
from tandem.cluster.selectors import matches, matches_fields, parse, parse_fields

# A store's defaults; `MemoryStore.register_kind` adds to its own copies.
STATUS_SUBRESOURCE = frozenset({"Pod", "Node", "InferenceGroup", "ClusterTopology"})
CLUSTER_SCOPED = frozenset({"Node", "ClusterTopology", "Namespace", "CustomResourceDefinition"})
HISTORY = 10_000
# Served by every store without registering (`served`): Kubernetes' own kinds and tandem's.
BUILT_IN = frozenset({
    "Pod", "Node", "Namespace", "Service", "Endpoints", "ConfigMap", "Secret", "PodTemplate", "Event", "Lease",
    "PriorityClass", "CustomResourceDefinition", "ValidatingWebhookConfiguration", "InferenceGroup", "ClusterTopology",
})
EVENT_SOURCE = "tandem"


@dataclass(frozen=True)
class Event:
    """One change, as a watch delivers it."""

    type: Literal["ADDED", "MODIFIED", "DELETED"]
    object: Object
    resource_version: str


@dataclass(frozen=True)
class ListResult:
    items: list[Object]
    resource_version: str  # watch from here to see every later change


class Snapshot:
    """A `Reader` over the store as it was at one resourceVersion; objects are shared, read-only."""

    def __init__(
        self,
        objects: Mapping[tuple[str, str, str], Object],
        version: int,
        cluster_scoped: frozenset[str] = CLUSTER_SCOPED,
        journal: deque[tuple[int, tuple[str, str, str]]] | None = None,
        order: KeyOrder | None = None,
        kind_keys: Callable[[str, int], Collection[tuple[str, str, str]] | None] = lambda kind, version: None,
    ):
        self._objects = objects
        self._cluster_scoped = cluster_scoped
        self._version = version
        self._journal = journal
        self.resource_version = str(version)
        self._order = order if order is not None else KeyOrder(journal if journal is not None else deque())
        # The store's keys of a kind while it is still at this version (else None): what a
        # first list sorts, instead of picking the kind's keys out of every stored object.
        self._kind_keys = kind_keys

    def changes_since(self, cursor: Hashable | None) -> tuple[Hashable, set[tuple[str, str, str]] | None]:
        """(this snapshot's cursor, the keys (kind, namespace or "", name) written or deleted
        after `cursor` up to this snapshot); None for the keys when `cursor` is None or older
        than the journal keeps: then the caller lists everything."""
        journal, version = self._journal, self._version
        if cursor is None or journal is None or not isinstance(cursor, int) or cursor > version:
            return version, None
        keys: set[tuple[str, str, str]] = set()
        for at, key in reversed(journal):
            if at <= cursor:
                return version, keys
            if at <= version:  # later writes are not in this snapshot
                keys.add(key)
        return version, (keys if cursor >= version or (journal and journal[0][0] <= cursor + 1) else None)

    def get(self, kind: str, namespace: str | None, name: str) -> Object:
        obj = self._objects.get(_key(kind, namespace, name, self._cluster_scoped))
        if obj is None:
            raise NotFound(f"{kind} {_where(namespace, name)} not found")
        return obj

    def list(self, kind: str, namespace: str | None = None, labels: Selector = None, fields: Selector = None) -> list[Object]:
        objects = self._objects
        keys = self._order.keys(kind, self._version, objects, lambda: _first_known(self._kind_keys(kind, self._version), objects))
        if namespace is not None:
            keys = in_namespace(keys, kind, namespace)
        return _matching(((key, objects[key]) for key in keys), namespace, labels, fields)


class MemoryStore:
    def __init__(
        self,
        clock: Callable[[], float] = lambda: 0.0,
        history: int = HISTORY,
        *,
        status_subresource: Iterable[str] = STATUS_SUBRESOURCE,
        cluster_scoped: Iterable[str] = CLUSTER_SCOPED,
    ):
        self._clock = clock
        self._status = set(status_subresource)
        self._cluster_scoped = frozenset(cluster_scoped)
        self._qualified: frozenset[str] = frozenset()  # kinds keyed `Kind.group`
        self._registered: set[str] = set()  # served besides BUILT_IN (`register_kind`)
        # Persistent (a hash array mapped trie): a snapshot holds the table as it is, and a write
        # makes a new one sharing all but a few nodes with it, where a dict had to be copied
        # whole on the first write after each snapshot (400,000 objects at 65,536 nodes).
        self._objects: immutables.Map[tuple[str, str, str], Object] = immutables.Map()
        self._events: deque[Event] = deque(maxlen=history)
        self._journal: deque[tuple[int, tuple[str, str, str]]] = deque(maxlen=history)  # (version, key) of each write
        self._owned: dict[str, set[tuple[str, str, str]]] = defaultdict(set)  # owner uid -> its dependents' keys
        # kind -> its objects' keys: a list of one kind (a webhook configuration on every write,
        # a group's pods) looks at that kind's keys, not at every stored object's
        self._by_kind: dict[str, set[tuple[str, str, str]]] = defaultdict(set)
        self._order = KeyOrder(self._journal)  # each kind's keys in list order, patched from the journal
        self._version = 0
        self._uids = 0

    # ------------------------------------------------------------------ kinds

    def register_kind(self, kind: str, *, cluster_scoped: bool, status: bool) -> None:
        """Serve `kind` as cluster-scoped or namespaced, with or without a status subresource.
        A qualified `kind` (`Topology.kai.scheduler`) keys objects of that kind in that group
        apart from same-named kinds of other groups. Its scope cannot change while objects
        of it are stored (their keys depend on it)."""
        if cluster_scoped != (kind in self._cluster_scoped) and self._by_kind.get(kind):
            raise Invalid(f"{kind}: the scope of a kind cannot change while objects of it exist")
        self._cluster_scoped = self._cluster_scoped | {kind} if cluster_scoped else self._cluster_scoped - {kind}
        if status:
            self._status.add(kind)
        else:
            self._status.discard(kind)
        if is_qualified(kind):
            self._qualified = self._qualified | {kind}
        self._registered.add(kind)

    def forget_kind(self, kind: str) -> None:
        """Stop serving `kind` (its CRD is gone): `served` leaves it out. Its scope, status
        subresource and key stay as registered, so registering it again serves it alike."""
        self._registered.discard(kind)

    def served(self, kinds: Iterable[str]) -> frozenset[str]:
        """Which of `kinds` this store serves: the built-in ones and those registered."""
        return frozenset(kind for kind in kinds if kind in BUILT_IN or kind in self._registered)

    def serves(self, kind: str) -> bool:
        """Whether `kind` was registered under its qualified key (`register_kind`): how the
        simulator knows which delegated schedulers' kinds its world has."""
        return kind in self._qualified

    def key_of(self, obj: Mapping[str, Any]) -> str:
        """The key an object is stored under: its kind, or `Kind.group` if registered so."""
        return object_key(obj, self._qualified)

    def is_cluster_scoped(self, kind: str) -> bool:
        return kind in self._cluster_scoped

    def has_status(self, kind: str) -> bool:
        """Whether `kind` has a status subresource."""
        return kind in self._status

    # ------------------------------------------------------------------ reads

    def snapshot(self) -> Snapshot:
        return Snapshot(self._objects, self._version, self._cluster_scoped, self._journal, self._order, self._kind_keys)

    def _kind_keys(self, kind: str, version: int) -> Collection[tuple[str, str, str]] | None:
        return self._by_kind.get(kind, ()) if version == self._version else None

    def get(self, kind: str, namespace: str | None, name: str) -> Object:
        return copy.deepcopy(self._stored(kind, namespace, name))

    def _stored(self, kind: str, namespace: str | None, name: str) -> Object:
        """The stored object itself: read only (a write replaces it, never changes it)."""
        obj = self._objects.get(self._key(kind, namespace, name))
        if obj is None:
            raise NotFound(f"{kind} {self._where(namespace, name)} not found")
        return obj

    def list(self, kind: str, namespace: str | None = None, labels: Selector = None, fields: Selector = None) -> list[Object]:
        """Copies of the matching objects (callers may change them and write them back)."""
        objects = self._objects
        keys = self._order.keys(kind, self._version, objects, lambda: self._by_kind.get(kind, ()))
        if namespace is not None:
            keys = in_namespace(keys, kind, namespace)
        return copy.deepcopy(_matching(((key, objects[key]) for key in keys), namespace, labels, fields))

    def list_with_version(self, kind: str, namespace: str | None = None, labels: Selector = None) -> ListResult:
        """A list and the resourceVersion to watch from, as an informer starts."""
        return ListResult(self.list(kind, namespace, labels), str(self._version))

    def watch(
        self, kind: str, since: str, namespace: str | None = None, selector: str | Mapping[str, str] | None = None
    ) -> builtins.list[Event]:
        after = int(since)  # this world's versions count up; callers treat them as opaque
        if self._events and after < int(self._events[0].resource_version) - 1:
            raise Gone(f"too old resource version: {since} (oldest kept: {self._events[0].resource_version})")
        # Events are kept in version order: read back from the newest to the first one
        # already seen, not the whole history (a watch looks after every write).
        newer: builtins.list[Event] = []
        for e in reversed(self._events):
            if int(e.resource_version) <= after:
                break
            newer.append(e)
        return [
            Event(e.type, copy.deepcopy(e.object), e.resource_version)
            for e in reversed(newer)
            if self.key_of(e.object) == kind
            and (namespace is None or e.object["metadata"].get("namespace") == namespace)
            and matches(selector, e.object["metadata"].get("labels", {}))
        ]

    @property
    def resource_version(self) -> str:
        return str(self._version)

    # ------------------------------------------------------------------ writes

    def create(self, obj: Object) -> Object:
        obj = copy.deepcopy(obj)
        kind, meta = self.key_of(obj), obj.setdefault("metadata", {})
        if not kind or not meta.get("name"):
            raise Invalid("kind and metadata.name are required")
        if kind not in self._cluster_scoped:
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
        if self.key_of(obj) in self._status:
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
        self, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any], *, resource_version: str | None = None
    ) -> Object:
        """JSON merge patch (RFC 7386) of everything but status; optional resourceVersion precondition."""
        current = self._stored(kind, namespace, name)
        self._precondition(current, resource_version, None)
        body = {k: v for k, v in patch.items() if k != "status" or kind not in self._status}
        new = merge_patch(current, body)  # new containers along the patch, the rest shared
        new["metadata"] = {**new.get("metadata", {}), "resourceVersion": current["metadata"]["resourceVersion"]}
        return self._replace(current, new)

    def patch_status(
        self, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any], *, resource_version: str | None = None
    ) -> Object:
        """JSON merge patch of the `/status` subresource: only `status` changes."""
        if kind not in self._status:
            raise NotFound(f"{kind} has no status subresource")
        current = self._stored(kind, namespace, name)
        self._precondition(current, resource_version, None)
        new = {**current, "metadata": dict(current["metadata"])}  # the rest shared, never changed in place
        merged = merge_patch(current.get("status") or {}, patch.get("status", {}))
        if merged:
            new["status"] = merged
        else:
            new.pop("status", None)
        if new == current:
            return copy.deepcopy(current)  # nothing changed: no new resourceVersion, as a real server
        return self._replace(current, new)

    def delete(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation: Propagation = "Background",
    ) -> None:
        current = self.get(kind, namespace, name)
        self._precondition(current, resource_version, uid)
        if current["metadata"].get("finalizers"):
            if not current["metadata"].get("deletionTimestamp") or current["metadata"].get("deletionGracePeriodSeconds"):
                current["metadata"].setdefault("deletionTimestamp", self._now())
                if current["metadata"].get("deletionGracePeriodSeconds"):
                    current["metadata"]["deletionGracePeriodSeconds"] = 0  # the grace is over: the finalizers alone hold it
                self._write(self._key(kind, namespace, name), current, "MODIFIED")
            return
        self._remove(self._key(kind, namespace, name), orphan=propagation == "Orphan")

    def delete_gracefully(self, kind: str, namespace: str | None, name: str, grace_seconds: int, *, uid: str | None = None) -> Object:
        """Begin a graceful deletion, as the real server does for a running pod: set
        `deletionTimestamp` (now + the grace period) and `deletionGracePeriodSeconds`, one
        MODIFIED event, the status unchanged; the object stays until `delete` removes it (the
        kubelet's part). A second request may only shorten the grace period."""
        current = self.get(kind, namespace, name)
        self._precondition(current, None, uid)
        meta = current["metadata"]
        if meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds", 0) <= grace_seconds:
            return current
        meta["deletionTimestamp"] = rfc3339(self._clock() + grace_seconds)
        meta["deletionGracePeriodSeconds"] = grace_seconds
        return self._write(self._key(kind, namespace, name), current, "MODIFIED")

    def record_event(self, involved: ObjectRef, type: EventType, reason: str, message: str) -> None:
        """One Event per (object, type, reason, message); a repeat raises its `count`."""
        namespace = involved.namespace or "default"
        digest = hashlib.sha256("\x00".join((involved.kind, involved.uid, involved.name, type, reason, message)).encode()).hexdigest()[:16]
        name = f"{involved.name}.{digest}"
        now = self._now()
        existing = self._objects.get(self._key("Event", namespace, name))
        if existing is not None:
            new = copy.deepcopy(existing)
            new["count"] = existing.get("count", 1) + 1
            new["lastTimestamp"] = now
            self._replace(existing, new)
            return
        self.create(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "kind": involved.kind,
                    "namespace": involved.namespace,
                    "name": involved.name,
                    "uid": involved.uid,
                    "apiVersion": involved.api_version,
                },
                "type": type,
                "reason": reason,
                "message": message,
                "count": 1,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "source": {"component": EVENT_SOURCE},
            }
        )

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

    def _precondition(self, current: Object, resource_version: str | None, uid: str | None) -> None:
        meta = current["metadata"]
        if uid is not None and meta.get("uid") != uid:
            raise Conflict(
                f"{current['kind']} {self._where(meta.get('namespace'), meta['name'])}: precondition failed: "
                f"uid in precondition {uid}, uid in object {meta.get('uid')}"
            )
        if resource_version is not None and meta["resourceVersion"] != resource_version:
            raise Conflict(self._stale(current["kind"], meta.get("namespace"), meta["name"]))

    def _current(self, obj: Object) -> Object:
        meta = obj.get("metadata", {})
        kind = self.key_of(obj)
        current = self.get(kind, meta.get("namespace"), meta.get("name", ""))
        if meta.get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise Conflict(self._stale(kind, meta.get("namespace"), meta.get("name", "")))
        return current

    def _replace(self, current: Object, new: Object) -> Object:
        kind = self.key_of(current)
        old_meta, meta = current["metadata"], new.setdefault("metadata", {})
        for field in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
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
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not meta.get("deletionGracePeriodSeconds"):
            self._remove(key)  # the last finalizer gone (an object being deleted gracefully waits for its kubelet)
            return new
        return self._write(key, new, "MODIFIED")

    def _write(self, key: tuple[str, str, str], obj: Object, kind_of_event: str) -> Object:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        self._index_owners(key, self._objects.get(key), obj)
        self._objects = self._objects.set(key, obj)
        self._by_kind[key[0]].add(key)
        # Stored objects are never changed in place (a write replaces them), so the history
        # shares them; `watch` hands out copies.
        self._events.append(Event(kind_of_event, obj, str(self._version)))  # type: ignore[arg-type]
        self._journal.append((self._version, key))
        return copy.deepcopy(obj)

    def _index_owners(self, key: tuple[str, str, str], old: Object | None, new: Object | None) -> None:
        for obj, add in ((old, False), (new, True)):
            for ref in (obj or {}).get("metadata", {}).get("ownerReferences", []) if obj else ():
                owner = ref.get("uid")
                if owner is None:
                    continue
                if add:
                    self._owned[owner].add(key)
                else:
                    self._owned.get(owner, set()).discard(key)

    def _remove(self, key: tuple[str, str, str], orphan: bool = False) -> None:
        obj = self._objects[key]
        self._objects = self._objects.delete(key)
        self._by_kind[key[0]].discard(key)
        self._index_owners(key, obj, None)
        self._version += 1
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(self._version)  # the deletion's version, as a real server sends it
        self._events.append(Event("DELETED", gone, str(self._version)))
        self._journal.append((self._version, key))
        uid = obj["metadata"]["uid"]
        dependents = sorted(self._owned.pop(uid, ()))
        for dependent in dependents:
            current = self._objects.get(dependent)
            if current is None or not any(ref.get("uid") == uid for ref in current["metadata"].get("ownerReferences", [])):
                continue
            kind, namespace, name = dependent
            if orphan:
                new = copy.deepcopy(current)
                kept = [r for r in current["metadata"]["ownerReferences"] if r.get("uid") != uid]
                if kept:
                    new["metadata"]["ownerReferences"] = kept
                else:
                    del new["metadata"]["ownerReferences"]
                self._replace(current, new)
            else:
                self.delete(kind, namespace or None, name)

    def _now(self) -> str:
        """The injected clock (seconds) as the RFC 3339 text a real API server writes."""
        return rfc3339(self._clock())

    def _key(self, kind: str, namespace: str | None, name: str) -> tuple[str, str, str]:
        return _key(kind, namespace, name, self._cluster_scoped)

    @staticmethod
    def _where(namespace: str | None, name: str) -> str:
        return _where(namespace, name)

    def _stale(self, kind: str, namespace: str | None, name: str) -> str:
        return f"{kind} {self._where(namespace, name)} was modified since it was read; re-read and retry"


def _key(kind: str, namespace: str | None, name: str, cluster_scoped: frozenset[str]) -> tuple[str, str, str]:
    return (kind, "" if kind in cluster_scoped else (namespace or "default"), name)


def _first_known(keys: Collection[tuple[str, str, str]] | None, objects: Mapping[tuple[str, str, str], Object]) -> Collection[tuple[str, str, str]]:
    """The kind's keys when the store could say (an empty set included), else every key."""
    return objects.keys() if keys is None else keys


def _where(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def _matching(
    items: Iterable[tuple[tuple[str, str, str], Object]], namespace: str | None, labels: Selector, fields: Selector
) -> list[Object]:
    label_requirements, field_requirements = parse(labels), parse_fields(fields)  # once per list, not per object
    if namespace is None and not label_requirements and not field_requirements:
        return [obj for _, obj in items]
    return [
        obj
        for (_, ns, _), obj in items
        if (namespace is None or ns == namespace)
        and all(r.matches(obj["metadata"].get("labels", {})) for r in label_requirements)
        and matches_fields(field_requirements, obj)
    ]


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
