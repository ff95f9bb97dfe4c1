"""The campaign over HTTP: each operator replica speaks through the Kubernetes adapter
(`tandem.kube.KubeCluster`: informers, the writer, the Lease read live) to the local API
server (`tandem.apiserver.ApiServer`, in-process, serving the world's store: the same REST
verbs, admission, CRD schemas and watches `tandem apiserver` serves), where the faults are
the server's, injected through its test hook (`tandem.apiserver.faults.Faults`):

- storms answer writes (and Lease reads) with 409, 429, 500, 503 or 504 before anything
  is applied, or `504-applied`: the write is committed, then the answer is a 504;
- `watch-cut` ends every open watch (the informers watch again from where they were);
- `gone` compacts the history and ends the watches, so every informer meets 410 Gone (as
  an ERROR event, or as the answer itself) and lists again;
- `list-errors` answers the informers' lists with a 5xx half the time for a while.

The server's own simulated kubelet is off: the world's (`world.FaultyKubelet`, on the
step's clock) binds and starts pods, as in memory. Before each replica's turn the world
waits until that replica's informers have caught up with the store (every kind's last
change seen): the faults above delay the caches, a turn then sees what a real one would
see once they are back, and a run stays the same from one time to the next. An informer
that does not catch up within `CATCH_UP_S` seconds is a violation (`informer-stuck`); so
is an error the server logs (`apiserver-error`: a bug answered as a 500). Crashes between
writes are the replica's own (the adapter is stopped with it: a restarted process lists
from scratch).

The server listens on its own loopback address (`HOST`), not 127.0.0.1: on a machine
shared with other tests, a `tandem operator` whose API server had gone (a test killed
before its teardown) retries its kubeconfig's 127.0.0.1:<port> for ever, and once a
world's server took that port it reconciled the world's groups on the wall clock, a year
after the world's (stalled units retrying in 2026, `liveness` at the end: the HTTP
seeds 4 and 22 that failed only in shared runs). A time in a group's status that far
from the world's is reported as `foreign-writer`.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any, Callable, Iterable

import yaml

from support.controller_world import Crash
from support.faults.api import Faults as StormFaults
from support.faults.schedule import EPOCH, SCHEMAS, Schedule, world_backends
from support.faults.world import Replica, World, WorldStore
from tandem.apiserver import verbs
from tandem.apiserver.faults import Faults, Injected, Request
from tandem.apiserver.server import ApiServer
from tandem.api.timestamps import seconds
from tandem.cluster.ports import EventType, Object, ObjectRef, Propagation
from tandem.controller import OBSERVED_KINDS
from tandem.errors import ApiError, NotFound
from tandem.kube.cluster import KubeCluster
from tandem.kube.rest import Rest

CATCH_UP_S = 10.0
# The worlds' API servers listen here (any port): a loopback address nothing else on the
# machine uses by default, so a process looking for its own server on 127.0.0.1 never
# reaches a world's (see the module docstring).
HOST = "127.31.0.1"
# A time in a group's status this far from the world's is on another clock: a writer from
# outside the world (see the module docstring).
FOREIGN_CLOCK_S = 86_400.0
STAMPED = ("Time", "Since", "After", "Started")  # status keys holding a time (lastTransitionTime, partialSince, retryAfter, stepStarted)
# The CRDs each delegated backend's groups need served (as tests/e2e/test_delegated.py applies them).
CRDS = {
    "volcano": ["volcano/scheduling.volcano.sh_podgroups.yaml"],
    "kai": ["kai/scheduling.run.ai_podgroups.yaml", "kai/scheduling.run.ai_queues.yaml"],
    "koordinator": ["koordinator/scheduling.sigs.k8s.io_podgroups.yaml"],
    "kueue": ["kueue/kueue.x-k8s.io_workloads.yaml", "kueue/kueue.x-k8s.io_localqueues.yaml", "kueue/kueue.x-k8s.io_clusterqueues.yaml"],
}
# Kueue admits a Workload only through a LocalQueue of its namespace (tandem names `default`).
KUEUE_QUEUES = [
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cluster"},
     "spec": {"namespaceSelector": {}, "resourceGroups": []}},
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "default", "namespace": "serving"},
     "spec": {"clusterQueue": "cluster"}},
]
KIND_FIRST = ("get", "list", "patch", "patch_status", "delete", "list_with_version")  # methods naming a kind first
WRITES = ("create", "update", "update_status", "patch", "patch_status", "delete", "bind", "record_event")


class CampaignFaults(Faults):
    """The server's fault hook, answering with the world's storms and list errors."""

    def __init__(self, world: "HttpWorld"):
        super().__init__()
        self.world = world
        self.storms: StormFaults | None = None
        self.list_errors: Callable[[], int | None] = lambda: None
        self.chance = random.Random(0)

    def decide(self, request: Request) -> Injected | None:
        if not request.watch and (request.method != "GET" or request.kind == "Lease") and self.storms is not None:
            found = self.storms.error()
            if found is not None:
                error, applied = found
                return Injected(error.code, error.message, headers={"Retry-After": "1"} if error.code == 429 else {}, applied=applied)
        code = self.list_errors()
        if code is not None and request.method == "GET" and not request.watch and request.kind != "Lease" and self.chance.random() < 0.5:
            return Injected(code)
        return None

    def lost(self, request: Request, code: int, body: Any) -> None:
        """A write applied, its answer lost: a pod created so is created all the same (the
        invariants count it; the controller cannot know)."""
        super().lost(request, code, body)
        if request.method == "POST" and request.kind == "Pod" and code == 201 and isinstance(body, dict):
            self.world._created(body)


class LockedStore:
    """The store the API server serves, for the world's own hands (kubelet, garbage collector,
    users, checks): every call under the server's lock, every write waking the watches."""

    def __init__(self, server: ApiServer, store: WorldStore):
        self._state = server.state
        self._store = store

    def key(self, key: str) -> str:
        """The store's key for a kind named as the ports name it (`PodGroup.scheduling.volcano.sh`):
        the server keys a CRD's kind by its bare name unless another group serves one of that
        name when it is installed (`apiserver.kinds.Registry.replace_crd`)."""
        kind, _, group = key.partition(".")
        resource = self._state.registry.for_kind(kind, group) if group else None
        return resource.key if resource is not None else key

    def served(self, kinds: Iterable[str]) -> frozenset[str]:
        return frozenset(k for k in kinds if self._store.served([self.key(k)]))

    def serves(self, key: str) -> bool:
        """Whether the server serves the kind (the simulator's kubelet runs a scheduler's stand-in then)."""
        kind, _, group = key.partition(".")
        with self._state.lock:
            return bool(group) and self._state.registry.for_kind(kind, group) is not None

    def snapshot(self) -> "KeyedSnapshot":
        with self._state.lock:
            return KeyedSnapshot(self._store.snapshot(), self)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not callable(attr):
            return attr

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._state.lock:
                if name in KIND_FIRST and args:
                    args = (self.key(args[0]), *args[1:])
                out = attr(*args, **kwargs)
                if name in WRITES:
                    self._state.changed()
                return out

        return locked

    @property
    def kind_version(self) -> dict[str, int]:
        with self._state.lock:
            return dict(self._store.kind_version)


