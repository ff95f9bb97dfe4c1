"""The campaign over HTTP: each operator replica speaks through the Kubernetes adapter
(`tandem.kube.KubeCluster`: informers, the writer, the Lease read live) to a small API
server over the same store (`tests/kube/fakeapi.py`), where the faults are the server's:

- storms answer writes (and Lease reads) with 409, 429, 500, 503 or 504, as the server;
- `watch-cut` ends every open watch (the informers watch again from where they were);
- `gone` compacts the history and ends the watches, so every informer meets 410 Gone (as
  an ERROR event, or as the answer itself) and lists again;
- `list-errors` answers the informers' lists with a 5xx half the time for a while.

Before each replica's turn the world waits until that replica's informers have caught up
with the store (every kind's last change seen): the faults above delay the caches, a turn
then sees what a real one would see once they are back, and a run stays the same from one
time to the next. An informer that does not catch up within `CATCH_UP_S` seconds is a
violation (`informer-stuck`). Crashes between writes are the replica's own (the adapter
is stopped with it: a restarted process lists from scratch).
"""

from __future__ import annotations

import logging
import random
import re
import time
from typing import Any, Callable

from kube.fakeapi import Fault, FakeApi
from support.controller_world import Crash
from support.faults.api import Faults
from support.faults.schedule import EPOCH, Schedule
from support.faults.world import Replica, World, WorldStore
from tandem.controller.ports import EventType, Object, ObjectRef, Propagation
from tandem.errors import NotFound
from tandem.kube.cluster import KubeCluster
from tandem.kube.rest import Rest

CATCH_UP_S = 10.0
WRITES = ("create", "update", "update_status", "patch", "patch_status", "delete", "bind", "record_event")
REASONS = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


class FaultyApi(FakeApi):
    """The fake API server, answering with the world's storms and list errors."""

    world_faults: Faults | None = None
    list_errors: Callable[[], int | None] = staticmethod(lambda: None)
    chance: random.Random = random.Random(0)

    def fault_for(self, method: str, path: str, watch: bool) -> Fault | None:
        if not watch and (method != "GET" or "/leases/" in path) and self.world_faults is not None:
            found = self.world_faults.error()
            if found is not None:
                code = found[0].code
                return Fault(method, re.compile(".*"), code, REASONS.get(code, "Injected"), {"Retry-After": "1"} if code == 429 else {}, 1, False)
        code = self.list_errors()
        if code is not None and method == "GET" and not watch and "/leases/" not in path and self.chance.random() < 0.5:
            return Fault(method, re.compile(".*"), code, REASONS.get(code, "Injected"), {}, 1, False)
        return super().fault_for(method, path, watch)


class LockedStore:
    """The store the API server serves, for the world's own hands (kubelet, garbage collector,
    users, checks): every call under the server's lock, every write waking the watches."""

    def __init__(self, api: FakeApi):
        self._api = api
        self._store: WorldStore = api.store  # type: ignore[assignment]

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not callable(attr):
            return attr

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._api.lock:
                out = attr(*args, **kwargs)
                if name in WRITES:
                    self._api.lock.notify_all()
                return out

        return locked

    @property
    def kind_version(self) -> dict[str, int]:
        with self._api.lock:
            return dict(self._store.kind_version)


class HttpReplicaApi:
    """A replica's `Cluster`: the adapter, with a crash between two writes of its own."""

    def __init__(self, cluster: KubeCluster, world: "HttpWorld"):
        self.cluster = cluster
        self.world = world
        self.writes = 0
        self.crash_at: int | None = None
        self.read_lag = 0.0  # over HTTP the informers lag as they lag

    def snapshot(self) -> Any:
        return self.cluster.snapshot()

    def crash_after(self, writes: int) -> None:
        self.crash_at = self.writes + writes

    def forget_before(self, version: int) -> None:
        pass

    def _gate(self, kind: str) -> None:
        if kind == "Lease":
            return
        n = self.writes
        self.writes += 1
        if self.crash_at is not None and n >= self.crash_at:
            self.crash_at = None
            raise Crash(f"crashed before write {n}")

    def create(self, obj: Object) -> Object:
        self._gate(obj["kind"])
        answer = self.cluster.create(obj)
        self.world._created(answer)
        return answer

    def patch(self, kind: str, namespace: str | None, name: str, patch: Any, *, resource_version: str | None = None) -> Object:
        self._gate(kind)
        return self.cluster.patch(kind, namespace, name, patch, resource_version=resource_version)

    def patch_status(self, kind: str, namespace: str | None, name: str, patch: Any, *, resource_version: str | None = None) -> Object:
        self._gate(kind)
        return self.cluster.patch_status(kind, namespace, name, patch, resource_version=resource_version)

    def delete(self, kind: str, namespace: str | None, name: str, *, uid: str | None = None, resource_version: str | None = None,
               propagation: Propagation = "Background") -> None:
        self._gate(kind)
        try:
            current = self.world.store.get(kind, namespace, name)
        except NotFound:
            current = None
        done = None
        if current is not None and (uid is None or current["metadata"].get("uid") == uid):
            done = self.world._deleting(kind, namespace, name)  # judged on the store as it is now
        self.cluster.delete(kind, namespace, name, uid=uid, resource_version=resource_version, propagation=propagation)
        if done is not None:
            done()

    def record_event(self, involved: ObjectRef, type: EventType, reason: str, message: str) -> None:
        self.cluster.record_event(involved, type, reason, message)


