"""Counts kept current: one unit shape's bottom-up counts, updated where free capacity changed.

A plan of a thousand units of one group asks for the same counts (`capacity.Counts`) a
thousand times, over free capacity that changed on a few nodes since the last time (the
last gang's). Counting every node again each time was most of the batch's cost. So per
shape (roles' vectors and eligible nodes, the nodes open to the unit, the dominant
resource) the per-node counts over every node and the per-domain sums asked for are kept,
and on the next call only the rows whose free capacity differs are counted again and
their difference added to the sums. The figures are the integers a full count gives:
which rows changed is found by comparing, never assumed, so any `free` may be passed
(a trial copy, the empty cluster). Arrays handed out are never written to afterwards:
the per-node arrays never leave (only copies of their active rows do), so an update
writes them in place; a sum is written in place until `sum` hands it out, and copied
by the next update after that (the copy is the rollup's own again).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tandem.placement.capacity import Counts, SumKind, fit, replica_depth, sum_by, sum_in
from tandem.placement.rows import any_differ
from tandem.placement.unit_state import RoleState, UnitState

# More changed rows than this share of the nodes: counting everything again is cheaper.
_REBUILD_SHARE = 8
# Shapes kept per plan; beyond, a new shape is counted in full each time.
_MOST_SHAPES = 64

# A unit shape as `_shape_key` tells it: ids of the view and open nodes, the dominant
# resource, and per role its vectors, ids of its masks, pods, pack depth, one shape or not.
ShapeKey = tuple[int, int, int, tuple[tuple[bytes, bytes, int, int, int, int | None, bool], ...]]
# A sum's kind without its depth: each node adds the same to it at every depth.
SumBase = tuple[str, int]
# (nodes, rows, k_leader, k_worker) over the nodes that take a pod of the shape
ActiveRows = tuple[np.ndarray, np.ndarray, list[np.ndarray], list[np.ndarray]]


class Rollups:
    """The plan's rollups by unit shape (shared by its units, like `Ties`)."""

    def __init__(self) -> None:
        self._by_shape: dict[ShapeKey, Rollup] = {}

    def counts(self, unit: UnitState, free: np.ndarray) -> Counts:
        """`Counts.count(unit, free)` over every node open to the unit, kept current."""
        if unit.allowed is not unit.eligible:
            return Counts.count(unit, free)  # an exclusive unit's open nodes change with every claim
        key = _shape_key(unit)
        rollup = self._by_shape.get(key)
        if rollup is None or not rollup.serves(unit):
            if len(self._by_shape) >= _MOST_SHAPES and rollup is None:
                return Counts.count(unit, free)
            rollup = Rollup.start(unit, free)
            self._by_shape[key] = rollup
        else:
            rollup.sync(free)
        return rollup.counts(unit)


def _shape_key(unit: UnitState) -> ShapeKey:
    roles = tuple(
        (role.leader.tobytes(), role.worker.tobytes(), id(role.leader_ok), id(role.worker_ok), role.pods, role.required_depth, role.same_shape)
        for role in unit.roles
    )
    return (id(unit.view), id(unit.allowed), unit.dominant, roles)


