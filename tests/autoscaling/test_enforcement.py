"""ratioEnforcement: keepTotal re-splits the asked total, raiseShort raises the role short of the band.

Properties (scale's own recommendation, before the windows): raiseShort never puts a role
below what its signal asks (within the role's bounds); keepTotal never exceeds the total
asked (or the roles' minimums); both keep the bands whenever some split they allow can,
and otherwise the reason says the band was not kept.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from support.autoscaling import BOUNDS, GPUS, role, signals, spec
from support.fuzz import examples
from tandem.autoscaling import AutoscalerState, scale
from tandem.autoscaling.enforcement import raise_short

ROLES = ("prefill", "decode")


def preferred(bands: dict[str, tuple[int, int]], mode: str):
    """PreferredBand on queue targets of 1 per replica: each role asks for exactly its queue."""
    block = spec("PreferredBand").model_dump(by_alias=True)["preferredBand"]
    block["targets"] = {r: {"metric": "queueDepth", "value": 1} for r in ROLES}
    block["bands"] = {r: {"minPercent": lo, "maxPercent": hi} for r, (lo, hi) in bands.items()}
    return spec("PreferredBand", preferredBand=block, ratioEnforcement=mode)


def recommend(autoscaling, asks: dict[str, int], bounds=BOUNDS, gpus=GPUS):
    found = signals(prefill=role(1, queue=asks["prefill"]), decode=role(1, queue=asks["decode"]))
    return scale(autoscaling, bounds, gpus, {"prefill": bounds["prefill"][0], "decode": bounds["decode"][0]}, 1, found, AutoscalerState(), 0.0)


def in_band(counts: dict[str, int], bands: dict[str, tuple[int, int]]) -> bool:
    total = sum(counts.values())
    return all(counts[r] * 100 >= total * bands[r][0] and counts[r] * 100 <= total * bands[r][1] for r in counts)


# ----------------------------------------------------------------------------- by hand


def test_six_prefill_two_decode_at_one_to_one_is_four_four_or_six_six() -> None:
    """The issue's example: keepTotal re-splits the 8 asked (prefill below its need),
    raiseShort raises decode to prefill's 6 (Kthena's rule)."""
    bands = {"prefill": (50, 50), "decode": (50, 50)}
    assert dict(recommend(preferred(bands, "keepTotal"), {"prefill": 6, "decode": 2}).recommended) == {"prefill": 4, "decode": 4}
    decision = recommend(preferred(bands, "raiseShort"), {"prefill": 6, "decode": 2})
    assert dict(decision.recommended) == {"prefill": 6, "decode": 6}
    assert "raiseShort: decode raised from 2 to 6 to hold the band" in decision.reason


def test_the_default_is_keep_total_and_other_modes_are_rejected() -> None:
    assert spec("PreferredBand").ratio_enforcement == "keepTotal"
    with pytest.raises(ValidationError):
        spec("PreferredBand", ratioEnforcement="raiseBoth")


def test_when_a_maximum_binds_keep_total_lowers_the_total_and_raise_short_says_why() -> None:
    """2 prefill : 20 decode asked, prefill at most 3 and at least 30% of the total."""
    bands = {"prefill": (30, 100), "decode": (0, 100)}
    bounds = {"prefill": (1, 3), "decode": (1, 40)}
    kept = recommend(preferred(bands, "keepTotal"), {"prefill": 2, "decode": 20}, bounds)
    assert dict(kept.recommended) == {"prefill": 3, "decode": 7} and "total lowered to 10" in kept.reason
    raised = recommend(preferred(bands, "raiseShort"), {"prefill": 2, "decode": 20}, bounds)
    assert dict(raised.recommended) == {"prefill": 3, "decode": 20}
    assert "prefill at its maximum 3 cannot hold the band beside decode 20 (it needs 9): band not kept" in raised.reason


def test_fixed_ratio_with_prefill_capped_keep_total_moves_the_rest_to_decode() -> None:
    """decode 9 asked at 1:2 wants prefill 5, capped at 3: keepTotal keeps 14 (3/11),
    raiseShort keeps each need within its bounds (3/9)."""
    bounds = {"prefill": (1, 3), "decode": (1, 16)}
    found = signals(decode=role(6, tokens=12_400))
    kept = scale(spec("FixedRatio"), bounds, GPUS, {"prefill": 1, "decode": 1}, 1, found, AutoscalerState(), 0.0)
    raised = scale(spec("FixedRatio", ratioEnforcement="raiseShort"), bounds, GPUS, {"prefill": 1, "decode": 1}, 1, found, AutoscalerState(), 0.0)
    assert dict(kept.recommended) == {"prefill": 3, "decode": 11}
    assert dict(raised.recommended) == {"prefill": 3, "decode": 9}


def test_raise_short_gives_way_to_the_gpu_budget() -> None:
    """SLO asks 2 prefill + 9 decode (88 GPUs); the budget of 64 still caps it."""
    found = signals(prefill=role(2), decode=role(4), input_tokens_per_s=30_000, output_tokens_per_s=12_400)
    decision = scale(spec("SLO", ratioEnforcement="raiseShort", slo={**spec("SLO").model_dump(by_alias=True)["slo"], "gpuBudget": 64}),
                      BOUNDS, GPUS, {"prefill": 1, "decode": 1}, 1, found, AutoscalerState(), 0.0)
    assert 8 * sum(decision.recommended.values()) <= 64
    assert "raiseShort gives way to the gpuBudget" in decision.reason


def test_independent_ignores_the_ratio_enforcement() -> None:
    found = signals(prefill=role(2, queue=24), decode=role(4, kv=0.35))
    one, other = (
        scale(spec("Independent", ratioEnforcement=mode), BOUNDS, GPUS, {"prefill": 2, "decode": 4}, 1, found, AutoscalerState(), 0.0)
        for mode in ("keepTotal", "raiseShort")
    )
    assert one.recommended == other.recommended


# ----------------------------------------------------------------------------- properties


@st.composite
def problems(draw: st.DrawFn):
    """Valid bands (Σmin ≤ 100 ≤ Σmax, as validation requires), small bounds, any asks."""
    low = draw(st.integers(0, 100))
    other_low = draw(st.integers(0, 100 - low))
    high = draw(st.integers(low, 100))
    other_high = draw(st.integers(max(other_low, 100 - high), 100))
    bands = {"prefill": (low, high), "decode": (other_low, other_high)}
    bounds = {}
    for name in ROLES:
        lo = draw(st.integers(0, 3))
        bounds[name] = (lo, lo + draw(st.integers(1, 12)))
    asks = {name: draw(st.integers(0, 16)) for name in ROLES}
    return asks, bands, bounds


def splits(bounds):
    return (dict(zip(ROLES, combo)) for combo in itertools.product(*(range(lo, hi + 1) for lo, hi in (bounds[r] for r in ROLES))))


def clamp(value: int, limits: tuple[int, int]) -> int:
    return min(max(value, limits[0]), limits[1])


@settings(max_examples=examples(300), deadline=None)
@given(problems())
def test_raise_short_never_lowers_a_role_and_is_the_least_banded_split_above_the_needs(problem) -> None:
    asks, bands, bounds = problem
    counts, notes = raise_short(asks, bands, bounds)
    floors = {r: clamp(asks[r], bounds[r]) for r in ROLES}
    assert all(floors[r] <= counts[r] <= bounds[r][1] for r in ROLES)
    candidates = [x for x in splits(bounds) if all(x[r] >= floors[r] for r in ROLES) and in_band(x, bands)]
    if candidates:
        assert in_band(counts, bands) and not any("band not kept" in n for n in notes)
        assert all(counts[r] <= x[r] for x in candidates for r in ROLES), "the least banded split above the needs"
    else:
        assert any("band not kept" in n for n in notes)


@settings(max_examples=examples(200), deadline=None)
@given(problems())
def test_scale_raise_short_keeps_every_need_and_the_band_where_feasible(problem) -> None:
    asks, bands, bounds = problem
    decision = recommend(preferred(bands, "raiseShort"), asks, bounds)
    got = dict(decision.recommended)
    assert all(clamp(asks[r], bounds[r]) <= got[r] <= bounds[r][1] for r in ROLES)
    feasible = any(all(x[r] >= clamp(asks[r], bounds[r]) for r in ROLES) and in_band(x, bands) for x in splits(bounds))
    if feasible:
        assert in_band(got, bands)
    else:
        assert "band not kept" in decision.reason


@settings(max_examples=examples(200), deadline=None)
@given(problems())
def test_scale_keep_total_never_exceeds_the_total_and_keeps_the_band_where_feasible(problem) -> None:
    asks, bands, bounds = problem
    decision = recommend(preferred(bands, "keepTotal"), asks, bounds)
    got = dict(decision.recommended)
    low = sum(lo for lo, _ in bounds.values())
    asked = max(sum(asks.values()), low)
    assert all(bounds[r][0] <= got[r] <= bounds[r][1] for r in ROLES)
    assert sum(got.values()) <= asked
    feasible = any(sum(x.values()) <= asked and in_band(x, bands) for x in splits(bounds))
    if feasible:
        assert in_band(got, bands)
    else:
        assert "bands cannot hold" in decision.reason
