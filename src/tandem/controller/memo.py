"""Validated models, remembered by resourceVersion between passes.

Validating a group (model, cross-field rules, its topology, its backend) or a Node is a
pure function of the object, and an object with the same uid and resourceVersion is the
same object: a world that keeps one `Memo` across passes (the simulator's runner, the
operator) pays for an object once per change instead of once per pass. A pass without
one (`Memo()` fresh each time) decides exactly the same, only slower.

It keeps the cluster as last observed (`index.py`: objects by kind, pods by group, what
changed), each group's state while its inputs hold, and the placement snapshot and
domain trees (`topology.incremental`), told of every Node and Pod that changed. It also
remembers which groups a pass found settled (nothing written), with the inputs their
decision read and until when (their next deadline): decide skips such a group while
those inputs hold and the deadline has not come, since the same inputs before the same
deadline decide the same nothing. A group with pods waiting for a node is skipped only
while no capacity has come free either (a placement on less room places nothing more).

Bounded: a validation keyed by (kind, uid, resourceVersion, ...) replaces the one of the
object's previous version (a group's status is written often, and each write is a new
version); `sweep(live)` drops the validations of groups that no longer exist at the
version they were validated at, once there are more than twice as many as live groups;
the per-group entries go with their group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Hashable, TypeVar

from tandem.cluster.index import ClusterIndex, GroupKey
from tandem.topology.incremental import SnapshotCache

T = TypeVar("T")


@dataclass
class Memo:
    _entries: dict[tuple[Hashable, ...], Any] = field(default_factory=dict)
    _latest: dict[tuple[Hashable, ...], tuple[Hashable, ...]] = field(default_factory=dict)  # (kind, uid) -> its entry's key
    hits: int = 0
    misses: int = 0
    settled_hits: int = 0  # groups a pass skipped as settled
    placement: SnapshotCache = field(default_factory=SnapshotCache)  # the last placement snapshot, kept up to date
    index: ClusterIndex = field(default_factory=ClusterIndex)  # the cluster as last observed
    group_states: dict[GroupKey, tuple[Any, ...]] = field(default_factory=dict)  # (raw, serial, topologies, GroupState)
    groups: tuple[Any, ...] | None = None  # (stamp, GroupStates, deleting groups) while no group changes
    unusable: dict[tuple[str, tuple[str, str]], str] = field(default_factory=dict)  # Nodes and Pods that do not validate
    placement_keys: dict[tuple[str, tuple[str, str]], bytes] = field(default_factory=dict)  # digest of what the snapshot last read of each
    settled: dict[GroupKey, tuple[tuple[Hashable, ...], float, int | None]] = field(default_factory=dict)  # inputs, until, freed
    idle_placement: tuple[Any, ...] | None = None  # the inputs of the last placement, when it placed nothing
    # When the last decision skipped every group as settled: what they all read (decide's
    # `_quiet_stamp`) and the earliest of their deadlines. While both hold, so does the skip.
    quiet: tuple[Any, float] | None = None
    served: frozenset[str] = frozenset()  # the served kinds, kept as one object while they stay (settled keys compare it by identity)
    # What the group's last decision read of its units (decide's `_Reads`), for the next
    # decision of the same spec: a unit whose pods did not change is not read again.
    unit_reads: dict[GroupKey, Any] = field(default_factory=dict)
    # The writes the API refused for good in the group's last decided pass (see `Rejection`):
    # unlike the rest, not a saving but a fact only apply learns, which the next decision
    # tells in the group's Degraded condition (an empty memo forgets it until the write fails again).
    rejected: dict[GroupKey, tuple["Rejection", ...]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple[Hashable, ...], compute: Callable[[], T]) -> T:
        if key in self._entries:
            self.hits += 1
            kept: T = self._entries[key]  # stored by this method from `compute`, so a T
            return kept
        self.misses += 1
        value = compute()
        self._entries[key] = value
        if len(key) >= 3:
            older = self._latest.get(key[:2])
            if older is not None and older != key:
                self._entries.pop(older, None)
            self._latest[key[:2]] = key
        return value

    def settled_until(self, group: GroupKey, inputs: tuple[Hashable, ...] | None) -> float | None:
        """When `group`, found settled with exactly these inputs, next has a deadline (None:
        not known settled). A group that was waiting for capacity is settled only while
        none has come free since (the placement snapshot's `freed` count). Reads only."""
        kept = self.settled.get(group)
        until = kept[1] if kept is not None and inputs is not None and kept[0] == inputs else None
        if until is not None and kept is not None and kept[2] is not None and kept[2] != self.placement.freed:
            until = None
        return until

    def remember(self, update: MemoUpdate) -> None:
        """Keep what a decision says to remember (decide returns it; it writes nothing)."""
        self.settled_hits += update.settled_hits
        for group, inputs, until, freed in update.settled:
            self.settled[group] = (inputs, until, freed)
        self.unit_reads.update(update.unit_reads)
        self.quiet = update.quiet
        if update.placement_ran:
            self.idle_placement = update.idle_placement

    def remember_rejections(self, decided: Collection[GroupKey], rejected: dict[GroupKey, list["Rejection"]]) -> list[tuple[GroupKey, "Rejection"]]:
        """Keep, for each group a pass decided, the writes refused in it (none: forget);
        returns those not already known, to be reported once."""
        fresh = []
        for group in decided:
            known = self.rejected.pop(group, ())
            now = tuple(rejected.get(group, ()))
            if now:
                self.rejected[group] = now
            fresh += [(group, r) for r in now if r not in known]
        return fresh

    def sweep(self, live: Callable[[], Collection[tuple[Hashable, Hashable, Hashable]]], groups: Callable[[], Collection[GroupKey]], count: int) -> None:
        """Forget what is about groups that are gone or changed, once there is more than
        twice as much as the `count` groups that exist; `live()` gives their (kind, uid,
        resourceVersion), `groups()` their keys."""
        if len(self.group_states) > count or len(self.settled) > count or len(self.unit_reads) > count:
            present = set(groups())
            self.group_states = {k: v for k, v in self.group_states.items() if k in present}
            self.settled = {k: v for k, v in self.settled.items() if k in present}
            self.unit_reads = {k: v for k, v in self.unit_reads.items() if k in present}
            self.rejected = {k: v for k, v in self.rejected.items() if k in present}
        if len(self._entries) <= 2 * count + 64:
            return
        alive = set(live())
        self._entries = {k: v for k, v in self._entries.items() if k[:3] in alive}
        self._latest = {k[:2]: k for k in self._entries if len(k) >= 3}


@dataclass(frozen=True)
class Rejection:
    """A write the API refused and will refuse again as sent (403, 409 AlreadyExists, 422):
    the object, the code and the server's words."""

    action: str  # e.g. "create Service serving/llama-70b"
    code: int
    reason: str
    message: str

    def __str__(self) -> str:
        return f"{self.action}: {self.code} {self.reason}: {self.message}"


@dataclass(frozen=True)
class MemoUpdate:
    """What one decision leaves for the next, returned by `decide` and kept by `Memo.remember`."""

    # Groups found settled (nothing to write), with the versions of everything their
    # decision read, when their next deadline comes (inf: none) and, for a group with pods
    # waiting for a node, the placement snapshot's `freed` count then (else None): until
    # the deadline, while no capacity comes free, the same inputs decide nothing again.
    settled: tuple[tuple[GroupKey, tuple[Hashable, ...], float, int | None], ...] = ()
    settled_hits: int = 0  # groups the decision skipped as settled
    unit_reads: tuple[tuple[GroupKey, Any], ...] = ()  # each decided group's reads of its units
    # Whether the engine ran; if so, the inputs of that placement when it placed nothing (else None).
    placement_ran: bool = False
    idle_placement: tuple[Any, ...] | None = None
    # Every group skipped as settled (none decided): what they read and their earliest
    # deadline, for the next decision to skip them all at once while both hold (else None).
    quiet: tuple[Any, float] | None = None


def version_key(kind: str, obj: dict[str, Any], *more: Hashable) -> tuple[Hashable, ...] | None:
    """(kind, uid, resourceVersion, ...) when the object has both, else None (not memoised)."""
    meta = obj.get("metadata") or {}
    uid, version = meta.get("uid"), meta.get("resourceVersion")
    if not uid or not version:
        return None
    return (kind, uid, version, *more)
