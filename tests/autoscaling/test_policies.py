"""Each policy by hand, with the anchors' own figures where they document one."""

from __future__ import annotations

import pytest

from support.autoscaling import BOUNDS, GPUS, NAN, role, signals, spec
from tandem.autoscaling import AutoscalerState, scale
from tandem.autoscaling.fixed_ratio import fixed_ratio
from tandem.autoscaling.metrics import MissingSignal, whole
from tandem.autoscaling.preferred_band import cost_fill, preferred_band
from tandem.autoscaling.slo import slo


def first(policy: str, found, current=None, units: int = 1, bounds=BOUNDS, gpus=GPUS, **changes):
    """One decision of a fresh autoscaler (no history, no panic)."""
    current = current or {"prefill": 1, "decode": 1}
    changes.setdefault("panic", {"thresholdPercent": 100_000})  # a first decision from the minimums is no burst here
    return scale(spec(policy, **changes), bounds, gpus, current, units, found, AutoscalerState(), found.at)


# ----------------------------------------------------------------------------- FixedRatio


def test_fixed_ratio_sizes_decode_from_its_tokens_and_prefill_by_the_ratio() -> None:
    found = signals(decode=role(6, tokens=12_400))
    split = fixed_ratio(spec("FixedRatio"), found, 1)
    # 12,400 / 1,500 = 8.27 -> decode 9; the smallest 1:2 total holding 9 decode is 14
    assert split.total == 14 and dict(split.weights) == {"prefill": 1, "decode": 2}
    decision = first("FixedRatio", found)
    assert dict(decision.desired) == {"prefill": 5, "decode": 9}
    assert decision.reason.startswith("FixedRatio: decode 12,400 tok/s / 1,500 per replica = 8.27 -> decode 9, total 14")
    assert decision.reason.endswith("-> prefill 5, decode 9")


@pytest.mark.parametrize("rate", [0, 700, 1_500, 1_501, 4_000, 9_999, 12_400, 20_000])
def test_fixed_ratio_one_signal_scales_both_pools_in_ratio(rate: float) -> None:
    """HeteroScale: decode tokens/s alone moves both pools, decode never below its need."""
    desired = first("FixedRatio", signals(decode=role(4, tokens=rate))).desired
    need = whole(rate / 1_500)
    assert desired["decode"] >= max(need, 1)
    assert desired["prefill"] * 2 <= desired["decode"] + 2  # 1:2, within one replica of rounding
    assert desired["prefill"] * 2 >= desired["decode"] - 2


def test_fixed_ratio_divides_the_demand_by_the_units() -> None:
    found = signals(decode=role(12, tokens=12_400))
    assert dict(first("FixedRatio", found, units=2).desired) == {"prefill": 3, "decode": 5}  # 4.13 -> 5 -> total 8


def test_fixed_ratio_needs_ready_decode_replicas() -> None:
    with pytest.raises(MissingSignal, match="no Ready decode replicas"):
        fixed_ratio(spec("FixedRatio"), signals(decode=role(0, tokens=0)), 1)


# ----------------------------------------------------------------------------- PreferredBand


def test_preferred_band_blends_cost_and_pressure() -> None:
    # prefill: queue 8 / 4 = 2 replicas; decode: 0.7 x 8 ready / 0.7 = 8 replicas -> total 10
    found = signals(prefill=role(2, queue=8), decode=role(8, kv=0.7))
    split = preferred_band(spec("PreferredBand"), found, 1, BOUNDS, {"prefill": 8, "decode": 4})
    assert split.total == 10
    # cost: from the minimums (1, 1), the 8 extra go to the cheaper decode first -> 10% / 90%;
    # pressure 20% / 80%; blend at costWeight 0.5 -> 15% / 85%
    assert split.weights["prefill"] == pytest.approx(0.15)
    assert split.weights["decode"] == pytest.approx(0.85)
    assert dict(split.bands) == {"prefill": (20, 50), "decode": (50, 80)}
    # 15% of 10 is 1.5 prefill, but its band says at least 20%: 2 prefill, 8 decode
    decision = first("PreferredBand", found, gpus={"prefill": 8, "decode": 4})
    assert dict(decision.desired) == {"prefill": 2, "decode": 8}


