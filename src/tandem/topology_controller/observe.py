"""Observe: what a topology pass decides from, read once from one snapshot.

Through the memo's `ClusterIndex` (only what changed since the last pass, when the reader
can say), it gathers:
- the ClusterTopologies, raw and typed (the same checks as `tandem validate`: the model
  and `check_topology`); one that does not pass is kept raw with its problems;
- the nodes as name and labels only, folded into the paths of each level list in use
  (`NodePaths`): no model per node, a node that changed costs O(levels);
- the InferenceGroups as (namespace, name, spec.topologyName);
- the objects of each enabled backend's kinds, split into tandem's (both ownership
  labels) and the rest, and Kueue's ResourceFlavors when Kueue is enabled.
Nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from pydantic import ValidationError

from tandem.api.loading import validation_problems
from tandem.api.resources import ClusterTopology
from tandem.api.topology_admission import named_topology
from tandem.api.validation import check_topology
from tandem.cluster.index import Change
from tandem.cluster.ports import Object, Reader
from tandem.errors import Problem
from tandem.topology_controller.kinds import BACKEND_KINDS, RESOURCE_FLAVOR, NodeKeys, render_keys
from tandem.topology_controller.memo import TopologyMemo
from tandem.topology_controller.node_paths import NodePaths
from tandem.topology_controller.ownership import owner_topology

BASE_KINDS = ("ClusterTopology", "InferenceGroup", "Node")


@dataclass(frozen=True)
class TopologyState:
    raw: Object
    typed: ClusterTopology | None  # None when it does not pass tandem's checks
    problems: tuple[Problem, ...] = ()

    @property
    def name(self) -> str:
        return str(self.raw["metadata"]["name"])

    @property
    def deleting(self) -> bool:
        return bool(self.raw["metadata"].get("deletionTimestamp"))

    @property
    def level_keys(self) -> NodeKeys | None:
        """The node labels of its levels (what its status counts), None when it is invalid."""
        return None if self.typed is None else (tuple(level.node_label for level in self.typed.spec.levels), frozenset())


@dataclass(frozen=True)
class GroupUse:
    """An InferenceGroup as the topology controller reads it: who names which topology."""

    namespace: str
    name: str
    topology: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class World:
    topologies: tuple[TopologyState, ...]  # by name
    groups: tuple[GroupUse, ...]  # by namespace, name
    paths: Mapping[NodeKeys, NodePaths]  # per key of a valid topology's levels and of each enabled backend's renderer
    nodes: int
    backends: tuple[str, ...]  # enabled, sorted
    owned: Mapping[str, Mapping[str, Object]]  # kind -> name -> tandem's objects
    foreign: Mapping[str, Mapping[str, Object]]  # kind -> name -> everyone else's
    flavors: Mapping[str, Object] = field(default_factory=dict)  # Kueue ResourceFlavors, by name
    memo: TopologyMemo = field(default_factory=TopologyMemo, compare=False, repr=False)

    def users(self, topology: str) -> tuple[GroupUse, ...]:
        return tuple(g for g in self.groups if g.topology == topology)


def observed_kinds(backends: tuple[str, ...]) -> tuple[str, ...]:
    kinds = list(BASE_KINDS)
    for backend in sorted(backends):
        kinds += [k.key for k in BACKEND_KINDS[backend] if k.key not in kinds]
    return tuple(kinds)


def observe(reader: Reader, backends: tuple[str, ...], memo: TopologyMemo | None = None) -> World:
    memo = TopologyMemo() if memo is None else memo
    index = memo.index
    changes = index.refresh(reader, observed_kinds(backends))
    for change in changes:
        memo.kind_serial[change.kind] = memo.kind_serial.get(change.kind, 0) + 1
    _follow_nodes(memo, changes)
    topologies = tuple(_topology(memo, raw) for _, raw in sorted(index.of_kind("ClusterTopology").items()))
    nodes = index.of_kind("Node")
    in_use = {keys for t in topologies if (keys := t.level_keys) is not None}
    in_use |= {render_keys(backend, t.typed) for t in topologies if t.typed is not None for backend in backends}
    for keys in in_use - set(memo.paths):
        memo.paths[keys] = NodePaths.of(keys[0], ((name, _labels(obj)) for (_, name), obj in nodes.items()), keys[1])
    memo.keep_only({t.name for t in topologies}, in_use)
    groups = tuple(
        GroupUse(namespace or "default", name, named_topology(obj))
        for (namespace, name), obj in sorted(index.of_kind("InferenceGroup").items())
        if isinstance(obj.get("spec"), dict)
    )
    owned: dict[str, dict[str, Object]] = {}
    foreign: dict[str, dict[str, Object]] = {}
    flavors: dict[str, Object] = {}
    for backend in sorted(backends):
        for kind in BACKEND_KINDS[backend]:
            if kind == RESOURCE_FLAVOR:
                flavors = {name: obj for (_, name), obj in sorted(index.of_kind(kind.key).items())}
            else:
                owned[kind.key], foreign[kind.key] = _split(memo, kind.key, changes)
    memo.split = {kind: memo.split[kind] for kind in owned}
    return World(topologies, groups, dict(memo.paths), len(nodes), tuple(sorted(backends)), owned, foreign, flavors, memo)


def _split(memo: TopologyMemo, kind: str, changes: list[Change]) -> tuple[dict[str, Object], dict[str, Object]]:
    """The kind's objects split into tandem's and the others', by name: built once from the
    index, then kept up to date from the changes (unordered: readers sort what they report)."""
    kept = memo.split.get(kind)
    if kept is None:
        mine: dict[str, Object] = {}
        theirs: dict[str, Object] = {}
        for (_, name), obj in memo.index.of_kind(kind).items():
            (mine if owner_topology(obj) is not None else theirs)[name] = obj
        memo.split[kind] = (mine, theirs)
        return mine, theirs
    mine, theirs = kept
    for change in changes:
        if change.kind != kind:
            continue
        name = change.name[1]
        mine.pop(name, None)
        theirs.pop(name, None)
        if change.after is not None:
            (mine if owner_topology(change.after) is not None else theirs)[name] = change.after
    return mine, theirs


def _labels(obj: Object) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _follow_nodes(memo: TopologyMemo, changes: list[Change]) -> None:
    """Tell every kept `NodePaths` of the nodes whose labels changed (or that came or went)."""
    for change in changes:
        if change.kind != "Node":
            continue
        before = None if change.before is None else _labels(change.before)
        after = None if change.after is None else _labels(change.after)
        if before == after and change.before is not None:
            continue
        for paths in memo.paths.values():
            paths.put(change.name[1], after)


def _topology(memo: TopologyMemo, raw: Object) -> TopologyState:
    meta = raw["metadata"]
    name = str(meta["name"])
    version = (meta.get("uid"), meta.get("resourceVersion"))
    kept = memo.parsed.get(name)
    if kept is not None and kept[0] == version and version[1] and kept[1].raw is raw:
        state: TopologyState = kept[1]
        return state
    state = _parse(raw)
    memo.parsed[name] = (version, state)
    return state


def _parse(raw: Object) -> TopologyState:
    body = {k: v for k, v in raw.items() if k != "status"}
    try:
        typed = ClusterTopology.model_validate(body)
    except ValidationError as exc:
        return TopologyState(raw, None, tuple(validation_problems(body, exc, "")))
    problems = check_topology(typed)
    return TopologyState(raw, None if problems else typed, tuple(problems))
