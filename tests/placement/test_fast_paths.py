"""Fast paths give what the general formulas they replace give, on random inputs."""

from __future__ import annotations

import numpy as np

from tandem.placement.capacity import fit
from tandem.placement.engine import _prepare
from tandem.placement.locality import pending_demand
from tandem.placement.rollup import Rollups
from tandem.placement.rows import all_at_least, all_equal, any_differ
from tandem.placement.space import Space, unique_inverse
from tandem.placement.unit_state import ShapeCache
from tandem.reference.instances import random_instance


def _fit_reference(free: np.ndarray, vec: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """The formula `fit` computes: least free // asked over the asked resources, 0 where not ok."""
    cols = np.flatnonzero(vec > 0)
    return np.where(ok, np.min(free[:, cols] // vec[cols], axis=1), 0)


def test_fit_matches_the_formula():
    rng = np.random.default_rng(0)
    for _ in range(500):
        rows, width = int(rng.integers(0, 80)), int(rng.integers(1, 6))
        free = rng.integers(-3, 40, (rows, width))
        vec = rng.integers(0, 9, width) * (rng.random(width) < 0.7)
        vec[rng.integers(width)] = int(rng.integers(1, 9))  # every shape asks for something
        ok = rng.random(rows) < 0.8
        got = fit(free, vec, ok)
        assert got.dtype == np.int64 and np.array_equal(got, _fit_reference(free, vec, ok))


def test_row_tests_match_numpy_on_short_and_long_arrays():
    rng = np.random.default_rng(1)
    for rows in (0, 1, 5, 63, 64, 65, 300, 3000):
        for width in (0, 1, 2, 4, 6):
            a = rng.integers(0, 4, (rows, width))
            b = np.where(rng.random((rows, width)) < 0.9, a, a + 1)
            vec = rng.integers(0, 4, width)
            assert np.array_equal(all_at_least(a, vec), np.all(a >= vec, axis=1))
            assert np.array_equal(all_equal(a, b), np.all(a == b, axis=1))
            assert np.array_equal(any_differ(a, b), np.any(a != b, axis=1))
            wide = np.concatenate((a, rng.integers(0, 4, (rows, 3))), axis=1)
            columns = rng.permutation(width + 3)[:width]
            picked = np.where(rng.random((rows, width)) < 0.9, wide[:, columns], wide[:, columns] + 1)
            assert np.array_equal(any_differ(wide, picked, columns), np.any(wide[:, columns] != picked, axis=1))


def _pending_reference(unit, space, remaining) -> np.ndarray:
    """Role by role, pod shape by pod shape: what `pending_demand` sums mask by mask."""
    out = np.zeros(space.nodes.size, np.int64)
    for r, count in remaining.items():
        role = unit.roles[r]
        if count <= 0:
            continue
        out += count * int(role.leader[unit.dominant]) * role.leader_ok[space.nodes]
        if role.pods > 1:
            out += count * (role.pods - 1) * int(role.worker[unit.dominant]) * role.worker_ok[space.nodes]
    return out


def test_pending_demand_matches_role_by_role_sums():
    rng = np.random.default_rng(2)
    for seed in range(30):
        instance = random_instance(seed)
        units, _ = _prepare(instance.snapshot, instance.views, instance.units, ShapeCache(), Rollups())
        free = instance.snapshot.free
        for unit in units:
            nodes = np.flatnonzero(rng.random(free.shape[0]) < 0.5)
            space = Space.of(nodes, free)
            remaining = {r: int(rng.integers(-1, 4)) for r in range(len(unit.roles))}
            assert np.array_equal(pending_demand(unit, space, remaining), _pending_reference(unit, space, remaining))


def test_unique_inverse_matches_numpy():
    rng = np.random.default_rng(3)
    cases = [np.arange(n) for n in range(0, 40)] + [np.full(n, 7) for n in range(1, 40)]
    cases += [rng.integers(-1, int(rng.integers(1, 60)), int(rng.integers(0, 80))) for _ in range(500)]
    for values in cases:
        values = values.astype(np.int64)
        compact, inverse = unique_inverse(values)
        want_compact, want_inverse = np.unique(values, return_inverse=True)
        assert compact.dtype == want_compact.dtype and np.array_equal(compact, want_compact)
        assert inverse.dtype == want_inverse.dtype and np.array_equal(inverse, want_inverse)


def test_leaders_counted_once_give_the_plans_counting_again_gives(monkeypatch):
    """`place_replica` hands its leader counts to `_greedy_pods` for the first pod; counting
    them again over the subset (the general path) gives the same plans."""
    from tandem.placement import place, replica
    from tandem.placement.plan import plan_to_dict

    instances = [random_instance(seed, contention=seed % 2 == 1) for seed in range(24)]
    fast = [plan_to_dict(place(i.snapshot, i.views, i.units)) for i in instances]
    general = replica._greedy_pods
    calls = []

    def recount(ranking, subset):
        calls.append(ranking.leaders is not None)
        return general(ranking._replace(leaders=None), subset)

    monkeypatch.setattr(replica, "_greedy_pods", recount)
    assert [plan_to_dict(place(i.snapshot, i.views, i.units)) for i in instances] == fast
    assert any(calls)  # the fast path was there to replace



def test_no_gang_lands_narrower_than_the_level_it_is_said_to_reach(monkeypatch):
    # `_deepest` bounds how narrow a gang can be; a gang skips trials on the strength of
    # it, so every real assignment must be at that level or broader.
    from tandem.placement import gang, place
    from tandem.reference.instances import fits_whole_instance

    assign, seen = gang._assign_in_domain, []

    def checked(attempt, *args):
        found = assign(attempt, *args)
        if found is not None:
            deepest = gang._deepest(attempt.counts, attempt.demand, attempt.unit.required_depth, [])
            seen.append(found[0])
            assert found[0] <= deepest
        return found

    monkeypatch.setattr(gang, "_assign_in_domain", checked)
    for instance in [random_instance(seed) for seed in range(40)] + [fits_whole_instance(seed) for seed in range(20)]:
        place(instance.snapshot, instance.views, instance.units)
    assert max(seen) == 3  # some gangs did land on one host (block/rack/host clusters)


def test_the_trials_a_gang_skips_could_not_have_won(monkeypatch):
    # With `_deepest` saying "always narrower", no trial is skipped. The plans must not differ.
    from tandem.placement import gang, place
    from tandem.reference.instances import fits_whole_instance

    instances = [random_instance(seed) for seed in range(40)] + [fits_whole_instance(seed) for seed in range(20)]
    fast = [place(i.snapshot, i.views, i.units) for i in instances]
    monkeypatch.setattr(gang, "_deepest", lambda *args: 99)
    assert [place(i.snapshot, i.views, i.units) for i in instances] == fast