def test_preferred_band_cost_weight_one_is_the_cost_order_alone() -> None:
    found = signals(prefill=role(2, queue=8), decode=role(8, kv=0.7))
    changed = {**spec("PreferredBand").model_dump(by_alias=True)["preferredBand"], "costWeight": 1.0}
    split = preferred_band(spec("PreferredBand", preferredBand=changed), found, 1, BOUNDS, {"prefill": 4, "decode": 8})
    assert split.weights["prefill"] == pytest.approx(0.8)  # the 8 extra went to the cheaper prefill


def test_equal_costs_share_the_cost_fill_evenly() -> None:
    assert cost_fill(11, BOUNDS, {"prefill": 8, "decode": 8}, ("prefill", "decode")) == {"prefill": 5.5, "decode": 5.5}
    assert cost_fill(30, BOUNDS, {"prefill": 8, "decode": 8}, ("prefill", "decode")) == {"prefill": 8.0, "decode": 16.0}


def test_preferred_band_says_when_the_band_cannot_hold_the_total() -> None:
    found = signals(prefill=role(1, queue=4), decode=role(2, kv=0.7))  # 1 + 2 = total 3
    changed = spec("PreferredBand").model_dump(by_alias=True)["preferredBand"]
    changed["bands"] = {"prefill": {"minPercent": 40, "maxPercent": 45}, "decode": {"minPercent": 55, "maxPercent": 60}}
    decision = first("PreferredBand", found, preferredBand=changed)
    assert "bands cannot hold total 3 at any total within the roles' bounds: role bounds used" in decision.reason
    assert sum(decision.recommended.values()) == 3
    # the bands are the last guard: the short role is raised to the least counts that hold them (40% of 5)
    assert dict(decision.desired) == {"prefill": 2, "decode": 3}
    assert "bands kept after the windows: prefill 1 -> 2, decode 2 -> 3" in decision.reason


def test_a_band_is_kept_at_a_smaller_total_when_a_roles_maximum_binds() -> None:
    """2 prefill : 20 decode asked, prefill at most 3 and at least 30% of the total: the
    band cannot hold 22, so the total is lowered to the largest it can hold (3/7), and
    the reason says so, instead of the band being dropped (2/20)."""
    found = signals(prefill=role(1, queue=8), decode=role(2, kv=7.0))
    changed = spec("PreferredBand").model_dump(by_alias=True)["preferredBand"]
    changed["bands"] = {"prefill": {"minPercent": 30, "maxPercent": 100}}
    bounds = {"prefill": (1, 3), "decode": (1, 40)}
    decision = first("PreferredBand", found, bounds=bounds, preferredBand=changed)
    prefill, decode = decision.desired["prefill"], decision.desired["decode"]
    assert prefill == 3 and prefill / (prefill + decode) >= 0.3 and decode == 7
    assert "total lowered to 10" in decision.reason


# ----------------------------------------------------------------------------- SLO


def test_slo_sizes_prefill_from_input_tokens_and_decode_from_output_tokens() -> None:
    found = signals(input_tokens_per_s=30_000, output_tokens_per_s=12_400, ttft=1.0, itl=0.04)
    split = slo(spec("SLO"), found, 1)
    # Dynamo: ceil(load / per-replica throughput at the target): 1.5 -> 2 and 8.27 -> 9
    assert split.total == 11 and dict(split.weights) == {"prefill": 2, "decode": 9}
    assert dict(first("SLO", found).desired) == {"prefill": 2, "decode": 9}


def test_slo_adds_capacity_when_a_latency_target_is_missed() -> None:
    found = signals(input_tokens_per_s=30_000, output_tokens_per_s=12_400, ttft=3.0, itl=0.1)
    split = slo(spec("SLO"), found, 1)
    # TTFT 3.0 / 2.0 -> 1.5 x 1.5 = 2.25 -> 3 prefill; ITL 0.1 / 0.05 -> 2 x 8.27 = 16.5 -> 17 decode
    assert dict(split.weights) == {"prefill": 3, "decode": 17}


