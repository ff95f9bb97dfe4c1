"""Observe: one snapshot of everything a pass decides from, read once.

Six lists (InferenceGroups, ClusterTopologies, Nodes, Pods, and the Services and
ConfigMaps tandem made) through the `Reader` of one consistent snapshot; pods and those
companions are grouped by the group that owns them, and each group is validated once
(see `validity`). Nothing here writes, and nothing later in the pass reads
the cluster again.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tandem.api.naming import GROUP_LABEL
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.controller.memo import Memo, version_key
from tandem.controller.ports import Object, Reader
from tandem.controller.validity import group_problems, topologies_of
from tandem.errors import Problem


# What a pass reads, and so what a world must list (and an operator watch): the kinds here.
OBSERVED_KINDS = ("InferenceGroup", "ClusterTopology", "Node", "Pod", "Service", "ConfigMap")


@dataclass(frozen=True)
class GroupState:
    raw: Object
    typed: InferenceGroup | None  # None when the object does not even parse
    problems: tuple[Problem, ...]  # empty for a valid group
    pods: tuple[Object, ...]  # the group's pods, deleting ones included
    companions: tuple[Object, ...] = ()  # its headless Service and peers ConfigMaps

    @property
    def key(self) -> tuple[str, str]:
        return (self.raw["metadata"].get("namespace", "default"), self.raw["metadata"]["name"])

    @property
    def valid(self) -> bool:
        return self.typed is not None and not self.problems


@dataclass(frozen=True)
class ClusterState:
    groups: tuple[GroupState, ...]
    topologies: dict[str, ClusterTopology]
    nodes: tuple[Object, ...]
    pods: tuple[Object, ...]  # every pod (other workloads hold capacity too)
    deleting_groups: tuple[Object, ...] = field(default_factory=tuple)
    topology_versions: tuple[tuple[str, str], ...] = ()
    memo: Memo = field(default_factory=Memo, compare=False, repr=False)  # validated models, by version

    @property
    def size(self) -> int:
        return len(self.groups) + len(self.nodes) + len(self.pods) + len(self.deleting_groups)

    def settled_key(self, group: GroupState) -> tuple[Any, ...] | None:
        """The versions of everything deciding `group` reads: itself, its pods and companions,
        the ClusterTopologies (None when an object has no uid or version)."""
        versions = []
        for obj in (*group.pods, *group.companions):
            meta = obj["metadata"]
            if not meta.get("uid") or not meta.get("resourceVersion"):
                return None
            versions.append((meta["uid"], meta["resourceVersion"]))
        return version_key("InferenceGroup", group.raw, "settled", tuple(sorted(versions)), self.topology_versions)

    def live_versions(self) -> set[tuple[str, str, str]]:
        """(kind, uid, resourceVersion) of every object a memo entry may be about."""
        out: set[tuple[str, str, str]] = set()
        for kind, objects in (("InferenceGroup", [g.raw for g in self.groups]), ("Node", self.nodes), ("Pod", self.pods)):
            for obj in objects:
                meta = obj["metadata"]
                out.add((kind, meta.get("uid", ""), meta.get("resourceVersion", "")))
        return out


def observe(reader: Reader, memo: Memo | None = None) -> ClusterState:
    """`memo` remembers validated models across passes (see `memo.py`); the state is the same without it."""
    memo = Memo() if memo is None else memo
    raw_groups = reader.list("InferenceGroup")
    raw_topologies = reader.list("ClusterTopology")
    topologies, _ = topologies_of(raw_topologies)
    topology_versions = tuple(sorted((t["metadata"]["name"], t["metadata"].get("resourceVersion", "")) for t in raw_topologies))
    nodes = tuple(reader.list("Node"))
    pods = tuple(reader.list("Pod"))
    by_group = _by_group(pods)
    companions = _by_group([*reader.list("Service", labels=GROUP_LABEL), *reader.list("ConfigMap", labels=GROUP_LABEL)])
    groups, deleting = [], []
    for raw in raw_groups:
        if raw["metadata"].get("deletionTimestamp"):
            deleting.append(raw)  # its pods go with it (owner references); nothing to decide
            continue
        key = version_key("InferenceGroup", raw, topology_versions)
        if key is None:
            typed, problems = group_problems(raw, topologies)
        else:
            typed, problems = memo.get(key, lambda raw=raw: group_problems(raw, topologies))
        key = (raw["metadata"].get("namespace", "default"), raw["metadata"]["name"])
        groups.append(GroupState(raw, typed, tuple(problems), tuple(by_group.get(key, ())), tuple(companions.get(key, ()))))
    return ClusterState(tuple(groups), topologies, nodes, pods, tuple(deleting), topology_versions, memo)


def _by_group(objects: list[Object] | tuple[Object, ...]) -> dict[tuple[str, str], list[Object]]:
    out: dict[tuple[str, str], list[Object]] = defaultdict(list)
    for obj in objects:
        meta = obj["metadata"]
        owner = (meta.get("labels") or {}).get(GROUP_LABEL)
        if owner is not None:
            out[(meta.get("namespace", "default"), owner)].append(obj)
    return out
