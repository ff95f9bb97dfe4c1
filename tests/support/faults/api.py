"""One operator replica's view of the API server, with faults: the `Cluster` port the
replica's controller and leader elector speak through.

- **Crash between two writes**: `crash_after(k)` makes the k-th next write raise `Crash`
  (a `BaseException`: nothing in the operator catches it) before it reaches the server.
- **Storms**: while a storm is on (`World.storms`), each write, and each read of the Lease
  (the one object read live, as the adapter reads it), is answered with the storm's error
  with its probability: 409 Conflict, 429, 500, 503, 504 before anything is applied, or
  `504-applied`: the write is applied and the answer lost (the controller cannot know).
- **Reads that lag writes**: while a `stale` window is on, `snapshot()` is the store as it
  was `lag` seconds ago, never older than when this process started (its informers listed
  then), with this process's own successful writes laid over it, as the adapter's
  informers give read-your-writes (`tandem.kube.informer`): another writer's changes (the
  kubelet's, the user's, a former leader's) arrive late, its own never do.

Every controller delete is judged just before it is sent (`on_delete`; what it returns is
called once the delete went through), so the invariants can tell a pod replaced for a
reason from one created twice.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from support.controller_world import Crash
from tandem.cluster.memory import MemoryStore, Snapshot
from tandem.cluster.ports import EventType, Object, ObjectRef, Propagation
from tandem.errors import ApiError, Conflict, InternalError, NotFound, ServerTimeout, ServiceUnavailable, TooManyRequests

ERRORS: dict[int, type[ApiError]] = {409: Conflict, 429: TooManyRequests, 500: InternalError, 503: ServiceUnavailable, 504: ServerTimeout}
LIVE_KINDS = frozenset({"Lease"})  # read from the server on every call, as the adapter does


@dataclass
class Storm:
    code: int | str
    start: float
    until: float
    rate: float

    def on(self, now: float) -> bool:
        return self.start <= now < self.until


class Faults:
    """What the world's API does wrong right now: storms (shared by every replica)."""

    def __init__(self, rng: random.Random, clock: Callable[[], float]):
        self.rng = rng
        self.clock = clock
        self.storms: list[Storm] = []
        self.injected = 0

    def error(self) -> tuple[ApiError, bool] | None:
        """The error to answer with, and whether the write is applied first; None: no fault."""
        now = self.clock()
        for storm in self.storms:
            if storm.on(now) and self.rng.random() < storm.rate:
                self.injected += 1
                if storm.code == "504-applied":
                    return ServerTimeout("injected: the write went through, the answer was lost"), True
                return ERRORS[int(storm.code)](f"injected {storm.code}"), False
        return None


class LaggingReader:
    """A `Reader` over one snapshot; the Lease is read live from the store (and may fail)."""

    def __init__(self, snapshot: Snapshot, live: "ReplicaApi"):
        self._snapshot = snapshot
        self._live = live

    def get(self, kind: str, namespace: str | None, name: str) -> Object:
        if kind in LIVE_KINDS:
            return self._live.live_get(kind, namespace, name)
        return self._snapshot.get(kind, namespace, name)

    def list(self, kind: str, namespace: str | None = None, labels: Any = None, fields: Any = None) -> list[Object]:
        if kind in LIVE_KINDS:
            return self._live.store.snapshot().list(kind, namespace, labels, fields)
        return self._snapshot.list(kind, namespace, labels, fields)