class KeyedSnapshot:
    """A snapshot of the served store read with the ports' kind names (`LockedStore.key`)."""

    def __init__(self, snapshot: Any, store: LockedStore):
        self._snapshot, self._store = snapshot, store

    def list(self, kind: str, *args: Any, **kwargs: Any) -> list[Object]:
        return self._snapshot.list(self._store.key(kind), *args, **kwargs)

    def get(self, kind: str, *args: Any, **kwargs: Any) -> Object:
        return self._snapshot.get(self._store.key(kind), *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._snapshot, name)


class _Errors(logging.Handler):
    """The server's logged errors (a request that failed with a bug), for the invariants."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(self.format(record))


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

    def served(self, kinds: Iterable[str]) -> frozenset[str]:
        return self.cluster.served(kinds)

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
        try:
            self.cluster.delete(kind, namespace, name, uid=uid, resource_version=resource_version, propagation=propagation)
        except ApiError:
            if done is not None and current is not None and self._gone(kind, namespace, name, current["metadata"].get("uid")):
                done()  # applied, the answer lost (504-applied): deleted all the same
            raise
        if done is not None:
            done()

    def _gone(self, kind: str, namespace: str | None, name: str, uid: str | None) -> bool:
        try:
            return self.world.store.get(kind, namespace, name)["metadata"].get("uid") != uid
        except NotFound:
            return True

    def record_event(self, involved: ObjectRef, type: EventType, reason: str, message: str) -> None:
        self.cluster.record_event(involved, type, reason, message)


class HttpWorld(World):
    def __init__(self, schedule: Schedule, checker_factory: Callable[[World], Any] | None = None):
        self.server: ApiServer | None = None
        self.hook: CampaignFaults | None = None
        self._errors = _Errors()
        self._list_errors: list[tuple[float, float, int]] = []
        super().__init__(schedule, checker_factory)
        assert self.hook is not None
        self.hook.storms = self.faults
        self.hook.chance = random.Random(f"lists-{schedule.seed}")
        self.hook.list_errors = self._list_error_now

    def _make_store(self) -> Any:
        store = WorldStore(clock=lambda: EPOCH + self.t)
        self.hook = CampaignFaults(self)
        self.server = ApiServer(store=store, faults=self.hook, kubelet=False, bookmark_every=0.5, clock=lambda: EPOCH + self.t, host=HOST)
        self.server._http.handle_error = lambda request, address: None  # a watch cut mid-write is the point, not news
        self.server.start()
        logging.getLogger("tandem.kube").setLevel(logging.ERROR)  # informers retrying after injected errors, as expected
        logging.getLogger("tandem.apiserver").addHandler(self._errors)
        return LockedStore(self.server, store)

    def _serve_backends(self) -> tuple[str, ...]:
        """Install the schedulers' CRDs (../shared/schemas) as `kubectl apply` would, and Kueue's
        LocalQueue `default` where groups live; none when the schemas are absent (the
        schedule then names no delegated backend: `schedule.world_backends`)."""
        backends = world_backends("http")
        if not backends:
            return ()
        assert self.server is not None
        state = self.server.state
        with state.lock:
            crds = state.registry.for_kind("CustomResourceDefinition")
            assert crds is not None
            for backend in backends:
                for path in CRDS[backend]:
                    verbs.create(state, crds, None, yaml.safe_load((SCHEMAS / path).read_text(encoding="utf-8")), {})
            state.changed()
        for obj in KUEUE_QUEUES:
            self.store.create(obj)
        return backends

    def _connect(self, replica: Replica) -> HttpReplicaApi:
        assert self.server is not None
        cluster = KubeCluster(Rest.connect(self.server.url, timeout=5.0, trust_env=False), kinds=OBSERVED_KINDS, optional_kinds=self.delegation.kinds,
                              watch_timeout=5.0, backoff=(0.02, 0.2), read_grace=2.0, page_size=50)
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
            behind = [i.kind.key for i in cluster.informers if _number(i.resource_version) < versions.get(i.kind.key, 0)]
            if not behind:
                break
            if time.monotonic() > deadline:
                if self.checker is not None:
                    self.checker.violation("informer-stuck", f"{replica.identity}: informers of {behind} behind for {CATCH_UP_S}s", once=replica.identity)
                break
            time.sleep(0.002)
        if self._errors.seen and self.checker is not None:
            for line in self._errors.seen:
                self.checker.violation("apiserver-error", line)
            self._errors.seen.clear()

    def step(self) -> None:
        super().step()
        if self.checker is not None:
            for name, key, stamp in foreign_stamps(self.store.snapshot().list("InferenceGroup"), EPOCH + self.t):
                self.checker.violation("foreign-writer", f"{name}: {key} {stamp} is on another clock than the world's "
                                                         f"(t={self.t:.0f}): a process outside the world wrote it", once=("foreign", name))

    def close(self) -> None:
        super().close()
        logging.getLogger("tandem.apiserver").removeHandler(self._errors)
        if self.server is not None:
            self.server.stop()

    # ------------------------------------------------------------------ HTTP faults

    def _on_watch_cut(self, event: dict[str, Any]) -> None:
        assert self.hook is not None
        self.hook.cut_watches()

    def _on_gone(self, event: dict[str, Any]) -> None:
        assert self.hook is not None
        self.hook.gone_as_status = bool(event.get("as_status"))
        self.hook.compact()
        self.hook.cut_watches()

    def _on_list_errors(self, event: dict[str, Any]) -> None:
        self._list_errors.append((self.t, float(event["until"]), int(event["code"])))
        assert self.hook is not None
        self.hook.cut_watches()  # so the informers list (and meet the errors)

    def _list_error_now(self) -> int | None:
        return next((code for start, until, code in self._list_errors if start <= self.t < until), None)

    def _heal(self) -> None:
        super()._heal()
        self._list_errors.clear()


def foreign_stamps(groups: Iterable[Object], now: float) -> list[tuple[str, str, str]]:
    """(group, key path, time) of each time in the groups' status further than
    `FOREIGN_CLOCK_S` from `now`: written on a clock other than the world's."""
    out: list[tuple[str, str, str]] = []

    def walk(value: Any, path: str, name: str) -> None:
        if isinstance(value, dict):
            for key, item in sorted(value.items()):
                if isinstance(item, str) and key.endswith(STAMPED):
                    if abs(_seconds_or(item, now) - now) > FOREIGN_CLOCK_S:
                        out.append((name, f"{path}.{key}", item))
                else:
                    walk(item, f"{path}.{key}", name)
        elif isinstance(value, list):
            for number, item in enumerate(value):
                walk(item, f"{path}[{number}]", name)

    for group in groups:
        walk(group.get("status") or {}, "status", group["metadata"]["name"])
    return out


def _seconds_or(stamp: str, default: float) -> float:
    try:
        return seconds(stamp)
    except ValueError:
        return default


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

