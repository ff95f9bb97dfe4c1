"""Counting what fits: pods per node, complete replicas per domain (upper bounds).

Counts are taken bottom-up over the nodes that can take at least one pod of the unit
(`Counts.nodes`): on a busy cluster of tens of thousands of nodes those are a small share,
and a node that takes none of the unit's pods adds nothing to any of its bounds.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import cached_property
from typing import Mapping, Protocol

import numpy as np

from tandem.placement.space import unique_inverse
from tandem.placement.unit_state import RoleState, UnitState
from tandem.topology import TopologyView

# A per-domain sum a rollup keeps (`rollup.Rollup.sum`): (name, role index, depth); the
# role is -1 for the sums of every role ("free", "slots", "taken", "present").
SumKind = tuple[str, int, int]
EVERY_ROLE = -1


class SharedSums(Protocol):
    """The per-domain sums counts may read instead of summing their nodes again: a
    `rollup.Rollup`, at the version the counts were taken at."""

    version: int

    def sum(self, kind: SumKind) -> np.ndarray: ...

    def children(self, depth: int, top: int, domain: int) -> np.ndarray: ...


def fit(free: np.ndarray, vec: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """How many pods of shape `vec` each node (row of `free`) can still take: the least,
    over the resources the pod asks for, of free // asked (0 where not `ok`). Most calls
    ask about a rack of a few dozen nodes, so the cost is per numpy call: the divisors
    are Python ints, the columns are walked in Python, and a column asked for once (the
    `pods` slot of every shape) needs no division after the first."""
    counts: np.ndarray | None = None
    for column, asked in enumerate(vec.tolist()):
        if asked > 0:
            here = free[:, column]
            if counts is None:
                counts = here // asked  # a new array: written to below
            else:
                np.minimum(counts, here if asked == 1 else here // asked, out=counts)
    if counts is None:
        raise ValueError("a pod shape asks for nothing (every shape holds one `pods` slot)")
    counts *= ok
    return counts


def member(values: np.ndarray, present: np.ndarray, size: int) -> np.ndarray:
    """[values]: whether each value (an id below `size`) is among `present`; np.isin
    without its sort, for the small arrays placement asks about thousands of times."""
    marks = np.zeros(size + 1, dtype=bool)  # the last one for -1: a node missing the level
    marks[present[present >= 0]] = True
    out: np.ndarray = marks[values]
    return out


def sum_by(groups: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Exact int64 sums of `values` per group: bincount while float64 holds the total exactly."""
    if values.size == 0 or int(values.max()) * values.size < 2**53:
        return np.bincount(groups, weights=values, minlength=size).astype(np.int64)
    out = np.zeros(size, np.int64)
    np.add.at(out, groups, values)
    return out