@dataclass
class ReplicaApi:
    """The `Cluster` one replica sees (see the module docstring)."""

    store: MemoryStore
    faults: Faults
    history: Callable[[float, int], Snapshot]  # (seconds ago, oldest version allowed) -> snapshot
    on_delete: Callable[[str, str | None, str], Callable[[], None]] = lambda kind, namespace, name: lambda: None
    on_create: Callable[[Object], None] = lambda obj: None
    floor: int = 0  # the store's version when this process started: it never reads older
    read_lag: float = 0.0  # seconds its reads lag the store by (0: current)
    writes: int = 0
    crash_at: int | None = None
    # Own writes since the floor: store key -> (version, object or None when deleted here, uid).
    own: dict[tuple[str, str, str], tuple[int, Object | None, str]] = field(default_factory=dict)

    # ------------------------------------------------------------------ reads

    def snapshot(self) -> LaggingReader:
        current = self.store.snapshot()
        if self.read_lag <= 0:
            return LaggingReader(current, self)
        base = self.history(self.read_lag, self.floor)
        version = int(base.resource_version)
        objects = dict(base._objects)  # the snapshot's own dict copy: ours to lay writes over
        for key, (at, obj, uid) in self.own.items():
            if at <= version:
                continue
            if obj is not None:
                objects[key] = obj
            elif key in objects and objects[key]["metadata"].get("uid") == uid:
                del objects[key]
        return LaggingReader(Snapshot(objects, version, base._cluster_scoped), self)

    def served(self, kinds: Iterable[str]) -> frozenset[str]:
        """The store's: which kinds are served does not lag (the informers' state, not their caches)."""
        return self.store.served(kinds)

    def live_get(self, kind: str, namespace: str | None, name: str) -> Object:
        fault = self.faults.error()
        if fault is not None:
            raise fault[0]
        return self.store.snapshot().get(kind, namespace, name)

    # ------------------------------------------------------------------ writes

    def crash_after(self, writes: int) -> None:
        self.crash_at = self.writes + writes

    def create(self, obj: Object) -> Object:
        self._gate(obj["kind"])
        fault = self.faults.error()
        if fault is not None and not fault[1]:
            raise fault[0]
        answer = self.store.create(obj)
        self.on_create(answer)
        if fault is not None:
            raise fault[0]
        return self._own(answer)

    def patch(self, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any], *, resource_version: str | None = None) -> Object:
        self._gate(kind)
        return self._write(lambda: self.store.patch(kind, namespace, name, patch, resource_version=resource_version))

    def patch_status(
        self, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any], *, resource_version: str | None = None
    ) -> Object:
        self._gate(kind)
        return self._write(lambda: self.store.patch_status(kind, namespace, name, patch, resource_version=resource_version))

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
        self._gate(kind)
        fault = self.faults.error()
        if fault is not None and not fault[1]:
            raise fault[0]
        try:
            current = self.store.get(kind, namespace, name)
        except NotFound:
            current = None
        ours = current is not None and (uid is None or current["metadata"].get("uid") == uid)
        done = self.on_delete(kind, namespace, name) if ours else None
        self.store.delete(kind, namespace, name, uid=uid, resource_version=resource_version, propagation=propagation)
        if done is not None:
            done()
        if current is not None:
            self.own[_key(self.store, kind, namespace, name)] = (int(self.store.resource_version), None, current["metadata"].get("uid", ""))
        if fault is not None:
            raise fault[0]

    def record_event(self, involved: ObjectRef, type: EventType, reason: str, message: str) -> None:
        fault = self.faults.error()
        if fault is not None and not fault[1]:
            raise fault[0]
        self.store.record_event(involved, type, reason, message)

    # ------------------------------------------------------------------ internals

    def _gate(self, kind: str) -> None:
        """Count the controller's write; die here if it is the one the crash was set for (the
        Lease's renewals do not count: a crash is between two writes of a pass)."""
        if kind in LIVE_KINDS:
            return
        n = self.writes
        self.writes += 1
        if self.crash_at is not None and n >= self.crash_at:
            self.crash_at = None
            raise Crash(f"crashed before write {n}")

    def _write(self, send: Callable[[], Object]) -> Object:
        fault = self.faults.error()
        if fault is not None and not fault[1]:
            raise fault[0]
        answer = send()
        if fault is not None:
            raise fault[0]  # applied; the answer is lost, so it is not known as an own write
        return self._own(answer)

    def _own(self, answer: Object) -> Object:
        meta = answer["metadata"]
        key = _key(self.store, self.store.key_of(answer), meta.get("namespace"), meta["name"])
        self.own[key] = (int(meta["resourceVersion"]), answer, meta.get("uid", ""))
        return answer

    def forget_before(self, version: int) -> None:
        """Drop own writes every snapshot still kept already holds."""
        self.own = {k: v for k, v in self.own.items() if v[0] > version}


def _key(store: MemoryStore, kind: str, namespace: str | None, name: str) -> tuple[str, str, str]:
    return (kind, "" if store.is_cluster_scoped(kind) else (namespace or "default"), name)
