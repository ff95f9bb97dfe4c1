"""Validated models, remembered by resourceVersion between passes.

Validating a group (model, cross-field rules, its topology, its backend) or a Node is a
pure function of the object, and an object with the same uid and resourceVersion is the
same object: a world that keeps one `Memo` across passes (the simulator's runner, the
operator) pays for an object once per change instead of once per pass. A pass without
one (`Memo()` fresh each time) decides exactly the same, only slower.

Bounded: entries of objects not seen in the latest pass are dropped at `sweep()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, TypeVar

T = TypeVar("T")


@dataclass
class Memo:
    _entries: dict[Hashable, Any] = field(default_factory=dict)
    _seen: set[Hashable] = field(default_factory=set)
    hits: int = 0
    misses: int = 0

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        self._seen.add(key)
        if key in self._entries:
            self.hits += 1
            return self._entries[key]
        self.misses += 1
        value = compute()
        self._entries[key] = value
        return value

    def sweep(self) -> None:
        """Forget what the last pass did not ask for (deleted or changed objects)."""
        self._entries = {k: v for k, v in self._entries.items() if k in self._seen}
        self._seen = set()


def version_key(kind: str, obj: dict[str, Any], *more: Hashable) -> tuple[Hashable, ...] | None:
    """(kind, uid, resourceVersion, ...) when the object has both, else None (not memoised)."""
    meta = obj.get("metadata") or {}
    uid, version = meta.get("uid"), meta.get("resourceVersion")
    if not uid or not version:
        return None
    return (kind, uid, version, *more)
