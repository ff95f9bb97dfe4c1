"""The domain tree of a ClusterTopology over a snapshot's nodes.

Depth 0 is the root (the whole cluster); depth k is the topology's k-th level, broadest
first. A domain is identified by the label values on the path from the root, so a rack
named `r1` in two blocks is two domains. Domains are numbered in sorted order, which makes
every choice that breaks ties by domain number deterministic.

For each depth the view keeps: the domain of every node (`dom`), the labelled nodes of
each domain as a contiguous slice of one sorted index, and each domain's ancestor at every
broader depth (`ancestor`). Those follow the labels only; which nodes are usable follows
schedulability, so a node going NotReady changes `usable` and nothing else, and the
member lists of usable nodes (`members`, `rollup`) are drawn from the sorted index when
first read (a mask, no sorting). Roll-ups are `np.bincount` over those arrays.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from tandem.api.resources import ClusterTopology
from tandem.topology.snapshot import ClusterSnapshot

ROOT = 0


@dataclass(frozen=True, eq=False)
class TopologyView:
    topology: ClusterTopology
    snapshot: ClusterSnapshot
    level_names: tuple[str, ...]  # index = depth; depth 0 is "cluster"
    usable: np.ndarray  # [nodes] bool: schedulable and labelled for every level
    dom: tuple[np.ndarray, ...]  # [depth][node] -> domain id, -1 for nodes missing a level label
    names: tuple[tuple[str, ...], ...]  # [depth][domain] -> display name
    ancestor: tuple[tuple[np.ndarray, ...], ...]  # [depth][broader depth][domain] -> domain
    _order: tuple[np.ndarray, ...]  # [depth] labelled nodes sorted by domain, then node
    # depth -> (usable nodes sorted by domain, starts): drawn from `_order` when first read;
    # shared by views of the same `usable`, and a view with another gets a new one.
    _usable_members: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)
    # What follows from the labels alone (`single_node_domains`, `node_of_domain`), worked
    # out when first asked: shared by every view `rebased` from this one (same labels).
    _label_facts: dict[tuple[str, int], object] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, topology: ClusterTopology, snapshot: ClusterSnapshot) -> "TopologyView":
        levels = topology.spec.levels
        paths: list[tuple[str, ...] | None] = []
        for i, name in enumerate(snapshot.node_names):
            labels = snapshot.labels[i]
            missing = [lv for lv in levels if lv.node_label not in labels]
            paths.append(None if missing else tuple(labels[lv.node_label] for lv in levels))
        labelled = np.array([p is not None for p in paths], dtype=bool)
        usable = labelled & snapshot.schedulable

        doms: list[np.ndarray] = [np.where(labelled, ROOT, -1).astype(np.int64)]
        names: list[tuple[str, ...]] = [("cluster",)]
        keys_per_depth: list[list[tuple[str, ...]]] = [[()]]
        for depth in range(1, len(levels) + 1):
            # Every labelled node has a domain (an existing pod on a cordoned node still
            # says where its unit lives); only usable nodes are members that hold capacity.
            keys = sorted({p[:depth] for p in paths if p is not None})
            index = {key: d for d, key in enumerate(keys)}
            doms.append(np.array([index[p[:depth]] if p is not None else -1 for p in paths], dtype=np.int64))
            names.append(_display_names(keys))
            keys_per_depth.append(keys)
        ancestors: list[tuple[np.ndarray, ...]] = []
        for depth, keys in enumerate(keys_per_depth):
            per_broader = []
            for broader in range(depth + 1):
                lookup = {key: d for d, key in enumerate(keys_per_depth[broader])}
                per_broader.append(np.array([lookup[key[:broader]] for key in keys], dtype=np.int64))
            ancestors.append(tuple(per_broader))
        orders = _sorted_by_domain(doms, labelled)
        return cls(
            topology=topology,
            snapshot=snapshot,
            level_names=("cluster", *(lv.name for lv in levels)),
            usable=usable,
            dom=tuple(doms),
            names=tuple(names),
            ancestor=tuple(ancestors),
            _order=orders,
        )

    def rebased(self, snapshot: ClusterSnapshot, changed: np.ndarray | None = None) -> "TopologyView":
        """This tree over `snapshot`: the same nodes with the same labels, whose
        schedulability may differ (usable nodes follow; the member lists are drawn again
        when next read). `changed`: the only nodes whose schedulability may differ, when
        known (then a lone node going NotReady costs a copy, not a pass over every node)."""
        if changed is None:
            usable = (self.dom[0] >= 0) & snapshot.schedulable
            if np.array_equal(usable, self.usable):
                return dataclasses.replace(self, snapshot=snapshot)
        else:
            now = (self.dom[0][changed] >= 0) & snapshot.schedulable[changed]
            if np.array_equal(now, self.usable[changed]):
                return dataclasses.replace(self, snapshot=snapshot)
            usable = self.usable.copy()
            usable[changed] = now
        return dataclasses.replace(self, snapshot=snapshot, usable=usable, _usable_members={})

    @cached_property
    def exclusions(self) -> tuple[tuple[str, str], ...]:
        """(node, reason) for each node this tree cannot use: a level label missing, or a problem."""
        return _exclusions(self.topology, self.snapshot, self.dom[0] >= 0)

    # ------------------------------------------------------------------ structure

    @property
    def depth_count(self) -> int:
        """Number of depths including the root."""
        return len(self.level_names)

    def depth(self, level: str | None) -> int:
        """Depth of a level name; None (no constraint) is the root."""
        return 0 if level is None else self.level_names.index(level)

    def domain_count(self, depth: int) -> int:
        return len(self.names[depth])

    def members(self, depth: int, domain: int) -> np.ndarray:
        """Usable nodes of a domain, in node order."""
        order, starts = self._usable(depth)
        return order[starts[domain] : starts[domain + 1]]

    def _usable(self, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """(usable nodes sorted by domain, where each domain's slice starts) at `depth`."""
        kept = self._usable_members.get(depth)
        if kept is None:
            order = self._order[depth]
            order = order[self.usable[order]]
            counts = np.bincount(self.dom[depth][order], minlength=self.domain_count(depth))
            kept = self._usable_members[depth] = (order, np.concatenate(([0], np.cumsum(counts))).astype(np.int64))
        return kept

    def single_node_domains(self, depth: int) -> bool:
        """Whether every domain at `depth` holds at most one labelled node (hosts, as a
        rule): then a per-domain sum over nodes is a scatter, not a bincount."""
        key = ("single", depth)
        if key not in self._label_facts:
            labelled = self.dom[depth][self.dom[depth] >= 0]
            self._label_facts[key] = bool(labelled.size == 0 or np.bincount(labelled).max() <= 1)
        return bool(self._label_facts[key])

    def node_of_domain(self, depth: int) -> np.ndarray:
        """[domains at depth]: a labelled node of each domain (the last by number; read-only)."""
        key = ("node", depth)
        if key not in self._label_facts:
            nodes = np.zeros(self.domain_count(depth), np.int64)
            labelled = (self.dom[depth] >= 0).nonzero()[0]
            nodes[self.dom[depth][labelled]] = labelled
            nodes.flags.writeable = False
            self._label_facts[key] = nodes
        out = self._label_facts[key]
        assert isinstance(out, np.ndarray)
        return out

    def domain_name(self, depth: int, domain: int) -> str:
        return self.names[depth][domain]

    def node_domain(self, node: int, depth: int) -> int:
        return int(self.dom[depth][node])

    def narrowest(self, nodes: np.ndarray) -> tuple[int, int] | None:
        """(depth, domain) of the narrowest domain holding every one of `nodes` (node indices)."""
        if nodes.size == 0:
            return None
        for depth in range(self.depth_count - 1, -1, -1):
            doms = self.dom[depth][nodes]
            if doms[0] >= 0 and np.all(doms == doms[0]):
                return depth, int(doms[0])
        return None

    def label(self, depth: int, domain: int) -> str:
        """`level/name`, as plans and status report a domain."""
        return f"{self.level_names[depth]}/{self.domain_name(depth, domain)}"

    # ------------------------------------------------------------------ capacity

    def rollup(self, per_node: np.ndarray, depth: int) -> np.ndarray:
        """Sum a per-node array (1-D, or 2-D with a column per resource) into the domains at `depth`.

        Unusable nodes belong to no domain and are left out.
        """
        nodes = self._usable(depth)[0]
        groups = self.dom[depth][nodes]
        size = self.domain_count(depth)
        if per_node.ndim == 1:
            return np.bincount(groups, weights=per_node[nodes], minlength=size).astype(per_node.dtype)
        values = per_node[nodes]
        columns = [np.bincount(groups, weights=values[:, c], minlength=size) for c in range(values.shape[1])]
        return np.stack(columns, axis=1).astype(per_node.dtype) if columns else np.zeros((size, 0), per_node.dtype)

    def free_by_domain(self, free: np.ndarray, depth: int) -> np.ndarray:
        """[domains, resources]: free capacity of usable nodes per domain at `depth`."""
        return self.rollup(free, depth)

    # ------------------------------------------------------------------ distance

    def lowest_common_depth(self, a: int, b: int) -> int:
        """Depth of the narrowest domain holding both nodes (0: only the cluster)."""
        common = 0
        for depth in range(1, self.depth_count):
            if self.dom[depth][a] < 0 or self.dom[depth][a] != self.dom[depth][b]:
                break
            common = depth
        return common

    def lowest_common_level(self, a: str, b: str) -> str:
        """Name of the narrowest level whose domain holds both nodes ("cluster" if none)."""
        index = self.snapshot.node_index
        return self.level_names[self.lowest_common_depth(index[a], index[b])]

    def bandwidth_gbps(self, a: str, b: str) -> float | None:
        """Link bandwidth between two nodes: that of their lowest common level, if stated."""
        index = self.snapshot.node_index
        depth = self.lowest_common_depth(index[a], index[b])
        if depth == 0:
            return None
        return self.topology.spec.levels[depth - 1].link_bandwidth_gbps


def _sorted_by_domain(doms: list[np.ndarray], nodes: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per depth: the `nodes` (a mask) sorted by domain, then node."""
    indices = np.nonzero(nodes)[0]
    return tuple(indices[np.argsort(dom[indices], kind="stable")] for dom in doms)


def _exclusions(topology: ClusterTopology, snapshot: ClusterSnapshot, labelled: np.ndarray) -> tuple[tuple[str, str], ...]:
    """(node, reason) for each node this tree cannot use: a level label missing, or a problem."""
    out = []
    for i in np.nonzero(~labelled | ~snapshot.schedulable)[0].tolist():
        name, labels = snapshot.node_names[i], snapshot.labels[i]
        if not labelled[i]:
            missing = next(lv for lv in topology.spec.levels if lv.node_label not in labels)
            out.append((name, f"missing label {missing.node_label} (level {missing.name})"))
        elif i in snapshot.problems:
            out.append((name, snapshot.problems[i]))
    return tuple(out)


def _display_names(keys: list[tuple[str, ...]]) -> tuple[str, ...]:
    """A domain's own label value, or its path where the value repeats across parents."""
    counts = Counter(key[-1] for key in keys)
    repeated = {value for value, count in counts.items() if count > 1}
    return tuple("/".join(key) if key[-1] in repeated else key[-1] for key in keys)
