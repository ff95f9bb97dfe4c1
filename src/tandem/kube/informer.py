"""An informer: one kind (in one namespace, or all), listed, then watched, into a cache.

    list (paged) -> replace the cache, remember the list's resourceVersion
    watch from there (allowWatchBookmarks, a server-side timeout) -> apply each event
      stream ended / timed out / connection lost -> watch again from the last version seen
      410 Gone (as the HTTP status or an ERROR event) -> list again
      resync due (every `resync` seconds) -> list again
    any other failure -> back off (doubling, capped; longer if the server says Retry-After)

An optional kind (a scheduler backend's PodGroup: `optional=True`) may not be served at
all, its CRD not installed: a 404 on its list makes it unserved, not failed. It counts as
synced with an empty cache (so it never holds a process's start back), says so in one
log line (and one when it is served again), and looks again on a slow timer (`recheck`
seconds) or at once when told (`recheck_now`: a CRD was added or changed). A served kind
whose CRD is deleted (its watch or re-list answers 404) becomes unserved the same way:
its cache empties, a DELETED change for each object. `serving` is the state: None until
the first list, then whether the last list found the kind served.

One thread per informer, blocking I/O: the Writer the controller calls is synchronous, a
thread per kind is a handful of threads, and a blocked read is ended by shutting its
socket down (`stop`), with the read time-out as a backstop. An asyncio loop would have
needed a second (async) client, or a bridge for every write, for no gain at this scale.

The cache maps (namespace, name) to the object, trimmed (`trim.py`), with `apiVersion` and
`kind` filled in (list items come without them). Objects are never changed in place: a
new version replaces the old under the cluster's lock, and the dict itself is copied on
the first change after a snapshot took it (`share`), so a snapshot costs nothing. Each
change is numbered in the cluster's `Journal`, so a pass can ask what changed since the
last one (`CacheReader.changes_since`) instead of reading everything.
`on_change(kind, event_type, obj)` is called after each change, outside the lock; a re-list
reports what it found different as ADDED / MODIFIED / DELETED.

How far behind the server it is, two ways (docs/kube.md): `disconnected()`, the seconds
since it last had a watch open (0 while one is: a quiet, healthy stream does not age), and
`on_delay(kind, seconds)`, called for each watch event whose object carries the server's
time of that change (an ADDED object's `creationTimestamp`, or the newest
`managedFields[].time`): the delivery delay, on the wall clock.

Read-your-writes: what the process itself wrote goes into the cache as the server answered
it (`wrote`, `deleted`), before the watch brings it back, so the next pass never acts on
the state before its own writes (a replica whose second pod has not come back yet would
look broken). The watch's echo of a write still reports a change (it is what makes the
next pass run); an event older than the cached version of its object is dropped, and an
object this process deleted is not brought back by a late MODIFIED event, only by its
DELETED event, one with a `deletionTimestamp` (a finalizer or grace period holds it), a
re-list, or an ADDED one (created again). Versions are
compared as numbers where both are numbers (as every API server issues them); opaque
ones are taken as they come.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from datetime import datetime
from typing import Any, Callable, Mapping

import httpx2
import msgspec

from tandem.cluster.ports import ApiError, Gone, NotFound, Object
from tandem.kube.errors import status_error
from tandem.kube.kinds import Kind
from tandem.kube.rest import Rest, Stream, as_rest
from tandem.kube.trim import trimmer

log = logging.getLogger("tandem.kube")

Key = tuple[str, str]
OnChange = Callable[[str, str, Object], None]


class Journal:
    """The keys (kind, namespace or "", name) of cache changes, numbered; the latest `size`
    kept. Guarded by the cluster's lock, like the caches."""

    def __init__(self, size: int = 100_000):
        self.entries: deque[tuple[int, tuple[str, str, str]]] = deque(maxlen=size)
        self.seq = 0

    def add(self, kind: str, key: Key) -> None:
        self.seq += 1
        self.entries.append((self.seq, (kind, key[0], key[1])))

    def since(self, cursor: int, upto: int) -> set[tuple[str, str, str]] | None:
        """Keys changed after `cursor` up to `upto`; None when the journal no longer reaches back."""
        keys: set[tuple[str, str, str]] = set()
        for seq, key in reversed(self.entries):
            if seq <= cursor:
                return keys
            if seq <= upto:
                keys.add(key)
        return keys if cursor >= upto or (self.entries and self.entries[0][0] <= cursor + 1) else None


