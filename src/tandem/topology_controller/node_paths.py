"""Where each node sits under one list of level labels, kept up to date node by node.

A ClusterTopology's status and its Volcano HyperNodes depend on the nodes only through
their values of the level labels, broadest first. `NodePaths` keeps, for one tuple of
level labels, each node's path: its label values from the broadest level down to the
first label it lacks (a full path when it carries them all), and per level how many
nodes sit under each domain. Told of a node that changed, it updates them in
O(levels), so a pass over 65,536 nodes that sees a rack added costs the rack, not the
cluster. `full_serial` moves only when the set of full paths changes (a new domain, the
last node of one gone): what the renderers read; `serial` moves on any change.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from tandem.api.kube import Node, NodeSpec, NodeStatus, ObjectMeta

Path = tuple[str, ...]


@dataclass(frozen=True)
class LevelCounts:
    """Per level (broadest first): domains, nodes carrying the label (and every broader
    one), nodes lacking it (while carrying every broader one) and the first few of them."""

    domains: tuple[int, ...]
    nodes: tuple[int, ...]
    unlabeled: tuple[int, ...]
    examples: tuple[tuple[str, ...], ...]
    placeable: int  # nodes with a full path
    total: int
    unlabeled_examples: tuple[str, ...]  # the first few nodes lacking any level label


@dataclass
class NodePaths:
    keys: tuple[str, ...]
    # Keys whose value does not matter, only that a node carries them (Volcano reads the
    # hostname label so): their value in a path is "" whatever the node's.
    present: frozenset[str] = frozenset()
    path_of: dict[str, Path] = field(default_factory=dict)  # node name -> its (possibly short) path
    names: dict[Path, set[str]] = field(default_factory=dict)  # full path -> its nodes
    short: list[set[str]] = field(default_factory=list)  # short[d]: nodes lacking keys[d], carrying every broader key
    prefixes: list[Counter[Path]] = field(default_factory=list)  # prefixes[d]: nodes under each domain of level d
    serial: int = 0
    full_serial: int = 0
    _counts: tuple[int, int, LevelCounts] | None = None
    _nodes: dict[Path, Node] = field(default_factory=dict)  # a renderer's node per full path
    _representatives: tuple[int, list[Node]] | None = None

    def __post_init__(self) -> None:
        if not self.short:
            self.short = [set() for _ in self.keys]
            self.prefixes = [Counter() for _ in self.keys]

    @classmethod
    def of(cls, keys: tuple[str, ...], nodes: Iterable[tuple[str, Mapping[str, str]]], present: frozenset[str] = frozenset()) -> "NodePaths":
        paths = cls(keys, present)
        for name, labels in nodes:
            paths.put(name, labels)
        return paths

    def path(self, labels: Mapping[str, str]) -> Path:
        out = []
        for key in self.keys:
            value = labels.get(key)
            if value is None:
                break
            out.append("" if key in self.present else value)
        return tuple(out)

    def put(self, name: str, labels: Mapping[str, str] | None) -> None:
        """Node `name` now has `labels` (None: it is gone)."""
        before = self.path_of.get(name)
        after = None if labels is None else self.path(labels)
        if before == after:
            return
        self.serial += 1
        full = len(self.keys)
        if before is not None:
            del self.path_of[name]
            for depth in range(len(before)):
                prefix = before[: depth + 1]
                self.prefixes[depth][prefix] -= 1
                if not self.prefixes[depth][prefix]:
                    del self.prefixes[depth][prefix]
            if len(before) == full:
                members = self.names[before]
                members.discard(name)
                self._forget(before, lambda first: first == name)  # it was the path's first node
                if not members:
                    del self.names[before]
                    self.full_serial += 1
            else:
                self.short[len(before)].discard(name)
        if after is not None:
            self.path_of[name] = after
            for depth in range(len(after)):
                self.prefixes[depth][after[: depth + 1]] += 1
            if len(after) == full:
                if after not in self.names:
                    self.names[after] = set()
                    self.full_serial += 1
                self.names[after].add(name)
                self._forget(after, lambda first: name < first)  # it comes first now
            else:
                self.short[len(after)].add(name)

    def _forget(self, path: Path, moved: Callable[[str], bool]) -> None:
        """Drop the path's kept node when its first node by name `moved`."""
        kept = self._nodes.get(path)
        if kept is not None and moved(kept.metadata.name):
            del self._nodes[path]
            self._representatives = None

    def counts(self, examples: int) -> LevelCounts:
        """The per-level figures, computed once per change."""
        if self._counts is not None and self._counts[:2] == (self.serial, examples):
            return self._counts[2]
        short = [heapq.nsmallest(examples, names) for names in self.short]
        placeable = sum(len(names) for names in self.names.values())
        counts = LevelCounts(
            domains=tuple(len(p) for p in self.prefixes),
            nodes=tuple(sum(p.values()) for p in self.prefixes),
            unlabeled=tuple(len(names) for names in self.short),
            examples=tuple(tuple(s) for s in short),
            placeable=placeable,
            total=len(self.path_of),
            unlabeled_examples=tuple(heapq.nsmallest(examples, (n for s in short for n in s))),
        )
        self._counts = (self.serial, examples, counts)
        return counts

    def representatives(self) -> list[Node]:
        """One node per full path (the first by name), carrying only the level labels, as
        a renderer reads them: what a scheduler's topology objects are built from is the
        set of full paths, so the renderer reads one node per path instead of every node."""
        if self._representatives is not None and self._representatives[0] == self.full_serial:
            return self._representatives[1]
        kept = self._nodes
        for path, members in self.names.items():
            if path not in kept:
                kept[path] = _node(min(members), dict(zip(self.keys, path)))
        nodes = [kept[path] for path in sorted(self.names)]
        self._representatives = (self.full_serial, nodes)
        return nodes


def _node(name: str, labels: dict[str, Any]) -> Node:
    """A Node model without validation: its name and labels are all a renderer reads."""
    meta = ObjectMeta.model_construct(name=name, labels=labels, annotations={}, namespace=None, creation_timestamp=None)
    return Node.model_construct(api_version="v1", kind="Node", metadata=meta, spec=NodeSpec(), status=NodeStatus.model_construct(allocatable={}, conditions=[]))