@dataclass
class Rollup:
    """Counts of one shape over every node, as of the free capacity last seen."""

    unit: UnitState  # the first unit of the shape: its view, roles and masks (kept alive, so ids stay theirs)
    allowed: np.ndarray
    columns: np.ndarray
    rows: np.ndarray  # [nodes, columns] free capacity last seen (C order)
    k_leader: list[np.ndarray]  # per role, [nodes]: leaders each node takes (0 where not open)
    k_worker: list[np.ndarray]
    active: np.ndarray  # [nodes] bool: takes at least one pod of the shape
    version: int = 0
    _sums: dict[SumKind, np.ndarray] = field(default_factory=dict)
    _lent: set[SumKind] = field(default_factory=set)  # kinds whose sum `sum` handed out as it is
    _children: dict[tuple[int, int, int], np.ndarray] = field(default_factory=dict)
    _before: np.ndarray | None = None  # [nodes] snapshot free in the dominant resource
    _current: ActiveRows | None = None  # over the active nodes

    @classmethod
    def start(cls, unit: UnitState, free: np.ndarray) -> "Rollup":
        columns = unit.asked_columns
        rows = free.take(columns, axis=1)  # (C order, as `take` by node needs to be fast; `free[:, columns]` is not)
        out = cls(unit, unit.allowed, columns, rows, [], [], np.zeros(0, bool))
        out._recount()
        return out

    def serves(self, unit: UnitState) -> bool:
        """Whether `unit` has this rollup's shape (the key's ids are of live arrays)."""
        mine = self.unit
        return (
            unit.view is mine.view
            and unit.allowed is self.allowed
            and all(a.leader_ok is b.leader_ok and a.worker_ok is b.worker_ok for a, b in zip(unit.roles, mine.roles))
        )

    def _recount(self) -> None:
        """Every node counted again; sums dropped (summed again when asked).

        Only the open nodes with room for the smallest of the unit's pods in its dominant
        resource are divided out (`_candidates`): on a busy cluster of tens of thousands
        of nodes those are a few percent, and every other node counts 0 for every shape."""
        n = self.rows.shape[0]
        nodes = self._candidates()
        rows = self.rows.take(nodes, axis=0)
        self.k_leader, self.k_worker = [], []
        active = np.zeros(n, dtype=bool)
        for role in self.unit.roles:
            leaders = np.zeros(n, np.int64)
            leaders[nodes] = self._fit_rows(role, rows, nodes, leader=True)
            if role.same_shape or role.pods == 1:
                workers = leaders
            else:
                workers = np.zeros(n, np.int64)
                workers[nodes] = self._fit_rows(role, rows, nodes, leader=False)
            active |= leaders > 0
            if role.pods > 1:
                active |= workers > 0
            self.k_leader.append(leaders)
            self.k_worker.append(workers)
        self.active = active
        self._sums = {}
        self._lent = set()
        self._current = None

    def _candidates(self) -> np.ndarray:
        """Open nodes that may take a pod of the shape: those whose free capacity in the
        unit's dominant resource holds the least any of its pods asks there. Free
        capacity is never negative (the snapshot's is clipped at 0, and a plan takes
        only what fits), so a node left out would count 0 for every pod of the shape."""
        dominant = int(np.searchsorted(self.columns, self.unit.dominant))
        least = min(
            min(int(role.leader[self.unit.dominant]), int(role.worker[self.unit.dominant]) if role.pods > 1 else int(role.leader[self.unit.dominant]))
            for role in self.unit.roles
        )
        if least <= 0:
            return self.allowed.nonzero()[0]
        room = self.rows[:, dominant] >= least
        room &= self.allowed
        return room.nonzero()[0]

    def _fit_rows(self, role: RoleState, rows: np.ndarray, nodes: np.ndarray | slice, leader: bool) -> np.ndarray:
        vec = (role.leader if leader else role.worker)[self.columns]
        ok = (role.leader_ok if leader else role.worker_ok)[nodes] & self.allowed[nodes]
        return fit(rows, vec, ok)

    def sync(self, free: np.ndarray) -> None:
        """Bring the counts to `free`: recount the rows that differ, update the sums."""
        changed = any_differ(free, self.rows, self.columns).nonzero()[0]
        if changed.size == 0:
            return
        self.version += 1
        if changed.size * _REBUILD_SHARE > self.rows.shape[0]:
            self.rows = free.take(self.columns, axis=1)
            self._recount()
            return
        ch = changed[self.allowed[changed]]
        old = self._contributions(ch)
        # (Rows of nodes not open to the unit are kept too: they are compared next time.)
        self.rows[changed] = free.take(changed, axis=0)[:, self.columns]
        if ch.size:
            rows = self.rows.take(ch, axis=0)
            active = np.zeros(ch.size, dtype=bool)
            for r, role in enumerate(self.unit.roles):
                leaders = self._fit_rows(role, rows, ch, leader=True)
                workers = leaders if role.same_shape or role.pods == 1 else self._fit_rows(role, rows, ch, leader=False)
                active |= leaders > 0
                if role.pods > 1:
                    active |= workers > 0
                self.k_leader[r][ch] = leaders
                if self.k_worker[r] is not self.k_leader[r]:
                    self.k_worker[r][ch] = workers
            self.active[ch] = active
            self._update(ch, old)
        self._current = None

    # ------------------------------------------------------------------ sums

    def _node_values(self, kind: SumBase | SumKind, nodes: np.ndarray, active: np.ndarray | None = None) -> np.ndarray:
        """Each node's contribution to a sum of `kind` (0 where it takes no pod); the
        depth, `kind`'s last item for a sum, is not read. (`active`: `self.active[nodes]`.)"""
        name = kind[0]
        active = self.active[nodes] if active is None else active
        values: np.ndarray
        if name == "free":
            values = self.rows.take(nodes, axis=0) * active[:, None]  # (`take`: far cheaper than indexing rows)
            return values
        if name == "slots":
            most = np.zeros(nodes.size, np.int64)
            for r, role in enumerate(self.unit.roles):
                np.maximum(most, self.k_leader[r][nodes], out=most)
                if role.pods > 1:
                    np.maximum(most, self.k_worker[r][nodes], out=most)
            return most
        if name == "taken":
            dominant = int(np.searchsorted(self.columns, self.unit.dominant))
            values = ((self.rows[:, dominant][nodes] != self.before()[nodes]) & active).astype(np.int64)
        elif name == "present":
            values = active.astype(np.int64)
        elif name == "leaders":
            values = self.k_leader[kind[1]][nodes]
        else:  # "workers"
            values = self.k_worker[kind[1]][nodes]
        return values

    def before(self) -> np.ndarray:
        """[nodes]: free capacity before this plan in the unit's dominant resource."""
        if self._before is None:
            snapshot = self.unit.view.snapshot
            column = self.unit.dominant
            self._before = np.maximum(snapshot.allocatable[:, column] - snapshot.used[:, column], 0)
        return self._before

    def _contributions(self, nodes: np.ndarray) -> dict[SumBase, np.ndarray]:
        """Each changed node's contribution to every additive sum kept, by kind without
        its depth (the same at every depth)."""
        active = self.active[nodes]
        bases: set[SumBase] = {kind[:-1] for kind in self._sums if kind[0] != "capacity"}  # one per base
        return {base: self._node_values(base, nodes, active) for base in bases}

    def _update(self, nodes: np.ndarray, old: dict[SumBase, np.ndarray]) -> None:
        """Add the changed nodes' new contributions less their old ones to every sum kept
        (a sum `sum` handed out is copied first, and is the rollup's own again)."""
        view, roles, sums = self.unit.view, self.unit.roles, self._sums
        # Capacity kinds with their replica domains' depth, and those domains' capacity
        # before, read before any sum is written.
        capacities = [(kind, replica_depth(roles[kind[1]], kind[2])) for kind in sums if kind[0] == "capacity"]
        changed: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}  # (role, inner) -> (subs, before)
        for (_, r, _), inner in capacities:
            if (r, inner) not in changed:
                subs = np.array(sorted(set(view.dom[inner][nodes].tolist())), dtype=np.int64)  # a gang's few nodes: np.unique costs more
                changed[(r, inner)] = (subs, self._per_sub(sums, r, inner, subs))
        active = self.active[nodes]
        delta = {base: self._node_values(base, nodes, active) - before for base, before in old.items()}
        where: dict[int, np.ndarray] = {}  # depth -> the changed nodes' domains there
        for kind in [kind for kind in sums if kind[0] != "capacity"]:  # (a list: `_own` may replace a sum)
            depth = kind[-1]
            if depth not in where:
                where[depth] = view.dom[depth][nodes]
            np.add.at(self._own(kind), where[depth], delta[kind[:-1]])
        after: dict[tuple[int, int], np.ndarray] = {}
        for kind, inner in capacities:
            r, depth = kind[1], kind[2]
            subs, before = changed[(r, inner)]
            if (r, inner) not in after:
                after[(r, inner)] = self._per_sub(sums, r, inner, subs)
            if inner == depth:
                self._own(kind)[subs] = after[(r, inner)]
            else:
                np.add.at(self._own(kind), view.ancestor[inner][depth][subs], after[(r, inner)] - before)

    def _own(self, kind: SumKind) -> np.ndarray:
        """The sum of `kind`, to write to: copied first if `sum` handed it out."""
        if kind in self._lent:
            self._sums[kind] = self._sums[kind].copy()
            self._lent.discard(kind)
        return self._sums[kind]

    def _per_sub(self, sums: dict[SumKind, np.ndarray], r: int, inner: int, subs: np.ndarray) -> np.ndarray:
        """Complete replicas of role `r` in the domains `subs` at `inner`, from the sums."""
        role = self.unit.roles[r]
        leaders: np.ndarray = sums[("leaders", r, inner)][subs]
        if role.pods == 1:
            return leaders
        if role.same_shape:
            out: np.ndarray = leaders // role.pods
            return out
        workers: np.ndarray = sums[("workers", r, inner)][subs]
        out = np.minimum(leaders, workers // (role.pods - 1))
        return out

    def sum(self, kind: SumKind) -> np.ndarray:
        """The per-domain array of `kind` (its last item is the depth), summed on first ask."""
        if kind not in self._sums:
            view = self.unit.view
            depth = kind[-1]
            size = view.domain_count(depth)
            nodes = self._active()[0]  # a node that takes no pod adds nothing to any sum
            groups = view.dom[depth][nodes]
            if kind[0] == "capacity":
                _, r, _ = kind
                role = self.unit.roles[r]
                inner = replica_depth(role, depth)
                self.sum(("leaders", r, inner))
                if role.pods > 1 and not role.same_shape:
                    self.sum(("workers", r, inner))
                # Only the domains holding an active node can hold a replica (elsewhere
                # leaders and workers sum to 0): tens of thousands of hosts are not walked.
                subs = view.dom[inner][nodes]
                if not view.single_node_domains(inner):
                    subs = np.unique(subs)
                per_sub = self._per_sub(self._sums, r, inner, subs)
                if inner == depth:
                    out = np.zeros(size, np.int64)
                    out[subs] = per_sub
                    self._sums[kind] = out
                else:
                    self._sums[kind] = sum_by(view.ancestor[inner][depth][subs], per_sub, size)
            elif kind[0] == "free":
                values = self._node_values(kind, nodes)
                out = np.zeros((size, values.shape[1]), np.int64)
                for c in range(values.shape[1]):
                    out[:, c] = sum_in(view, depth, groups, values[:, c])
                self._sums[kind] = out
            else:
                self._sums[kind] = sum_in(view, depth, groups, self._node_values(kind, nodes))
        self._lent.add(kind)
        return self._sums[kind]

    def children(self, depth: int, top: int, domain: int) -> np.ndarray:
        """Domains at `depth` inside `domain` at `top` (read-only): the topology does not
        change during a plan, and a plan asks about the same few domains once per gang."""
        key = (depth, top, domain)
        if key not in self._children:
            inside = (self.unit.view.ancestor[depth][top] == domain).nonzero()[0]
            inside.flags.writeable = False
            self._children[key] = inside
        return self._children[key]

    # ------------------------------------------------------------------ counts

    def _active(self) -> ActiveRows:
        """(nodes, rows, k_leader, k_worker) over the active nodes, once per version."""
        if self._current is None:
            nodes = self.active.nonzero()[0]  # (np.flatnonzero's wrapper costs more, here and below)
            k_leader = [k[nodes] for k in self.k_leader]
            # (A role of one shape counts its workers as its leaders: one array for both.)
            k_worker = [k_leader[r] if k is self.k_leader[r] else k[nodes] for r, k in enumerate(self.k_worker)]
            self._current = (nodes, self.rows.take(nodes, axis=0), k_leader, k_worker)
        return self._current

    def counts(self, unit: UnitState) -> Counts:
        nodes, rows, k_leader, k_worker = self._active()
        return Counts(unit, nodes, self.columns, rows, k_leader, k_worker, shared=self, version=self.version)
