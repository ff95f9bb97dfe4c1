"""Validated models, remembered by resourceVersion between passes.

Validating a group (model, cross-field rules, its topology, its backend) or a Node is a
pure function of the object, and an object with the same uid and resourceVersion is the
same object: a world that keeps one `Memo` across passes (the simulator's runner, the
operator) pays for an object once per change instead of once per pass. A pass without
one (`Memo()` fresh each time) decides exactly the same, only slower.

It keeps the last placement snapshot and domain trees (`topology.incremental`), brought
up to date with the nodes and pods that changed. It also remembers which groups a pass found settled (nothing written, nothing waiting for
a node), keyed by the versions of everything their decision read, and until when (their
next deadline): decide skips such a group while those versions hold and the deadline has
not come, since the same inputs before the same deadline decide the same nothing.

Bounded: `sweep(live)` drops the entries of objects that no longer exist at the version
they were validated at, once the memo holds more than twice as many entries as there are
live objects (so a steady pass, which validates no Node, does not forget the Nodes the
next placement needs, and the cost of sweeping is spread over many passes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Hashable, TypeVar

from tandem.topology.incremental import SnapshotCache

T = TypeVar("T")


@dataclass
class Memo:
    _entries: dict[tuple[Hashable, ...], Any] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0
    settled_hits: int = 0  # groups a pass skipped as settled
    placement: SnapshotCache = field(default_factory=SnapshotCache)  # the last placement snapshot, kept up to date

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple[Hashable, ...], compute: Callable[[], T]) -> T:
        if key in self._entries:
            self.hits += 1
            return self._entries[key]
        self.misses += 1
        value = compute()
        self._entries[key] = value
        return value

    def settled_until(self, key: tuple[Hashable, ...] | None) -> float | None:
        """When a group found settled with exactly these inputs next has a deadline (None: not known settled)."""
        until = None if key is None else self._entries.get(key)
        self.settled_hits += until is not None
        return until

    def remember_settled(self, settled: Collection[tuple[tuple[Hashable, ...], float]]) -> None:
        for key, until in settled:
            self._entries[key] = until

    def sweep(self, live: Callable[[], Collection[tuple[Hashable, Hashable, Hashable]]], objects: int) -> None:
        """Forget deleted and changed objects when the memo has grown past twice the
        `objects` that exist; `live()` gives their (kind, uid, resourceVersion)."""
        if len(self._entries) <= 2 * objects + 64:
            return
        alive = set(live())
        self._entries = {k: v for k, v in self._entries.items() if k[:3] in alive}


def version_key(kind: str, obj: dict[str, Any], *more: Hashable) -> tuple[Hashable, ...] | None:
    """(kind, uid, resourceVersion, ...) when the object has both, else None (not memoised)."""
    meta = obj.get("metadata") or {}
    uid, version = meta.get("uid"), meta.get("resourceVersion")
    if not uid or not version:
        return None
    return (kind, uid, version, *more)