def test_slo_scales_both_pools_down_together_to_fit_the_gpu_budget() -> None:
    found = signals(input_tokens_per_s=30_000, output_tokens_per_s=12_400)
    changed = {**spec("SLO").model_dump(by_alias=True)["slo"], "gpuBudget": 64}
    decision = first("SLO", found, slo=changed)
    # 2 + 9 replicas x 8 GPUs = 88 > 64: the largest 2:9 split within 64 GPUs is 1 + 7 (Dynamo:
    # prefill round(2 x 64/88) = 1, decode (64 - 8) / 8 = 7)
    assert dict(decision.desired) == {"prefill": 1, "decode": 7}
    assert "gpuBudget 64 caps the total at 8" in decision.reason


def test_slo_budget_counts_every_unit() -> None:
    found = signals(input_tokens_per_s=60_000, output_tokens_per_s=24_800)
    changed = {**spec("SLO").model_dump(by_alias=True)["slo"], "gpuBudget": 128}
    decision = first("SLO", found, slo=changed, units=2)
    assert 2 * 8 * sum(decision.desired.values()) <= 128


def test_slo_latency_is_not_needed_when_nothing_arrived() -> None:
    found = signals(arrival_rate=0, input_tokens_per_s=0, output_tokens_per_s=0, ttft=NAN, itl=NAN)
    assert slo(spec("SLO"), found, 1).total == 0
    with pytest.raises(MissingSignal, match="TTFT p90 not measured"):
        slo(spec("SLO"), signals(arrival_rate=3, input_tokens_per_s=100, output_tokens_per_s=10, ttft=NAN), 1)


# ----------------------------------------------------------------------------- Independent


def test_independent_is_the_hpa_formula_per_role() -> None:
    """The Kubernetes example: 50 replicas at 90% against a 75% target -> 60."""
    wide = {"prefill": (1, 100), "decode": (1, 100)}
    targets = {"prefill": {"metric": "busyFraction", "value": 0.75}, "decode": {"metric": "busyFraction", "value": 0.75}}
    found = signals(prefill=role(50, busy=0.9), decode=role(50, busy=0.9))
    decision = first("Independent", found, current={"prefill": 50, "decode": 50}, bounds=wide, independent={"targets": targets})
    assert dict(decision.desired) == {"prefill": 60, "decode": 60}


def test_independent_keeps_the_count_within_the_tolerance() -> None:
    wide = {"prefill": (1, 100), "decode": (1, 100)}
    targets = {"prefill": {"metric": "busyFraction", "value": 0.75}, "decode": {"metric": "busyFraction", "value": 0.75}}
    # 0.82 / 0.75 = 1.093 (within 10%: keep 50); 0.83 / 0.75 = 1.107 (outside: ceil(55.3) = 56)
    found = signals(prefill=role(50, busy=0.82), decode=role(50, busy=0.83))
    decision = first("Independent", found, current={"prefill": 50, "decode": 50}, bounds=wide, independent={"targets": targets})
    assert dict(decision.desired) == {"prefill": 50, "decode": 56}
    assert "within 10% of target, keep 50" in decision.reason


def test_independent_roles_drift_apart_where_the_ratio_policies_do_not() -> None:
    """The gap the baseline shows: prefill starved while decode grows, no ratio kept."""
    found = signals(prefill=role(1, queue=0), decode=role(4, kv=1.0))
    assert dict(first("Independent", found, current={"prefill": 1, "decode": 4}).desired) == {"prefill": 1, "decode": 6}


def test_metrics_that_are_means_need_ready_replicas() -> None:
    decision = first("Independent", signals(prefill=role(1, queue=4), decode=role(0, kv=0.5)))
    assert not decision.changed and "no Ready decode replicas to measure kvUtilization" in decision.reason
