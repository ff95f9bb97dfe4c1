"""`KubeCluster`: a real cluster as the controller's `Cluster` port.

Reads come from informers (`informer.py`), one per kind (and per namespace when limited
to some): `snapshot()` copies every cache's dict under one lock, so a pass sees each kind
as its informer last heard it, all at one instant, and nothing changes under it. Writes go
straight to the API (`writer.py`). Kinds in `live_kinds` (the Lease) are not watched but
read from the API on each call.

Optional kinds (`optional_kinds`: the delegated scheduler backends' PodGroups and
Workloads) are watched like the others but may not be served, their CRDs not installed:
such an informer counts as synced with an empty cache and looks again every `recheck`
seconds, and at once when a CustomResourceDefinition is added or changed (the cluster
then watches CRDs too); a served one whose CRD is deleted lists again, finds the kind gone
and empties its cache. `served(kinds)` (the `Discovery` port) answers from the informers:
a kind is served when each of its informers' last list found it, so a pass asks for free.

Consistency: a snapshot may lag the server for what others change, but it reads this
process's own writes: each write's answer goes into its informer's cache at once (see
`informer.py`), as the in-memory store does, so a pass never acts on the state before the
previous pass's writes (client-go leaves this to each controller's "expectations"). The
controller is level-triggered and writes with preconditions, so a stale read of someone
else's change costs a 409 Conflict and a retry on the next pass, never a wrong write.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable, Mapping

import httpx2

from tandem.cluster.ports import EventType, Object, ObjectRef, Propagation
from tandem.kube.informer import Informer, Journal, OnChange
from tandem.kube.kinds import CRD_KEY, key_of, kind_of
from tandem.kube.reader import CacheReader, Key, LiveReader
from tandem.kube.rest import Rest, Source, as_rest
from tandem.kube.writer import KubeWriter


class KubeCluster:
    def __init__(
        self,
        rest: Rest | httpx2.Client,
        *,
        kinds: Iterable[str],
        optional_kinds: Iterable[str] = (),
        namespaces: Iterable[str] = (),
        scopes: Mapping[str, Iterable[str]] | None = None,
        live_kinds: Iterable[str] = ("Lease",),
        on_change: OnChange | None = None,
        resync: float = 300.0,
        watch_timeout: float = 300.0,
        writer: KubeWriter | None = None,
        **informer_options: Any,
    ):
        """`rest`: a `Rest`, or an `httpx2.Client` whose `base_url` is the API server.
        `namespaces` limits every namespaced kind (empty: all namespaces); `scopes` limits
        single kinds (`{"Lease": ["tandem-system"]}`); `optional_kinds` are watched too but
        may not be served (a CRD not installed: see the module docstring), and bring a
        watch of CustomResourceDefinitions; `informer_options` go to each `Informer`
        (page_size, read_grace, backoff, clock, recheck)."""
        self.rest = as_rest(rest)
        self._owns_rest = isinstance(rest, Rest)
        self.writer = writer or KubeWriter(self.rest)
        self.on_change = on_change
        self._lock = threading.Lock()
        self.journal = Journal()  # every informer's changes, numbered (guarded by the lock)
        self._live = LiveReader(self.rest)
        self.live_kinds = frozenset(live_kinds)
        self.optional_kinds = frozenset(optional_kinds) - self.live_kinds
        watched = (*kinds, *sorted(self.optional_kinds), *((CRD_KEY,) if self.optional_kinds else ()))
        self.kinds = tuple(dict.fromkeys(k for k in watched if k not in self.live_kinds))
        limited = {kind: tuple(spaces) for kind, spaces in (scopes or {}).items()}
        self.informers: list[Informer] = []
        for name in self.kinds:
            kind = kind_of(name)
            spaces = limited.get(name, tuple(namespaces)) if kind.namespaced else ()
            for namespace in spaces or (None,):
                self.informers.append(
                    Informer(
                        self.rest,
                        kind,
                        namespace=namespace,
                        lock=self._lock,
                        journal=self.journal,
                        on_change=self._changed,
                        resync=resync,
                        watch_timeout=watch_timeout,
                        optional=name in self.optional_kinds,
                        **informer_options,
                    )
                )
        self._started = False

    @classmethod
    def connect(cls, source: Source = None, *, timeout: float = 10.0, trust_env: bool = True, start: bool = True, **options: Any) -> "KubeCluster":
        """Connect (`Rest.connect`: None is the in-cluster ServiceAccount, a string a
        kubeconfig path or an http(s) URL) and start the informers; `has_synced()` says when
        they have listed, `stop()` closes the connection."""
        cluster = cls(Rest.connect(source, timeout=timeout, trust_env=trust_env), **options)
        return cluster.start() if start else cluster

    # ------------------------------------------------------------------ life

    def start(self, wait: float | None = None) -> "KubeCluster":
        """Start the informers; with `wait`, give them that many seconds to list first."""
        if not self._started:
            self._started = True
            for informer in self.informers:
                informer.start()
        if wait is not None:
            self.wait_synced(wait)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every informer (all signalled first, so they wind down together); close the
        connection if this cluster opened it (`connect`, or given a `Rest`)."""
        for informer in self.informers:
            informer.signal_stop()
        deadline = time.monotonic() + timeout
        for informer in self.informers:
            informer.stop(max(deadline - time.monotonic(), 0.0))
        if self._owns_rest:
            self.rest.close()

    def __enter__(self) -> "KubeCluster":
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def has_synced(self) -> bool:
        return all(informer.has_synced() for informer in self.informers)

    def wait_synced(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in self.informers:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not informer.wait_synced(left):
                return False
        return True

    def silent_for(self) -> dict[str, float]:
        """Seconds since each kind's informer (the worst of a kind's) last heard from the API."""
        return self._worst(Informer.silent_for)

    def disconnected(self) -> dict[str, float]:
        """Seconds since each kind's informer (the worst of a kind's) last had a watch open; 0 while open."""
        return self._worst(Informer.disconnected)

    def follow_delays(self, on_delay: Callable[[str, float], None] | None) -> None:
        """Have every informer report each watch event's delivery delay (`Informer.on_delay`)."""
        for informer in self.informers:
            informer.on_delay = on_delay

    def _worst(self, figure: Callable[[Informer], float]) -> dict[str, float]:
        out: dict[str, float] = {}
        for informer in self.informers:
            out[informer.kind.key] = max(out.get(informer.kind.key, 0.0), figure(informer))
        return out

    def versions(self) -> dict[str, str]:
        """The resourceVersion each kind's informer last saw (the first informer of a kind's)."""
        out: dict[str, str] = {}
        with self._lock:
            for informer in self.informers:
                out.setdefault(informer.kind.key, informer.resource_version)
        return out

    # ------------------------------------------------------------------ Reader

    def snapshot(self) -> CacheReader:
        """The caches as they are now, shared (each is copied on its next change), and
        where the journal stands, for `changes_since`."""
        by_kind: dict[str, list[dict[Key, Object]]] = {kind: [] for kind in self.kinds}
        with self._lock:
            for informer in self.informers:
                by_kind[informer.kind.key].append(informer.share())
            seq = self.journal.seq
        caches = {kind: parts[0] if len(parts) == 1 else {k: v for part in parts for k, v in part.items()} for kind, parts in by_kind.items()}
        return CacheReader(caches, self._live, self.live_kinds, journal=(self.journal, self._lock, seq))

    # ------------------------------------------------------------------ Discovery

    def served(self, kinds: Iterable[str]) -> frozenset[str]:
        """Which of `kinds` the API server serves, as the informers last found: a watched
        kind whose every informer listed it (an optional kind whose CRD is missing does not;
        nor does a kind before its first list), and the kinds read live (built-in). A kind
        this cluster does not watch is not known to be served: watch it to ask."""
        found: dict[str, bool] = {}
        with self._lock:
            for informer in self.informers:
                found[informer.kind.key] = found.get(informer.kind.key, True) and informer.serving is True
        return frozenset(kind for kind in kinds if kind in self.live_kinds or found.get(kind, False))

    # ------------------------------------------------------------------ Writer

    def create(self, obj: Object) -> Object:
        return self._wrote(key_of(obj), self.writer.create(obj))

    def patch(self, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any], *, resource_version: str | None = None) -> Object:
        return self._wrote(kind, self.writer.patch(kind, namespace, name, patch, resource_version=resource_version))

    def patch_status(
        self, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any], *, resource_version: str | None = None
    ) -> Object:
        return self._wrote(kind, self.writer.patch_status(kind, namespace, name, patch, resource_version=resource_version))

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
        answer = self.writer.delete(kind, namespace, name, uid=uid, resource_version=resource_version, propagation=propagation)
        informer = self._informer_of(kind, namespace)
        if informer is None:
            return
        if isinstance(answer, dict) and key_of(answer) == kind and (answer.get("metadata") or {}).get("deletionTimestamp"):
            informer.wrote(answer)  # still there, terminating
        else:
            informer.deleted(namespace, name)

    def record_event(self, involved: ObjectRef, type: EventType, reason: str, message: str) -> None:
        self.writer.record_event(involved, type, reason, message)

    # ------------------------------------------------------------------ internals

    def _wrote(self, kind: str, answer: Object) -> Object:
        informer = self._informer_of(kind, (answer.get("metadata") or {}).get("namespace"))
        if informer is not None:
            informer.wrote(answer)
        return answer

    def _informer_of(self, kind: str, namespace: str | None) -> Informer | None:
        """The informer whose cache holds objects of `kind` in `namespace`, if one is watched."""
        for informer in self.informers:
            if informer.kind.key == kind and (informer.namespace is None or informer.namespace == namespace):
                return informer
        return None

    def _changed(self, kind: str, event_type: str, obj: Object) -> None:
        if kind == CRD_KEY and self.optional_kinds:
            self._crd_changed(event_type, obj)
        hook = self.on_change
        if hook is not None:
            hook(kind, event_type, obj)

    def _crd_changed(self, event_type: str, crd: Object) -> None:
        """A CRD added or changed may serve an unserved optional kind: those look again now.
        One deleted (or being deleted) takes its kind away: that kind's informers list again."""
        name = str((crd.get("metadata") or {}).get("name") or "")
        going = event_type == "DELETED" or bool((crd.get("metadata") or {}).get("deletionTimestamp"))
        for informer in self.informers:
            if not informer.optional:
                continue
            if going and f"{informer.kind.plural}.{informer.kind.group}" == name:
                informer.recheck_now(watching=True)
            elif not going:
                informer.recheck_now()