def sum_in(view: TopologyView, depth: int, groups: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`sum_by` into every domain at `depth` of `view`, `groups` being distinct nodes'
    domains there: where each domain holds one node (hosts), a scatter, not a bincount
    over tens of thousands of domains."""
    size = view.domain_count(depth)
    if view.single_node_domains(depth):
        out = np.zeros(size, np.int64)
        out[groups] = values
        return out
    return sum_by(groups, values, size)


def replica_capacity(role: RoleState, k_leader: np.ndarray, k_worker: np.ndarray, groups: np.ndarray, size: int) -> np.ndarray:
    """Upper bound on the complete replicas of `role` each group of nodes can hold."""
    leaders = np.bincount(groups, weights=k_leader, minlength=size).astype(np.int64)
    if role.pods == 1:
        return leaders
    if role.same_shape:
        return leaders // role.pods
    workers = np.bincount(groups, weights=k_worker, minlength=size).astype(np.int64)
    return np.minimum(leaders, workers // (role.pods - 1))


def replica_depth(role: RoleState, unit_depth: int) -> int:
    """The depth a replica must stay within when its unit is packed at `unit_depth`."""
    return unit_depth if role.required_depth is None else max(unit_depth, role.required_depth)


@dataclass
class Counts:
    """Bottom-up counts for one unit on one state of free capacity.

    `nodes` are the unit's usable nodes that can take at least one of its pods now;
    per-domain bounds at any depth are memoised, since choosing a domain asks for the
    same depths several times. Resource sums cover only the resources the unit asks
    for (`columns`); `vector` and `free_by_domain` are over those, and `dominant` is the
    position of the unit's dominant resource among them.
    """

    unit: UnitState
    nodes: np.ndarray  # snapshot node indices, ascending
    columns: np.ndarray  # resource indices the unit requests
    free: np.ndarray  # free[nodes][:, columns]
    k_leader: list[np.ndarray]  # per role: leaders each of `nodes` can take
    k_worker: list[np.ndarray]
    _capacity: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)
    _free: dict[int, np.ndarray] = field(default_factory=dict)
    shared: SharedSums | None = None  # the rollup these counts came from, if any
    version: int = 0  # its version when they did

    @classmethod
    def count(cls, unit: UnitState, free: np.ndarray, within: np.ndarray | None = None) -> "Counts":
        """Counts over all nodes, or over `within` (node indices) only, counted in full."""
        candidates = unit.allowed.nonzero()[0] if within is None else within[unit.allowed[within]]
        columns = unit.asked_columns
        rows = free.take(candidates, axis=0).take(columns, axis=1)  # (C order; `take`: far cheaper than indexing)
        k_leader, k_worker = [], []
        active = np.zeros(candidates.size, dtype=bool)
        for role in unit.roles:
            leaders = fit(rows, role.leader[columns], role.leader_ok[candidates])
            workers = leaders if role.same_shape or role.pods == 1 else fit(rows, role.worker[columns], role.worker_ok[candidates])
            active |= leaders > 0
            if role.pods > 1:
                active |= workers > 0
            k_leader.append(leaders)
            k_worker.append(workers)
        if active.all():
            return cls(unit, candidates, columns, rows, k_leader, k_worker)
        keep = active.nonzero()[0]
        return cls(unit, candidates[keep], columns, rows.take(keep, axis=0), [k[keep] for k in k_leader], [k[keep] for k in k_worker])

    def _shared(self, kind: SumKind) -> np.ndarray | None:
        """The rollup's sum of `kind`, when these counts are its current ones."""
        if self.shared is None or self.shared.version != self.version:
            return None
        return self.shared.sum(kind)

    def local(self, depth: int) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
        """(domains, free, capacity per role) at `depth` over only the domains the counted
        nodes are in: for a few hundred nodes inside a cluster of tens of thousands of
        hosts, arrays over every domain would cost more than the counting."""
        view = self.unit.view
        groups = {depth: unique_inverse(view.dom[depth][self.nodes])}
        domains, inverse = groups[depth]
        free = np.stack([sum_by(inverse, self.free[:, c], domains.size) for c in range(self.free.shape[1])], axis=1)
        capacity = {}
        for r, role in enumerate(self.unit.roles):
            inner = replica_depth(role, depth)
            if inner not in groups:
                groups[inner] = unique_inverse(view.dom[inner][self.nodes])
            subs, sub_inverse = groups[inner]
            per_sub = replica_capacity(role, self.k_leader[r], self.k_worker[r], sub_inverse, subs.size)
            if inner == depth:
                capacity[r] = per_sub
                continue
            where = np.searchsorted(domains, view.ancestor[inner][depth][subs])
            capacity[r] = np.bincount(where, weights=per_sub, minlength=domains.size).astype(np.int64)
        return domains, free, capacity

    def inside(self, depth: int, domain: int) -> "Counts | Inside":
        """The same counts over the nodes of one domain, for `local` and `taken_local`:
        read from the rollup's per-domain sums when these counts are its current ones
        (a domain below `domain` holds the same nodes either way)."""
        if self.shared is not None and self.shared.version == self.version:
            return Inside(self, self.shared, depth, domain)
        return self.restrict(self.unit.view.dom[depth][self.nodes] == domain)

    def restrict(self, mask: np.ndarray) -> "Counts":
        """The same counts over the nodes where `mask` (over `nodes`) holds."""
        keep = mask.nonzero()[0]
        return Counts(self.unit, self.nodes[keep], self.columns, self.free.take(keep, axis=0), [k[keep] for k in self.k_leader], [k[keep] for k in self.k_worker])

    @cached_property
    def dominant(self) -> int:
        """Position of the unit's dominant resource among `columns` (np.searchsorted's,
        on a list: a handful of columns, asked once per count)."""
        return bisect.bisect_left(self.columns.tolist(), self.unit.dominant)

    def capacity(self, r: int, depth: int) -> np.ndarray:
        """[domains at depth]: upper bound on complete replicas of role `r` in each domain."""
        key = (r, depth)
        if key not in self._capacity and (shared := self._shared(("capacity", r, depth))) is not None:
            self._capacity[key] = shared
        if key not in self._capacity:
            view = self.unit.view
            role = self.unit.roles[r]
            inner = replica_depth(role, depth)
            sub = view.dom[inner][self.nodes]
            per_sub = replica_capacity(role, self.k_leader[r], self.k_worker[r], sub, view.domain_count(inner))
            if inner == depth:
                self._capacity[key] = per_sub
            else:
                ancestor = view.ancestor[inner][depth]
                self._capacity[key] = np.bincount(ancestor, weights=per_sub, minlength=view.domain_count(depth)).astype(np.int64)
        return self._capacity[key]

    def pod_slots(self, depth: int) -> np.ndarray:
        """[domains at depth]: upper bound on the unit's pods each domain can take at
        once — per node the most pods of any one shape. Each role's count alone can pass
        while together they cannot: four 8-GPU prefill and two decode pairs of 8-GPU pods
        each see five whole free hosts, but the unit needs eight."""
        key = (-1, depth)
        if key not in self._capacity and (shared := self._shared(("slots", EVERY_ROLE, depth))) is not None:
            self._capacity[key] = shared
        if key not in self._capacity:
            view = self.unit.view
            most = np.zeros(self.nodes.size, np.int64)
            for r, role in enumerate(self.unit.roles):
                np.maximum(most, self.k_leader[r], out=most)
                if role.pods > 1:
                    np.maximum(most, self.k_worker[r], out=most)
            self._capacity[key] = sum_in(view, depth, view.dom[depth][self.nodes], most)
        return self._capacity[key]

    def taken_by_domain(self, depth: int) -> np.ndarray:
        """[domains at depth]: counted nodes per domain that this plan already gave pods to
        (their free capacity in the unit's dominant resource is below the snapshot's).
        Placing a unit's first gang, those are other units' nodes: between domains equal
        in every other respect, the one fewer other units use lets each unit keep to its
        own nodes while it grows, whatever the names. (Asked for hosts only: numbers of
        broader domains follow their own names, which renaming nodes does not change.)"""
        key = (-2, depth)
        if key not in self._capacity and (shared := self._shared(("taken", EVERY_ROLE, depth))) is not None:
            self._capacity[key] = shared
        if key not in self._capacity:
            view = self.unit.view
            self._capacity[key] = sum_in(view, depth, view.dom[depth][self.nodes], self._taken())
        return self._capacity[key]

    def taken_local(self, depth: int, domains: np.ndarray) -> np.ndarray:
        """`taken_by_domain` over `domains` only (sorted, holding every counted node)."""
        where = np.searchsorted(domains, self.unit.view.dom[depth][self.nodes])
        return sum_by(where, self._taken(), domains.size)

    def _taken(self) -> np.ndarray:
        """[nodes]: 1 where this plan already gave the node a pod, else 0."""
        snapshot = self.unit.view.snapshot
        column = self.unit.dominant
        before = np.maximum(snapshot.allocatable[self.nodes, column] - snapshot.used[self.nodes, column], 0)
        taken: np.ndarray = (self.free[:, self.dominant] != before).astype(np.int64)
        return taken

    def free_by_domain(self, depth: int) -> np.ndarray:
        """[domains at depth, resources]: free capacity of the counted nodes per domain."""
        if depth not in self._free and (shared := self._shared(("free", EVERY_ROLE, depth))) is not None:
            self._free[depth] = shared
        if depth not in self._free:
            view = self.unit.view
            groups = view.dom[depth][self.nodes]
            out = np.zeros((view.domain_count(depth), self.free.shape[1]), np.int64)
            for c in range(self.free.shape[1]):
                out[:, c] = sum_in(view, depth, groups, self.free[:, c])
            self._free[depth] = out
        return self._free[depth]

    def vector(self, counts: Mapping[int, int]) -> np.ndarray:
        """Total resources of `counts` (role index -> complete replicas), over `columns`."""
        out = np.zeros(self.unit.roles[0].replica_total.size, np.int64)
        for r, count in counts.items():
            out += count * self.unit.roles[r].replica_total
        over_columns: np.ndarray = out[self.columns]
        return over_columns


@dataclass
class Inside:
    """`Counts.restrict` to one domain (`top`, `domain`), answered from the full counts'
    per-domain sums instead of summing its nodes again."""

    counts: Counts
    shared: SharedSums  # the counts' rollup, at their version
    top: int
    domain: int

    def local(self, depth: int) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
        """As `Counts.local` (`depth` below `top`): the domains inside that hold a counted node."""
        counts = self.counts
        children = self.shared.children(depth, self.top, self.domain)
        domains = children[self.shared.sum(("present", EVERY_ROLE, depth))[children] > 0]  # those holding a counted node
        capacity = {r: counts.capacity(r, depth)[domains] for r in range(len(counts.unit.roles))}
        return domains, counts.free_by_domain(depth).take(domains, axis=0), capacity  # (`take`: far cheaper than indexing rows)

    def taken_local(self, depth: int, domains: np.ndarray) -> np.ndarray:
        taken: np.ndarray = self.counts.taken_by_domain(depth)[domains]
        return taken

