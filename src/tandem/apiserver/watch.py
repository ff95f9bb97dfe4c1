"""Watches: the events of one resource (in one namespace, or all), as the real server streams them.

- Without a `resourceVersion` (or with "0"), the current objects come first as ADDED, then
  every change; with one, every change after it. One older than the history the store
  keeps gets an ERROR event carrying a 410 `Expired` Status, and the stream ends (the
  client lists again), as the real server answers it.
- Label and field selectors filter: an object that stops matching is sent as DELETED, one
  that starts matching as ADDED. For a watch that starts from a resourceVersion, what
  matched then is replayed from the store's history (once the history no longer reaches
  back that far, what matches when the watch starts stands in for it).
- `allowWatchBookmarks`: a BOOKMARK carrying the current resourceVersion after every
  `bookmark_every` seconds without events, and just before the stream ends.
  `sendInitialEvents=true` ends the initial ADDED events with a BOOKMARK annotated
  `k8s.io/initial-events-end`.
- `timeoutSeconds` ends the stream (default 30 minutes); so does the server stopping, and
  a test's fault hook cutting watches (`faults.py`; a version it compacted away is 410).
A watch holds its own thread and waits on the state's lock between changes.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Generator

from tandem.apiserver import tables
from tandem.apiserver.error_status import gone_event
from tandem.apiserver.kinds import Resource
from tandem.apiserver.server_state import State
from tandem.apiserver.verbs import check_selectors, present
from tandem.cluster.selectors import matches, matches_fields, parse_fields
from tandem.errors import BadRequest, Gone

DEFAULT_TIMEOUT_S = 1800.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def events(
    state: State,
    resource: Resource,
    namespace: str | None,
    params: dict[str, str],
    *,
    table: bool = False,
    bookmark_every: float = 10.0,
    monotonic: Callable[[], float] = time.monotonic,
) -> Generator[dict[str, Any], None, None]:
    """The watch's events, as they happen, until it times out or the server stops
    (`check(params)` first: a generator raises only once it is read)."""
    timeout = check(params)
    labels = params.get("labelSelector") or None
    fields = parse_fields(params.get("fieldSelector") or None)
    since = params.get("resourceVersion") or ""
    bookmarks = params.get("allowWatchBookmarks") in ("true", "1")
    initial_events = params.get("sendInitialEvents") == "true" or since in ("", "0")
    deadline = monotonic() + timeout
    faults = state.faults  # a test's hook: watches cut, history compacted (`faults.py`)
    epoch = faults.epoch if faults is not None else 0

    def shown(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        obj = present(resource, obj)
        if table:
            obj = tables.table(resource, [obj], state.clock(), params.get("includeObject") or "Metadata",
                               {"resourceVersion": obj["metadata"].get("resourceVersion", "")})
        return {"type": kind, "object": obj}

    def bookmark(version: str, initial_end: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"resourceVersion": version}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        return {"type": "BOOKMARK", "object": {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": meta}}

    with state.lock:
        current = state.store.list(resource.key, namespace, labels, params.get("fieldSelector") or None)
        inside = {_key(o) for o in current}
        if initial_events:
            since = state.store.resource_version
        elif labels or fields:
            then = _matching_at(state, resource, namespace, since, labels, fields)
            inside = inside if then is None else then
    if initial_events:
        for obj in current:
            yield shown("ADDED", obj)
        if params.get("sendInitialEvents") == "true" and bookmarks:
            yield bookmark(since, initial_end=True)
    quiet_since = monotonic()
    while True:
        out: list[dict[str, Any]] = []
        gone: str | None = None
        with state.lock:
            while True:
                if state.stopping:
                    return
                if faults is not None and faults.epoch != epoch:
                    return  # cut
                try:
                    if faults is not None and faults.too_old(since):
                        raise Gone(f"too old resource version: {since} ({faults.compacted})")
                    changes = state.store.watch(resource.key, since, namespace)
                except Gone as exc:
                    gone = exc.message
                    break
                if changes:
                    break
                since = state.store.resource_version  # nothing of this kind since: safe to move on
                now = monotonic()
                if now >= deadline or (bookmarks and now - quiet_since >= bookmark_every):
                    break
                wait = deadline - now
                if bookmarks:
                    wait = min(wait, quiet_since + bookmark_every - now)
                state.lock.wait(max(min(wait, 1.0), 0.001))
            if gone is None:
                for change in changes:
                    since = change.resource_version
                    filtered = _filtered(change.type, change.object, inside, labels, fields)
                    if filtered is not None:
                        out.append(shown(*filtered))
        if gone is not None:
            yield gone_event(gone)
            return
        for event in out:
            yield event
        now = monotonic()
        if out:
            quiet_since = now
        elif bookmarks and (now - quiet_since >= bookmark_every or now >= deadline):
            yield bookmark(since)
            quiet_since = now
        if now >= deadline:
            return


def check(params: dict[str, str]) -> float:
    """The watch's time-out in seconds; BadRequest for a malformed selector, resourceVersion or time-out."""
    check_selectors(params)
    since = params.get("resourceVersion") or ""
    if since and not since.isdigit():
        raise BadRequest(f"resourceVersion: invalid value {since!r}")
    return _seconds(params.get("timeoutSeconds"), DEFAULT_TIMEOUT_S)


def _matching_at(state: State, resource: Resource, namespace: str | None, version: str, labels: str | None, fields: Any) -> set[tuple[str, str]] | None:
    """Which objects matched the selectors at `version`, replayed from the store's history;
    None once the history no longer reaches back to the first write."""
    try:
        history = state.store.watch(resource.key, "0", namespace)
    except Gone:
        return None
    objects: dict[tuple[str, str], dict[str, Any]] = {}
    for change in history:
        if int(change.resource_version) > int(version):
            break
        if change.type == "DELETED":
            objects.pop(_key(change.object), None)
        else:
            objects[_key(change.object)] = change.object
    return {key for key, obj in objects.items() if matches(labels, (obj.get("metadata") or {}).get("labels") or {}) and matches_fields(fields, obj)}


def _filtered(kind: str, obj: dict[str, Any], inside: set[tuple[str, str]], labels: str | None, fields: Any) -> tuple[str, dict[str, Any]] | None:
    """The event as this watch's selectors see it, or None when it is not theirs."""
    key = _key(obj)
    was = key in inside
    now = matches(labels, (obj.get("metadata") or {}).get("labels") or {}) and matches_fields(fields, obj)
    if kind == "DELETED":
        inside.discard(key)
        return (kind, obj) if was or now else None
    if now:
        inside.add(key)
        return ("ADDED" if not was else "MODIFIED", obj) if kind == "MODIFIED" else (kind, obj)
    if was:
        inside.discard(key)
        return ("DELETED", obj)
    return None


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def _seconds(text: str | None, default: float) -> float:
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise BadRequest(f"timeoutSeconds: invalid value {text!r}") from None
    return value if value > 0 else default
