"""Bounded largest-remainder rounding and percent bands: the split keeps the total exactly,
respects every bound, and respects the bands whenever any integer split could."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from tandem.autoscaling.bands import band_bounds
from tandem.autoscaling.rounding import apportion, quotas_within_bounds

NAMES = ["prefill", "decode", "router", "encoder", "cache"]


# ----------------------------------------------------------------------------- hand cases


def test_the_issue_example_splits_13_as_4_and_9() -> None:
    assert apportion(13, {"prefill": 1, "decode": 2}, {"prefill": (1, 8), "decode": (1, 16)}) == {"prefill": 4, "decode": 9}


def test_a_clamped_role_gives_its_excess_to_the_others_instead_of_losing_it() -> None:
    # Kthena's draft: largest remainder first (5/5), then clamp prefill to 3 -> total 8, two lost.
    assert apportion(10, {"prefill": 1, "decode": 1}, {"prefill": (0, 3), "decode": (0, 16)}) == {"prefill": 3, "decode": 7}


def test_a_role_held_at_its_minimum_takes_from_the_others() -> None:
    assert apportion(10, {"prefill": 1, "decode": 9}, {"prefill": (4, 8), "decode": (1, 16)}) == {"prefill": 4, "decode": 6}


def test_ties_go_to_the_earlier_role() -> None:
    assert apportion(7, {"prefill": 1, "decode": 1}, {"prefill": (0, 8), "decode": (0, 8)}) == {"prefill": 4, "decode": 3}
    assert apportion(7, {"decode": 1, "prefill": 1}, {"prefill": (0, 8), "decode": (0, 8)}) == {"decode": 4, "prefill": 3}


def test_totals_outside_the_bounds_become_the_nearest_possible_total() -> None:
    bounds = {"prefill": (2, 4), "decode": (3, 6)}
    assert apportion(0, {"prefill": 1, "decode": 1}, bounds) == {"prefill": 2, "decode": 3}
    assert apportion(99, {"prefill": 1, "decode": 1}, bounds) == {"prefill": 4, "decode": 6}


def test_zero_weights_stay_at_their_minimum_until_the_others_are_full() -> None:
    bounds = {"prefill": (1, 8), "decode": (1, 10), "router": (0, 5)}
    assert apportion(12, {"prefill": 0, "decode": 1, "router": 0}, bounds) == {"prefill": 1, "decode": 10, "router": 1}
    # decode full at 10: the other 10 are shared evenly by the zero-weight roles
    assert apportion(20, {"prefill": 0, "decode": 1, "router": 0}, bounds) == {"prefill": 5, "decode": 10, "router": 5}


def test_all_zero_weights_split_evenly() -> None:
    assert apportion(6, {"prefill": 0, "decode": 0}, {"prefill": (0, 8), "decode": (0, 8)}) == {"prefill": 3, "decode": 3}


def test_bad_arguments_are_programming_errors() -> None:
    with pytest.raises(ValueError, match="different roles"):
        apportion(3, {"prefill": 1}, {"decode": (0, 3)})
    with pytest.raises(ValueError, match="lo <= hi"):
        apportion(3, {"prefill": 1}, {"prefill": (4, 3)})
    with pytest.raises(ValueError, match="finite"):
        apportion(3, {"prefill": math.nan}, {"prefill": (0, 3)})


def test_bands_tighten_the_bounds_for_one_total() -> None:
    bounds = {"prefill": (1, 8), "decode": (1, 16)}
    bands = {"prefill": (20, 50), "decode": (50, 80)}
    tightened, feasible = band_bounds(10, bands, bounds)
    assert feasible and tightened == {"prefill": (2, 5), "decode": (5, 8)}
    # pressure wants prefill at 10%: the band lifts it to 20%
    assert apportion(10, {"prefill": 1, "decode": 9}, tightened) == {"prefill": 2, "decode": 8}


def test_a_band_that_cannot_hold_a_small_total_falls_back_to_the_bounds() -> None:
    bounds = {"prefill": (1, 8), "decode": (1, 16)}
    # prefill 40-45% of 3 is 1.2..1.35 replicas: no integer fits
    tightened, feasible = band_bounds(3, {"prefill": (40, 45), "decode": (55, 60)}, bounds)
    assert not feasible and tightened == bounds


def test_role_minimums_win_over_a_band() -> None:
    bounds = {"prefill": (6, 8), "decode": (1, 16)}
    tightened, feasible = band_bounds(10, {"prefill": (20, 50), "decode": (50, 80)}, bounds)
    assert not feasible and tightened == bounds
    assert apportion(10, {"prefill": 1, "decode": 1}, tightened)["prefill"] == 6


# ----------------------------------------------------------------------------- properties


@st.composite
def problems(draw: st.DrawFn, max_roles: int = 5):
    count = draw(st.integers(1, max_roles))
    names = NAMES[:count]
    bounds = {}
    for name in names:
        lo = draw(st.integers(0, 12))
        bounds[name] = (lo, lo + draw(st.integers(0, 20)))
    weights = {
        name: draw(st.one_of(st.just(0.0), st.integers(0, 9).map(float), st.floats(0, 1e3, allow_nan=False))) for name in names
    }
    total = draw(st.integers(-3, 130))
    return total, weights, bounds


@settings(max_examples=examples(400), deadline=None)
@given(problems())
def test_split_keeps_the_total_and_every_bound(problem) -> None:
    total, weights, bounds = problem
    split = apportion(total, weights, bounds)
    low, high = sum(lo for lo, _ in bounds.values()), sum(hi for _, hi in bounds.values())
    assert list(split) == list(weights)
    assert sum(split.values()) == min(max(total, low), high)
    for name, count in split.items():
        assert bounds[name][0] <= count <= bounds[name][1]
    assert apportion(total, dict(weights), dict(bounds)) == split  # deterministic


@settings(max_examples=examples(400), deadline=None)
@given(problems())
def test_every_count_is_within_one_of_its_quota(problem) -> None:
    total, weights, bounds = problem
    split = apportion(total, weights, bounds)
    low, high = sum(lo for lo, _ in bounds.values()), sum(hi for _, hi in bounds.values())
    quotas = quotas_within_bounds(min(max(total, low), high), {n: Fraction(w) for n, w in weights.items()}, bounds)
    for name, count in split.items():
        assert abs(count - quotas[name]) < 1
        assert bounds[name][0] <= quotas[name] <= bounds[name][1]


@settings(max_examples=examples(300), deadline=None)
@given(problems())
def test_unbounded_split_is_the_hamilton_apportionment(problem) -> None:
    """With bounds that do not bind, each role gets floor or ceil of total × share."""
    total, weights, _ = problem
    if sum(weights.values()) == 0 or total < 0:
        return
    loose = {name: (0, max(total, 0) + 1) for name in weights}
    split = apportion(total, weights, loose)
    whole = sum(Fraction(w) for w in weights.values())
    for name, count in split.items():
        quota = total * Fraction(weights[name]) / whole
        assert math.floor(quota) <= count <= math.ceil(quota)


@settings(max_examples=examples(300), deadline=None)
@given(problems(max_roles=2))
def test_two_roles_never_lose_a_replica_when_the_total_grows(problem) -> None:
    """The property the stabilisation relies on: for two roles, a larger total never gives
    either role fewer replicas (largest remainder's Alabama paradox needs three)."""
    total, weights, bounds = problem
    before, after = apportion(total, weights, bounds), apportion(total + 1, weights, bounds)
    assert all(after[name] >= before[name] for name in weights)


@st.composite
def banded(draw: st.DrawFn):
    count = draw(st.integers(2, 3))
    names = NAMES[:count]
    mins = [draw(st.integers(0, 100)) for _ in names]
    while sum(mins) > 100:
        mins = [m // 2 for m in mins]
    maxes = [draw(st.integers(m, 100)) for m in mins]
    if sum(maxes) < 100:
        maxes[-1] = 100
    bands = dict(zip(names, zip(mins, maxes)))
    bounds = {}
    for name in names:
        lo = draw(st.integers(0, 4))
        bounds[name] = (lo, lo + draw(st.integers(0, 12)))
    weights = {name: float(draw(st.integers(0, 9))) for name in names}
    return draw(st.integers(0, 30)), weights, bands, bounds


@settings(max_examples=examples(400), deadline=None)
@given(banded())
def test_bands_are_respected_whenever_any_split_could(problem) -> None:
    total, weights, bands, bounds = problem
    tightened, feasible = band_bounds(total, bands, bounds)
    split = apportion(total, weights, tightened)
    low, high = sum(lo for lo, _ in bounds.values()), sum(hi for _, hi in bounds.values())
    target = min(max(total, low), high)
    assert sum(split.values()) == target
    assert all(bounds[n][0] <= split[n] <= bounds[n][1] for n in split)

    def in_band(counts: dict[str, int]) -> bool:
        return all(counts[n] * 100 >= target * bands[n][0] and counts[n] * 100 <= target * bands[n][1] for n in counts)

    exists = any(
        sum(combo) == target and in_band(dict(zip(bounds, combo)))
        for combo in itertools.product(*(range(lo, hi + 1) for lo, hi in bounds.values()))
    )
    assert feasible == exists
    if feasible:
        assert in_band(split)
