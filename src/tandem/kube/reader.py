"""Readers: over a snapshot of the informer caches (a pass's view), or straight from the API.

`CacheReader` holds copies of the caches' dicts taken at one instant under the cluster's
lock; the objects are shared with the informers, which never change one in place (a new
version replaces the old), so the snapshot stays as it was while the world moves on.
Selectors are those of the other worlds (`tandem.cluster.selectors`), parsed once per
call so a malformed one fails even when nothing is cached.

`LiveReader` asks the API server each time: for the few objects a process must read fresh
and cannot afford to watch (the leader election Lease: RBAC grants `get` on it alone).
"""

from __future__ import annotations

import builtins
import threading
from typing import TYPE_CHECKING, Hashable, Mapping

from tandem.cluster.ports import NotFound, Object, Selector
from tandem.cluster.selectors import matches_fields, parse, parse_fields
from tandem.errors import BadRequest
from tandem.kube.kinds import kind_of
from tandem.kube.rest import Rest

if TYPE_CHECKING:
    from tandem.kube.informer import Journal

Key = tuple[str, str]


class CacheReader:
    def __init__(
        self,
        caches: Mapping[str, Mapping[Key, Object]],
        live: "LiveReader | None" = None,
        live_kinds: frozenset[str] = frozenset(),
        journal: "tuple[Journal, threading.Lock, int] | None" = None,
    ):
        self._caches = caches
        self._live = live
        self._live_kinds = live_kinds
        self._journal = journal

    def changes_since(self, cursor: Hashable | None) -> tuple[Hashable, set[tuple[str, str, str]] | None]:
        """(this snapshot's cursor, the keys (kind, namespace or "", name) changed after
        `cursor` up to this snapshot); None for the keys when that is not known (no cursor,
        or one older than the journal keeps): then the caller lists everything."""
        if self._journal is None:
            return None, None
        journal, lock, seq = self._journal
        if not isinstance(cursor, int) or cursor > seq:
            return seq, None
        with lock:
            return seq, journal.since(cursor, seq)

    def get(self, kind: str, namespace: str | None, name: str) -> Object:
        if kind in self._live_kinds and self._live is not None:
            return self._live.get(kind, namespace, name)
        k = kind_of(kind)
        obj = self._cache(kind).get((k.namespace_of(namespace) or "", name))
        if obj is None:
            raise NotFound(f"{kind} {_where(k.namespace_of(namespace), name)} not found")
        return obj

    def list(self, kind: str, namespace: str | None = None, labels: Selector = None, fields: Selector = None) -> list[Object]:
        if kind in self._live_kinds and self._live is not None:
            return self._live.list(kind, namespace, labels, fields)
        return select(self._cache(kind).items(), kind_of(kind).namespaced, namespace, labels, fields)

    def kinds(self) -> builtins.list[str]:  # `list` here is the method above
        return sorted(self._caches)

    def _cache(self, kind: str) -> Mapping[Key, Object]:
        cache = self._caches.get(kind)
        if cache is None:
            raise BadRequest(f"{kind} is not watched by this cluster's informers (watched: {', '.join(sorted(self._caches))})")
        return cache


class LiveReader:
    """Every call is a request; the answers are as fresh as the server's."""

    def __init__(self, rest: Rest):
        self.rest = rest

    def get(self, kind: str, namespace: str | None, name: str) -> Object:
        k = kind_of(kind)
        obj = self.rest.request("GET", k.path(k.namespace_of(namespace), name))
        return {"apiVersion": k.api_version, "kind": k.kind, **obj}

    def list(self, kind: str, namespace: str | None = None, labels: Selector = None, fields: Selector = None) -> list[Object]:
        k = kind_of(kind)
        answer = self.rest.request("GET", k.path(namespace if k.namespaced else None))
        items = [{"apiVersion": k.api_version, "kind": k.kind, **o} for o in answer.get("items") or []]
        keyed = [(((o.get("metadata") or {}).get("namespace") or "", (o.get("metadata") or {}).get("name", "")), o) for o in items]
        return select(keyed, k.namespaced, namespace, labels, fields)


def select(items, namespaced: bool, namespace: str | None, labels: Selector, fields: Selector) -> list[Object]:  # type: ignore[no-untyped-def]
    """The matching objects in (namespace, name) order; `namespace` is ignored for cluster-scoped kinds."""
    label_requirements = parse(labels)
    field_requirements = parse_fields(fields)
    out = []
    for (ns, _), obj in sorted(items, key=lambda item: item[0]):
        if namespaced and namespace is not None and ns != namespace:
            continue
        object_labels = (obj.get("metadata") or {}).get("labels") or {}
        if all(r.matches(object_labels) for r in label_requirements) and matches_fields(field_requirements, obj):
            out.append(obj)
    return out


def _where(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name
