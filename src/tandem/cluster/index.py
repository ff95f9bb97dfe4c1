"""The cluster as the controller last saw it, kept up to date with what changed.

Listing six kinds and grouping every pod by its owner cost more than the whole decision
on a settled cluster of 10,000 nodes. A `ClusterIndex`, kept in the `Memo` across
passes, holds the observed objects by kind and key, each group's pods and companions,
and a serial per group that moves whenever one of the group's own objects (itself, a
pod, a companion) changes. Each pass brings it up to date:

- from the keys the world says changed since the index's cursor (`changes_since` on the
  pass's reader: the memory store's journal, the informers' journal), reading only
  those objects;
- from full lists, compared with what it held (by identity, then resourceVersion), when
  the reader keeps no journal, the cursor is too old, or the index is new.

Either way `refresh` returns the changes it found, for the placement snapshot to follow.
The index only mirrors what the reader says; it decides nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable, Mapping

from tandem.api.naming import GROUP_LABEL
from tandem.backends.delegated_kinds import ALL_KEYS as GANG_KINDS
from tandem.cluster.ports import NotFound, Object, Reader

Name = tuple[str, str]  # (namespace or "", name)
GroupKey = tuple[str, str]  # (namespace, group name)
# The kinds whose objects belong to a group by its label (besides its pods): its headless
# Service and peers files, (when provisioning is on) the capacity requests of its units, and
# (when it is delegated) its scheduler's gang objects.
COMPANION_KINDS = ("Service", "ConfigMap", "PodTemplate", "ProvisioningRequest", *GANG_KINDS)


@dataclass(frozen=True)
class Change:
    kind: str
    name: Name
    before: Object | None  # None: it is new
    after: Object | None  # None: it is gone


@dataclass
class ClusterIndex:
    kinds: tuple[str, ...] = ()
    cursor: Hashable | None = None
    objects: dict[str, dict[Name, Object]] = field(default_factory=dict)
    pods_of: dict[GroupKey, dict[Name, Object]] = field(default_factory=dict)
    companions_of: dict[GroupKey, dict[tuple[str, str, str], Object]] = field(default_factory=dict)
    serial: dict[GroupKey, int] = field(default_factory=dict)  # moves when a group's own objects change
    groups_serial: int = 0  # moves when any group, or any object of one, changes
    kind_serial: dict[str, int] = field(default_factory=dict)  # moves when any object of the kind changes
    lists: int = 0  # full lists taken (a new index, no journal, or a cursor too old)
    _next: int = 0

    def refresh(self, reader: Reader, kinds: tuple[str, ...]) -> list[Change]:
        """Bring the index up to the reader's snapshot; the changes found, in key order."""
        feed = getattr(reader, "changes_since", None)
        keys: Iterable[tuple[str, str, str]] | None = None
        cursor: Hashable | None = None
        if feed is not None:
            cursor, keys = feed(self.cursor if kinds == self.kinds else None)
        self.kinds, self.cursor = kinds, cursor
        if keys is None:
            self.lists += 1
            return self._relist(reader, kinds)
        changes = []
        for kind, namespace, name in sorted(k for k in keys if k[0] in kinds):
            try:
                after: Object | None = reader.get(kind, namespace or None, name)
            except NotFound:
                after = None
            change = self._put(kind, (namespace, name), after)
            if change is not None:
                changes.append(change)
        return changes

    def of_kind(self, kind: str) -> Mapping[Name, Object]:
        return self.objects.get(kind, {})

    # ------------------------------------------------------------------ internals

    def _relist(self, reader: Reader, kinds: tuple[str, ...]) -> list[Change]:
        changes = []
        for kind in kinds:
            listed = {_name(obj): obj for obj in reader.list(kind)}
            held = self.objects.get(kind, {})
            for name in sorted(set(held) | set(listed)):
                change = self._put(kind, name, listed.get(name))
                if change is not None:
                    changes.append(change)
        for kind in set(self.objects) - set(kinds):
            for name in sorted(self.objects[kind]):
                change = self._put(kind, name, None)
                if change is not None:
                    changes.append(change)
        return changes

    def _put(self, kind: str, name: Name, after: Object | None) -> Change | None:
        table = self.objects.setdefault(kind, {})
        before = table.get(name)
        if before is after or (before is not None and after is not None and _same_version(before, after)):
            if after is not None:
                table[name] = after
            return None
        if after is None:
            del table[name]
        else:
            table[name] = after
        self._next += 1
        self.kind_serial[kind] = self._next
        if kind == "Pod" or kind in COMPANION_KINDS:
            for obj, present in ((before, False), (after, True)):
                owner = _owner(obj)
                if owner is None:
                    continue
                if kind == "Pod":
                    members: dict[Any, Object] = self.pods_of.setdefault(owner, {})
                    member_key: Any = name
                else:
                    members = self.companions_of.setdefault(owner, {})
                    member_key = (kind, *name)
                if present:
                    members[member_key] = obj  # type: ignore[assignment]
                else:
                    members.pop(member_key, None)
                    if not members:
                        (self.pods_of if kind == "Pod" else self.companions_of).pop(owner, None)
                self._touch(owner)
        elif kind == "InferenceGroup":
            self._touch((name[0], name[1]))
        return Change(kind, name, before, after)

    def _touch(self, group: GroupKey) -> None:
        self._next += 1
        self.serial[group] = self.groups_serial = self._next


def _name(obj: Object) -> Name:
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


def _owner(obj: Object | None) -> GroupKey | None:
    if obj is None:
        return None
    meta = obj["metadata"]
    owner = (meta.get("labels") or {}).get(GROUP_LABEL)
    if owner is None:  # the label removed by hand: still the group's by its owner reference (the pass puts the label back)
        owner = next((r.get("name") for r in meta.get("ownerReferences") or [] if r.get("kind") == "InferenceGroup"), None)
    return None if owner is None else (meta.get("namespace", "default"), owner)


def _same_version(a: Object, b: Object) -> bool:
    """The same version of one object: equal uid and resourceVersion, both present."""
    ma, mb = a["metadata"], b["metadata"]
    version = ma.get("resourceVersion")
    return bool(version) and version == mb.get("resourceVersion") and ma.get("uid") == mb.get("uid") and bool(ma.get("uid"))
