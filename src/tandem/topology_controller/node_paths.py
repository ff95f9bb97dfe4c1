"""Where each node sits under one list of level labels, kept up to date node by node.

A ClusterTopology's status and its Volcano HyperNodes depend on the nodes only through
their values of the level labels, broadest first. `NodePaths` keeps, for one tuple of
level labels, each node's path: its label values from the broadest level down to the
first label it lacks (a full path when it carries them all). Told of each node that
changed, it updates its counts in O(levels), so a pass over 65,536 nodes that sees one
rack added costs the rack, not the cluster. `full_serial` moves only when the set of full
paths changes (a new rack, the last node of one gone): what the renderers read; `serial`
moves on any change: what the status reads.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

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
    path_of: dict[str, Path] = field(default_factory=dict)  # node name -> its (possibly short) path
    count: Counter[Path] = field(default_factory=Counter)  # path -> nodes on it
    names: dict[Path, set[str]] = field(default_factory=dict)  # full path -> its nodes
    short: list[set[str]] = field(default_factory=list)  # short[d]: nodes lacking keys[d], carrying every broader key
    serial: int = 0
    full_serial: int = 0
    _counts: tuple[int, LevelCounts] | None = None
    _representatives: tuple[int, list[Node]] | None = None

    def __post_init__(self) -> None:
        if not self.short:
            self.short = [set() for _ in self.keys]

    @classmethod
    def of(cls, keys: tuple[str, ...], nodes: Iterable[tuple[str, Mapping[str, str]]]) -> "NodePaths":
        paths = cls(keys)
        for name, labels in nodes:
            paths.put(name, labels)
        return paths

    def path(self, labels: Mapping[str, str]) -> Path:
        out = []
        for key in self.keys:
            value = labels.get(key)
            if value is None:
                break
            out.append(value)
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
            self.count[before] -= 1
            if not self.count[before]:
                del self.count[before]
            if len(before) == full:
                members = self.names[before]
                members.discard(name)
                if not members:
                    del self.names[before]
                    self.full_serial += 1
            else:
                self.short[len(before)].discard(name)
        if after is not None:
            self.path_of[name] = after
            self.count[after] += 1
            if len(after) == full:
                if after not in self.names:
                    self.names[after] = set()
                    self.full_serial += 1
                self.names[after].add(name)
            else:
                self.short[len(after)].add(name)

    def counts(self, examples: int) -> LevelCounts:
        """The per-level figures, computed once per change."""
        if self._counts is not None and self._counts[0] == self.serial:
            return self._counts[1]
        levels = len(self.keys)
        prefixes: list[set[Path]] = [set() for _ in range(levels)]
        nodes = [0] * levels
        for path, count in self.count.items():
            for depth in range(len(path)):
                prefixes[depth].add(path[: depth + 1])
                nodes[depth] += count
        short = [heapq.nsmallest(examples, names) for names in self.short]
        counts = LevelCounts(
            domains=tuple(len(p) for p in prefixes),
            nodes=tuple(nodes),
            unlabeled=tuple(len(names) for names in self.short),
            examples=tuple(tuple(s) for s in short),
            placeable=sum(len(names) for names in self.names.values()),
            total=len(self.path_of),
            unlabeled_examples=tuple(heapq.nsmallest(examples, (n for s in short for n in s))),
        )
        self._counts = (self.serial, counts)
        return counts

    def representatives(self) -> list[Node]:
        """One node per full path (the first by name), carrying only the level labels, as
        a renderer reads them: what a scheduler's topology objects are built from is the
        set of full paths, so the renderer reads one node per path instead of every node."""
        if self._representatives is not None and self._representatives[0] == self.full_serial:
            return self._representatives[1]
        nodes = [_node(min(self.names[path]), dict(zip(self.keys, path))) for path in sorted(self.names)]
        self._representatives = (self.full_serial, nodes)
        return nodes


def _node(name: str, labels: dict[str, Any]) -> Node:
    """A Node model without validation: its name and labels are all a renderer reads."""
    meta = ObjectMeta.model_construct(name=name, labels=labels, annotations={}, namespace=None, creation_timestamp=None)
    return Node.model_construct(api_version="v1", kind="Node", metadata=meta, spec=NodeSpec(), status=NodeStatus.model_construct(allocatable={}, conditions=[]))