class HttpWorld(World):
    def __init__(self, schedule: Schedule, checker_factory: Callable[[World], Any] | None = None):
        self.api: FaultyApi | None = None
        self._list_errors: list[tuple[float, float, int]] = []
        super().__init__(schedule, checker_factory)
        assert self.api is not None
        self.api.world_faults = self.faults
        self.api.chance = random.Random(f"lists-{schedule.seed}")
        self.api.list_errors = self._list_error_now

    def _make_store(self) -> Any:
        self.api = FaultyApi(store=WorldStore(clock=lambda: EPOCH + self.t), bookmark_every=0.5)
        self.api.server.handle_error = lambda request, address: None  # a watch cut mid-write is the point, not news
        logging.getLogger("tandem.kube").setLevel(logging.ERROR)  # informers retrying after injected errors, as expected
        return LockedStore(self.api)

    def _connect(self, replica: Replica) -> HttpReplicaApi:
        assert self.api is not None
        cluster = KubeCluster(Rest.connect(self.api.url, timeout=5.0, trust_env=False), watch_timeout=5.0, backoff=(0.02, 0.2),
                              read_grace=2.0, page_size=50)
        cluster.start()
        if not cluster.wait_synced(CATCH_UP_S) and self.checker is not None:
            self.checker.violation("informer-stuck", f"{replica.identity}: the informers did not list within {CATCH_UP_S}s")
        return HttpReplicaApi(cluster, self)

    def _disconnect(self, replica: Replica) -> None:
        if isinstance(replica.api, HttpReplicaApi):
            replica.api.cluster.stop()

    def _before_turn(self, replica: Replica) -> None:
        """Wait until the replica's informers have seen every kind's last change."""
        assert isinstance(replica.api, HttpReplicaApi)
        cluster = replica.api.cluster
        deadline = time.monotonic() + CATCH_UP_S
        while True:
            versions = self.store.kind_version
            behind = [i.kind.kind for i in cluster.informers if _number(i.resource_version) < versions.get(i.kind.kind, 0)]
            if not behind:
                return
            if time.monotonic() > deadline:
                if self.checker is not None:
                    self.checker.violation("informer-stuck", f"{replica.identity}: informers of {behind} behind for {CATCH_UP_S}s", once=replica.identity)
                return
            time.sleep(0.002)

    def close(self) -> None:
        super().close()
        if self.api is not None:
            self.api.close()

    # ------------------------------------------------------------------ HTTP faults

    def _on_watch_cut(self, event: dict[str, Any]) -> None:
        assert self.api is not None
        self.api.end_watches()

    def _on_gone(self, event: dict[str, Any]) -> None:
        assert self.api is not None
        with self.api.lock:
            self.api.gone_as_status = bool(event.get("as_status"))
        self.api.compact()
        self.api.end_watches()

    def _on_list_errors(self, event: dict[str, Any]) -> None:
        self._list_errors.append((self.t, float(event["until"]), int(event["code"])))
        assert self.api is not None
        self.api.end_watches()  # so the informers list (and meet the errors)

    def _list_error_now(self) -> int | None:
        return next((code for start, until, code in self._list_errors if start <= self.t < until), None)

    def _heal(self) -> None:
        super()._heal()
        self._list_errors.clear()


def _number(version: str) -> int:
    return int(version) if version and version.isdigit() else 0


def run_http(schedule: Schedule) -> Any:
    """`campaign.run` for a schedule whose world is "http"."""
    from support.faults.campaign import play
    from support.faults.invariants import Checker

    world = HttpWorld(schedule, Checker)
    try:
        return play(world)
    finally:
        world.close()

