"""Counts kept current (`placement/rollup.py`) give the figures a full count gives."""

from __future__ import annotations

import numpy as np

from tandem.placement import rollup
from tandem.placement.capacity import EVERY_ROLE, Counts
from tandem.placement.engine import _prepare
from tandem.placement.rollup import Rollups
from tandem.placement.unit_state import ShapeCache
from tandem.reference.instances import random_instance


def _same(a: Counts, b: Counts) -> None:
    view = a.unit.view
    assert np.array_equal(a.nodes, b.nodes) and np.array_equal(a.free, b.free)
    for x, y in zip(a.k_leader + a.k_worker, b.k_leader + b.k_worker):
        assert np.array_equal(x, y)
    for depth in range(view.depth_count):
        assert np.array_equal(a.free_by_domain(depth), b.free_by_domain(depth))
        assert np.array_equal(a.pod_slots(depth), b.pod_slots(depth))
        assert np.array_equal(a.taken_by_domain(depth), b.taken_by_domain(depth))
        for r in range(len(a.unit.roles)):
            assert np.array_equal(a.capacity(r, depth), b.capacity(r, depth))
        for top in range(depth):
            for domain in np.unique(view.dom[top][a.nodes]):
                got, want = a.inside(top, int(domain)), b.restrict(view.dom[top][b.nodes] == domain)
                for x, y in zip(got.local(depth), want.local(depth)):
                    if isinstance(x, dict):
                        assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
                    else:
                        assert np.array_equal(x, y)


def _changing_free(seed: int, steps: int, every_fifth_all: bool = True):
    """(units, their plan's context, free) of six random instances, step by step: a few nodes' free capacity
    changes at each step (a gang placed or released), now and then every node's (a new
    plan), so that the rollup updates in place and counts everything again in turn."""
    rng = np.random.default_rng(seed)
    for instance_seed in range(6):
        instance = random_instance(instance_seed)
        units, context = _prepare(instance.snapshot, instance.views, instance.units, ShapeCache(), Rollups())
        free = instance.snapshot.free.copy()
        for step in range(steps):
            yield units, context, free
            many = every_fifth_all and step % 5 == 4
            rows = rng.choice(free.shape[0], size=free.shape[0] if many else min(3, free.shape[0]), replace=False)
            free[rows] = np.maximum(instance.snapshot.allocatable[rows] - rng.integers(0, 3, size=(rows.size, free.shape[1])) * (free[rows] > 0), 0)
            free[rows] = np.minimum(free[rows], instance.snapshot.allocatable[rows])


def test_rollup_matches_full_counts_as_free_capacity_changes(monkeypatch):
    monkeypatch.setattr(rollup, "_REBUILD_SHARE", 1)  # small clusters: update in place, as on large ones
    for units, context, free in _changing_free(0, 12):
        for unit in units:
            _same(context.counts(unit, free), Counts.count(unit, free))


def _handed_out(counts: Counts) -> list[np.ndarray]:
    """Every array counts hand out: their own and, through them, the rollup's sums."""
    view = counts.unit.view
    out = [counts.nodes, counts.free, *counts.k_leader, *counts.k_worker]
    for depth in range(view.depth_count):
        out += [counts.free_by_domain(depth), counts.pod_slots(depth), counts.taken_by_domain(depth)]
        out += [counts.capacity(r, depth) for r in range(len(counts.unit.roles))]
        if counts.shared is not None:
            out.append(counts.shared.sum(("present", EVERY_ROLE, depth)))
    return out


def test_rollup_arrays_handed_out_are_never_written_to(monkeypatch):
    """The rollup updates its per-node arrays, and the sums it has not handed out, in
    place: whatever counts handed out before an update keeps its figures after it."""
    monkeypatch.setattr(rollup, "_REBUILD_SHARE", 1)
    held: list[tuple[np.ndarray, np.ndarray]] = []
    for units, context, free in _changing_free(5, 10, every_fifth_all=False):
        for unit in units:
            held += [(array, array.copy()) for array in _handed_out(context.counts(unit, free))]
    assert all(np.array_equal(array, copy) for array, copy in held)
