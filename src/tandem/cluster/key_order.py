"""Each kind's keys in list order, as of a store version, kept up to date from the journal.

A list answers in key order: (kind, namespace, name). Sorting a kind's keys for every list
cost the local API server most of its time at 65,536 nodes (262,000 pods: a `kubectl get
pods -n serving` polled every few milliseconds sorted them each time, with the server's
lock held). `KeyOrder` keeps, per kind, the sorted keys of the last version it was asked
for; asked for a later version, it inserts or removes only the keys the journal says were
written or deleted since; with the journal too short, or for an older version, it sorts again. A namespace is a contiguous run
of its kind's keys, found by bisection (`in_namespace`), as etcd keeps a namespace's
objects under one prefix.

The list it hands out is the one it keeps: read it before the store is asked again, and
never change it. Guarded like the store that owns it (every caller holds the store's lock,
or the store has one thread).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from typing import Callable, Collection, Container

Key = tuple[str, str, str]  # (kind, namespace or "", name)


class KeyOrder:
    def __init__(self, journal: deque[tuple[int, Key]]):
        self._journal = journal  # (version, key) of every write and delete, the latest kept
        self._cache: dict[str, tuple[int, list[Key]]] = {}  # kind -> (version, its keys then, sorted)

    def keys(self, kind: str, version: int, present: Container[Key], all_keys: Callable[[], Collection[Key]]) -> list[Key]:
        """The keys of `kind` stored at `version`, sorted. `present`: the objects as of
        `version` (a key changed since the cached version is kept if in it); `all_keys`:
        every key of the kind then (or more keys: the others are filtered out), for when the
        journal does not reach back to the cached version."""
        cached = self._cache.get(kind)
        if cached is not None and cached[0] == version:
            return cached[1]
        changed = None if cached is None or cached[0] > version else self._changed(kind, cached[0], version)
        if cached is None or changed is None:
            keys = sorted(k for k in all_keys() if k[0] == kind and k in present)
        else:
            # Patched in place: only the latest version is kept, and a snapshot of an older
            # one sorts afresh (above), so no reader is handed this list at its old version again.
            keys = cached[1]
            for key in sorted(changed):
                at = bisect_left(keys, key)
                held = at < len(keys) and keys[at] == key
                if key in present and not held:
                    keys.insert(at, key)
                elif held and key not in present:
                    del keys[at]
        if cached is None or cached[0] < version:
            self._cache[kind] = (version, keys)
        return keys

    def _changed(self, kind: str, since: int, version: int) -> set[Key] | None:
        """The keys of `kind` written or deleted after `since` up to `version`; None when the
        journal no longer reaches back to `since`."""
        journal = self._journal
        if not journal or journal[0][0] > since + 1:
            return None if since < version else set()
        changed = set()
        for at, key in reversed(journal):
            if at <= since:
                break
            if at <= version and key[0] == kind:
                changed.add(key)
        return changed


def in_namespace(keys: list[Key], kind: str, namespace: str) -> list[Key]:
    """The run of `keys` (one kind's, sorted) in `namespace`."""
    low = bisect_left(keys, (kind, namespace, ""))
    high = bisect_left(keys, (kind, namespace + "\x00", ""), low)
    return keys[low:high]