class Informer:
    def __init__(
        self,
        rest: Rest | httpx2.Client,
        kind: Kind,
        *,
        namespace: str | None = None,
        lock: threading.Lock | None = None,
        on_change: OnChange | None = None,
        trim: Callable[[Mapping[str, Any]], Object] | None = None,
        journal: Journal | None = None,
        resync: float = 300.0,
        watch_timeout: float = 300.0,
        read_grace: float = 15.0,
        page_size: int = 500,
        backoff: tuple[float, float] = (0.2, 10.0),
        clock: Callable[[], float] = time.monotonic,
        on_delay: Callable[[str, float], None] | None = None,
        wall: Callable[[], float] = time.time,
        optional: bool = False,
        recheck: float = 60.0,
    ):
        self.rest = as_rest(rest)
        self.kind = kind
        self.optional = optional  # may not be served (its CRD not installed): a 404 is a state, not a failure
        self.recheck = recheck  # seconds between looks at an unserved optional kind
        self.serving: bool | None = None  # guarded by `lock`: None until it has listed, then whether the last list found the kind
        self.namespace = namespace if kind.namespaced else None
        self.lock = lock or threading.Lock()
        self.on_change = on_change
        self.trim = trim or trimmer(kind.kind)
        self.resync = resync
        self.watch_timeout = watch_timeout
        self.read_grace = read_grace  # a watch silent this long past its server time-out is dead
        self.page_size = page_size
        self.backoff = backoff
        self.clock = clock
        self.on_delay = on_delay
        self.wall = wall  # the server's timestamps are wall-clock time
        self.items: dict[Key, Object] = {}  # guarded by `lock`; entries replaced, objects never changed
        self.journal = journal or Journal()  # guarded by `lock`
        self._shared = False  # a snapshot holds `items`: copy before the next change
        self.deleted_here: dict[Key, str] = {}  # guarded by `lock`: deleted by this process, not yet seen gone
        self.resource_version: str = ""  # the last version seen (list, event or bookmark)
        self.lists = 0  # how many times it has listed
        self.last_heard: float | None = None
        self._down_since: float | None = clock()  # None while a watch is open
        self._synced = threading.Event()
        self._stopped = threading.Event()
        self._look_again = threading.Event()  # `recheck_now`: list again without waiting
        self._stream: Stream | None = None
        self._thread: threading.Thread | None = None
        self._listed_at = 0.0

    # ------------------------------------------------------------------ life

    def start(self) -> "Informer":
        where = f"/{self.namespace}" if self.namespace else ""
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.kind.key}{where}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self.signal_stop()
        if self._thread is not None:
            self._thread.join(timeout)

    def signal_stop(self) -> None:
        self._stopped.set()
        self._look_again.set()
        stream = self._stream
        if stream is not None:
            stream.abort()

    def recheck_now(self, *, watching: bool = False) -> None:
        """List again now: an unserved kind at once, not at its next timer; with `watching`,
        a served one too, ending its watch (its CRD was deleted: the list says whether the
        kind is still served)."""
        if self.serving is not False and not watching:
            return
        self._look_again.set()
        stream = self._stream
        if stream is not None and watching:
            stream.abort()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def has_synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def silent_for(self) -> float:
        """Seconds since this informer last heard from the API (a list, an event, a bookmark):
        it grows in a quiet cluster until the next bookmark, so it is no measure of lag."""
        return math.inf if self.last_heard is None else max(self.clock() - self.last_heard, 0.0)

    def disconnected(self) -> float:
        """Seconds since this informer last had a watch open: 0 while one is (a quiet stream
        included: the server would have sent what changed), growing while it lists, backs
        off or cannot reach the API. A stream that died silently counts as open until its
        read time-out (the watch's `timeoutSeconds` plus `read_grace`) ends it."""
        down = self._down_since
        return 0.0 if down is None else max(self.clock() - down, 0.0)

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        failures = 0
        while not self._stopped.is_set():
            try:
                self._look_again.clear()  # a recheck asked for from here on lists once more
                try:
                    self._list()
                except NotFound:
                    if self._stopped.is_set():  # an answer to a list sent before the stop: nothing to do with it
                        break
                    if not self.optional:
                        raise
                    failures = 0
                    self._unserved()
                    self._look_again.wait(self.recheck)
                    continue
                failures = 0
                self._watch()
            except ApiError as exc:
                if self._stopped.is_set():
                    break
                if self._down_since is None:
                    self._down_since = self.clock()
                failures += 1
                # 404 on a list: the server does not serve the kind at all (a CRD not installed)
                hint = " (the API server does not serve this kind: is its CRD installed?)" if exc.code == 404 else ""
                log.warning("informer %s: %s%s; retrying", self.kind.key, exc, hint, extra={"kind": self.kind.key, "code": exc.code})
                self._pause(failures, exc.retry_after)
            except Exception:  # a bug must not silently end the informer: log, back off, carry on
                if self._stopped.is_set():
                    break
                failures += 1
                log.exception("informer %s failed; retrying", self.kind.key)
                self._pause(failures, None)

    # ------------------------------------------------------------------ own writes

    def wrote(self, obj: Mapping[str, Any]) -> None:
        """The server's answer to a create or patch of ours: cache it unless the cache is newer."""
        prepared = self._prepare(obj)
        key = _key(prepared)
        version = _version(prepared)
        with self.lock:
            if _not_after(version, self.resource_version):
                return  # the watch has been past this write already: the cache is as new or newer
            cached = self.items.get(key)
            if cached is not None and _older(version, _version(cached)):
                return
            self._table()[key] = prepared
            self.journal.add(self.kind.key, key)
            self.deleted_here.pop(key, None)

    def deleted(self, namespace: str | None, name: str) -> None:
        """A delete of ours succeeded: the object leaves the cache now."""
        key = (namespace or "", name)
        with self.lock:
            cached = self.items.get(key)
            if cached is None or cached["metadata"].get("deletionTimestamp"):
                return  # gone already, or the watch told us first that something holds it
            del self._table()[key]
            self.journal.add(self.kind.key, key)
            self.deleted_here[key] = _version(cached)

    def share(self) -> dict[Key, Object]:
        """The cache, for a snapshot (call with the lock held): it is copied before it changes again."""
        self._shared = True
        return self.items

    def _table(self) -> dict[Key, Object]:
        if self._shared:
            self.items, self._shared = dict(self.items), False
        return self.items

    # ------------------------------------------------------------------ the loop, continued

    def _list(self) -> None:
        objects, version = self._list_pages()
        self.lists += 1
        self._listed_at = self.clock()
        if self._replace({_key(o): o for o in objects}, version, serving=True) is False:
            log.info("informer %s: the API server serves this kind now", self.kind.key, extra={"kind": self.kind.key})

    def _unserved(self) -> None:
        """The server does not serve the kind (404 on its list): nothing of it exists. Empty
        the cache (a DELETED change for each object it held) and count as synced."""
        was = self._replace({}, "", serving=False)
        self._down_since = None  # not disconnected: there is nothing to watch
        if was is not False:
            level = logging.WARNING if was else logging.INFO  # served until now: its CRD was deleted
            log.log(level, "informer %s: the API server does not serve this kind (is its CRD installed?); "
                    "looking again when a CRD changes, or in %gs", self.kind.key, self.recheck, extra={"kind": self.kind.key})

    def _replace(self, fresh: dict[Key, Object], version: str, *, serving: bool) -> bool | None:
        """Make `fresh` the cache, as of `version`, and `serving` the state, together (under
        the lock); report what changed. Returns the state before."""
        with self.lock:
            was, self.serving = self.serving, serving
            for key, at in list(self.deleted_here.items()):
                if key not in fresh:
                    del self.deleted_here[key]  # the server agrees
                elif _not_after(_version(fresh[key]), at) and not fresh[key]["metadata"].get("deletionTimestamp"):
                    del fresh[key]  # a list begun before our delete
            old, self.items, self._shared = self.items, fresh, False
            self.resource_version = version
            for key in old.keys() | fresh.keys():
                if old.get(key) is None or fresh.get(key) is None or _version(old[key]) != _version(fresh[key]):
                    self.journal.add(self.kind.key, key)
        self._heard()
        self._synced.set()
        for key, obj in old.items():
            if key not in fresh:
                self._notify("DELETED", obj)
        for key, obj in fresh.items():
            before = old.get(key)
            if before is None:
                self._notify("ADDED", obj)
            elif _version(before) != _version(obj):
                self._notify("MODIFIED", obj)
        return was

    def _list_pages(self) -> tuple[list[Object], str]:
        """Every page of one consistent list, each object trimmed as its page comes (a
        list of 262,000 pods is never held whole as the server sent it); an expired
        continue token starts over unpaged."""
        items: list[Object] = []
        params: dict[str, Any] = {"limit": self.page_size} if self.page_size else {}
        while True:
            try:
                page = self.rest.request("GET", self.kind.path(self.namespace), params=params)
            except Gone:
                if "continue" not in params:
                    raise
                items, params = [], {}
                continue
            items += [self._prepare(o) for o in page.get("items") or []]
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                return items, str(meta.get("resourceVersion") or "")
            params = {**params, "continue": meta["continue"]}

    def _watch(self) -> None:
        """Watch until a re-list is due (410, resync) or the informer stops."""
        failures = 0
        while not self._stopped.is_set():
            if self._look_again.is_set():
                return  # `recheck_now` ended the watch: list again
            remaining = self._listed_at + self.resync - self.clock() if self.resync > 0 else math.inf  # 0: never resync
            if remaining <= 0:
                return
            seconds = max(1, math.ceil(min(self.watch_timeout, remaining)))
            params: dict[str, Any] = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": seconds}
            if self.resource_version:
                params["resourceVersion"] = self.resource_version
            try:
                with self.rest.stream(self.kind.path(self.namespace), params, read_timeout=seconds + self.read_grace) as stream:
                    self._stream = stream
                    if self._stopped.is_set():
                        return
                    self._down_since = None
                    failures = 0
                    for line in stream.lines():
                        if not self._event(line):
                            return  # 410 in the stream: list again
            except (Gone, NotFound):
                return  # list again: a 404 says the kind is no longer served (its CRD deleted)
            except ApiError as exc:
                if self._stopped.is_set() or self._look_again.is_set():
                    return
                if exc.code == 504:
                    continue  # a silent watch timed out: watch again
                failures += 1  # once is routine (a proxy's idle time-out); again and again is worth a warning
                log.log(logging.DEBUG if failures == 1 else logging.WARNING, "informer %s: watch failed (%s); watching again",
                        self.kind.key, exc, extra={"kind": self.kind.key})
                self._pause(failures, exc.retry_after)
            finally:
                self._stream = None
                if self._down_since is None:
                    self._down_since = self.clock()

    def _event(self, line: bytes) -> bool:
        """Apply one watch event; False when the stream says to list again."""
        event = msgspec.json.decode(line)
        type_, obj = event.get("type"), event.get("object") or {}
        if type_ == "ERROR":
            error = status_error(obj)
            if isinstance(error, Gone):
                log.debug("informer %s: %s; listing again", self.kind.key, error.message, extra={"kind": self.kind.key})
                return False
            raise error
        version = _version(obj)
        if type_ == "BOOKMARK":
            with self.lock:
                self.resource_version = version or self.resource_version
            self._heard()
            return True
        if type_ not in ("ADDED", "MODIFIED", "DELETED"):
            log.warning("informer %s: unknown watch event type %r ignored", self.kind.key, type_)
            return True
        if self.on_delay is not None and type_ != "DELETED":
            self._delay(type_, obj)
        prepared = self._prepare(obj)
        key = _key(prepared)
        with self.lock:
            self.resource_version = version or self.resource_version
            cached, gone_at = self.items.get(key), self.deleted_here.get(key)
            if type_ == "DELETED":
                if key in self.items:
                    del self._table()[key]
                    self.journal.add(self.kind.key, key)
                self.deleted_here.pop(key, None)
                late = False
            elif gone_at is not None:  # deleted here: only news of the deletion, or a new ADDED, counts
                terminating = bool((prepared.get("metadata") or {}).get("deletionTimestamp"))
                late = (type_ == "MODIFIED" and not terminating) or _not_after(version, gone_at)
            else:  # older than what this process wrote
                late = cached is not None and _older(version, _version(cached))
            if type_ != "DELETED" and not late:
                self._table()[key] = prepared
                self.journal.add(self.kind.key, key)
                self.deleted_here.pop(key, None)
        self._heard()
        if not late:
            self._notify(type_, prepared)
        return True

    # ------------------------------------------------------------------ helpers

    def _prepare(self, obj: Mapping[str, Any]) -> Object:
        out = self.trim(obj)
        if "apiVersion" not in out or "kind" not in out:
            out = {"apiVersion": self.kind.api_version, "kind": self.kind.kind, **out}
        return out

    def _delay(self, type_: str, obj: Mapping[str, Any]) -> None:
        """Report how long this event took from the server's change to here, when the
        object says when that change was (`change_time`)."""
        at = change_time(type_, obj)
        if at is None or self.on_delay is None:
            return
        try:
            self.on_delay(self.kind.key, max(self.wall() - at, 0.0))
        except Exception:  # a metrics hook must not kill the informer
            log.exception("informer %s: on_delay failed", self.kind.key)

    def _heard(self) -> None:
        self.last_heard = self.clock()

    def _notify(self, type_: str, obj: Object) -> None:
        if self.on_change is None:
            return
        try:
            self.on_change(self.kind.key, type_, obj)
        except Exception:  # the operator's hook must not kill the informer
            log.exception("informer %s: on_change failed", self.kind.key)

    def _pause(self, failures: int, retry_after: float | None) -> None:
        low, high = self.backoff
        wait = min(low * 2 ** (failures - 1), high)
        if retry_after is not None:
            wait = max(wait, min(retry_after, 60.0))
        self._stopped.wait(wait)


def change_time(type_: str, obj: Mapping[str, Any]) -> float | None:
    """When the server made the change a watch event reports, if the object says: the
    newest `managedFields[].time` (every write by a manager stamps its entry; a real API
    server keeps them, the local one does not), else an ADDED object's
    `creationTimestamp`. None for anything else (a status write on a server without
    managedFields stamps nothing). Server times are whole seconds, so a delay from them
    is up to a second long."""
    meta = obj.get("metadata") or {}
    stamps = [f.get("time") for f in meta.get("managedFields") or [] if isinstance(f, Mapping)]
    if type_ == "ADDED":
        stamps.append(meta.get("creationTimestamp"))
    times = [_seconds(s) for s in stamps if isinstance(s, str)]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _seconds(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _older(version: str, than: str) -> bool:
    """`version` comes before `than`; False when either is not a number (opaque: no order)."""
    return version.isdigit() and than.isdigit() and int(version) < int(than)


def _not_after(version: str, than: str) -> bool:
    return version == than or _older(version, than)
