"""Repetitions and fair comparisons: seeds, trace offsets, the speed factor, variants'
autoscaling patches, and the mean and 95% interval across seeds."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tandem.errors import InputError
from tandem.sim.scenario import load_scenario, rotated, scaled_gpu, with_variant
from tandem.sim.serving import decode_step_seconds, gpu_profile, model_profile, prefill_seconds
from tandem.sim.summary import across_seeds, intervals_apart, mean_ci, t_quantile_975
from tandem.sim.traces import Trace

ROOT = Path(__file__).resolve().parents[2]
GROUP = ROOT / "examples" / "llama-70b-autoscaled.yaml"

SCENARIO = """
apiVersion: tandem.dev/v1alpha1
kind: Scenario
metadata: {name: seeds}
spec:
  seed: 5
  durationSeconds: 300
  cluster: {shape: "block=1,rack=2,host=2", gpus: 8}
  groups:
    - {at: 0, file: group.yaml}
  serving:
    - group: serving/llama-70b-chat
      model: llama-3.1-70b
      gpu: h100-sxm
      slo: {ttftSeconds: 1.0, itlSeconds: 0.05}
      LOAD
  compare:
    - {name: fixed, autoscaling: FixedRatio}
    - {name: band-raise, autoscaling: PreferredBand, autoscalingPatch: {ratioEnforcement: raiseShort}}
    - name: hpa-busy
      autoscaling: Independent
      autoscalingPatch: {independent: {targets: {prefill: {metric: busyFraction, value: 0.6}, decode: {metric: tokensPerSecond, value: 3000}}}}
    - {name: slow, autoscaling: FixedRatio, speedFactor: 0.7}
"""
SYNTHETIC = "synthetic: {rate: 4}"
TRACE = "trace: {file: trace.csv, rate: 2}"


def _load(tmp_path: Path, load: str = SYNTHETIC, replicate: int = 0, text: str = SCENARIO):
    (tmp_path / "group.yaml").write_text(GROUP.read_text())
    arrivals = np.sort(np.random.default_rng(0).uniform(0, 200, 50))
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    rows += [f"2023-11-16 18:{int(t // 60):02d}:{t % 60:09.6f},{100 + i},{10 + i}" for i, t in enumerate(arrivals)]
    (tmp_path / "trace.csv").write_text("\n".join(rows) + "\n")
    return load_scenario("scenario.yaml", text.replace("LOAD", load), lambda rel: (rel, (tmp_path / rel).read_text()), replicate=replicate)


# ----------------------------------------------------------------------------- statistics


def test_the_t_quantiles_are_student_ts() -> None:
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 4, 9, 29, 30, 31, 50, 120, 1000):
        assert t_quantile_975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=1e-6)


def test_mean_and_interval_by_hand() -> None:
    stat = mean_ci([1.0, 2.0, 3.0])
    half = 4.302652730 * 1.0 / math.sqrt(3)  # t(0.975, 2) x sd 1 / sqrt(3)
    assert stat["n"] == 3 and stat["mean"] == 2.0
    assert stat["ci95"] == [pytest.approx(2 - half, abs=1e-6), pytest.approx(2 + half, abs=1e-6)]
    assert mean_ci([0.5])["ci95"] is None and mean_ci([0.5])["mean"] == 0.5
    missing = mean_ci([None, 1.0, 1.0])
    assert missing["n"] == 2 and missing["values"] == [None, 1.0, 1.0] and missing["ci95"] == [1.0, 1.0]
    assert mean_ci([None])["mean"] is None


def test_intervals_apart_only_when_they_do_not_overlap() -> None:
    low, high, wide = mean_ci([1.0, 1.1, 1.2]), mean_ci([2.0, 2.1, 2.2]), mean_ci([0.0, 3.0, 1.5])
    assert intervals_apart(low, high) and intervals_apart(high, low)
    assert not intervals_apart(low, wide) and not intervals_apart(low, mean_ci([5.0]))


# ----------------------------------------------------------------------------- seeds


def test_replicates_reseed_synthetic_load_and_the_cluster(tmp_path) -> None:
    first, second = _load(tmp_path), _load(tmp_path, replicate=1)
    assert (first.seed, second.seed) == (5, 6) and first.seeds == 1
    a, b = first.serving[0].trace, second.serving[0].trace
    assert not np.array_equal(a.arrival_s, b.arrival_s)
    again = _load(tmp_path, replicate=1).serving[0].trace
    assert np.array_equal(again.arrival_s, b.arrival_s) and np.array_equal(again.input_tokens, b.input_tokens)


def test_replicates_replay_a_trace_from_another_offset_with_the_same_requests(tmp_path) -> None:
    replays = [_load(tmp_path, TRACE, replicate=k) for k in range(4)]
    traces = [s.serving[0].trace for s in replays]
    offsets = [s.trace_offsets_s["serving/llama-70b-chat"] for s in replays]
    assert offsets[0] == 0.0 and len(set(offsets)) == 4
    for trace in traces[1:]:
        assert len(trace) == len(traces[0]) and not np.array_equal(trace.arrival_s, traces[0].arrival_s)
        assert sorted(zip(trace.input_tokens, trace.output_tokens)) == sorted(zip(traces[0].input_tokens, traces[0].output_tokens))


def test_rotation_wraps_the_replay_around_keeping_its_rate() -> None:
    trace = Trace("t", np.arange(10.0), np.arange(1, 11), np.full(10, 5))
    same, offset = rotated(trace, 0)
    assert same is trace and offset == 0.0
    turned, offset = rotated(trace, 1)
    assert offset == pytest.approx(0.618034 * 10, abs=1e-3)  # the span plus one mean gap
    assert list(turned.input_tokens) == [8, 9, 10, 1, 2, 3, 4, 5, 6, 7]
    assert np.all(np.diff(turned.arrival_s) >= 0) and turned.arrival_s[-1] < 10
    assert np.allclose(np.diff(turned.arrival_s), 1.0)  # one mean gap across the seam too


def test_across_seeds_summarises_each_serving_figure(tmp_path) -> None:
    replays = [_load(tmp_path, TRACE, replicate=k) for k in range(3)]
    figures = [
        {"serving": {"g": {"slo_attainment": 0.5 + k / 10, "goodput_rps_per_gpu": 0.1, "mean_gpus": 8.0, "gpu_utilisation": None,
                           "ttft_s": {"p50": 0.1, "p90": 0.2, "p99": None}, "itl_s": {"p50": 0.01, "p90": 0.02, "p99": 0.03}}}}
        for k in range(3)
    ]
    across = across_seeds(list(zip(replays, figures)))
    assert across["seeds"] == [5, 6, 7]
    entry = across["serving"]["g"]
    assert entry["slo_attainment"]["mean"] == pytest.approx(0.6) and entry["slo_attainment"]["n"] == 3
    assert entry["gpu_utilisation"]["n"] == 0 and entry["ttft_s"]["p99"]["mean"] is None
    assert entry["goodput_rps_per_gpu"]["ci95"] == [0.1, 0.1]


# ----------------------------------------------------------------------------- variants


def test_a_variant_patches_the_autoscaling_settings(tmp_path) -> None:
    scenario = _load(tmp_path)
    by_name = {v.name: v for v in scenario.variants}
    autoscaling = with_variant(scenario, by_name["band-raise"]).arrivals[0][1]["spec"]["autoscaling"]
    assert autoscaling["policy"] == "PreferredBand" and autoscaling["ratioEnforcement"] == "raiseShort"
    hpa = with_variant(scenario, by_name["hpa-busy"]).arrivals[0][1]["spec"]["autoscaling"]
    assert hpa["independent"]["targets"]["decode"] == {"metric": "tokensPerSecond", "value": 3000}
    assert hpa["stabilization"] == scenario.arrivals[0][1]["spec"]["autoscaling"]["stabilization"], "the rest is merged, not replaced"
    assert scenario.arrivals[0][1]["spec"]["autoscaling"].get("ratioEnforcement") is None, "the scenario itself is untouched"


def test_a_patch_that_breaks_the_group_is_named(tmp_path) -> None:
    text = SCENARIO.replace("autoscalingPatch: {ratioEnforcement: raiseShort}", "autoscalingPatch: {ratioEnforcement: raiseAll}")
    with pytest.raises(InputError) as raised:
        _load(tmp_path, text=text)
    assert raised.value.problems[0].path == "spec.compare[1].autoscalingPatch"


def test_the_speed_factor_makes_every_engine_cost_slower_by_the_factor(tmp_path) -> None:
    model, gpu = model_profile("llama-3.1-70b"), gpu_profile("h100-sxm")
    slow = scaled_gpu(gpu, 0.7)
    for tokens in (128, 2048, 8192):
        assert prefill_seconds(model, slow, 4, tokens) == pytest.approx(prefill_seconds(model, gpu, 4, tokens) / 0.7, rel=1e-9)
    for batch in (1, 32, 256):
        assert decode_step_seconds(model, slow, 4, batch, batch * 1000) == pytest.approx(
            decode_step_seconds(model, gpu, 4, batch, batch * 1000) / 0.7, rel=1e-9
        )
    assert slow.hbm_gib == gpu.hbm_gib and slow.nic_gbps == gpu.nic_gbps  # sizes and the network unchanged
    scenario = _load(tmp_path)
    slowed = with_variant(scenario, next(v for v in scenario.variants if v.name == "slow"))
    assert slowed.serving[0].gpu.peak_tflops == pytest.approx(0.7 * scenario.serving[0].gpu.peak_tflops)
    whole = _load(tmp_path, text=SCENARIO.replace("seed: 5", "seed: 5\n  speedFactor: 0.5"))
    assert whole.serving[0].gpu.peak_tflops == pytest.approx(0.5 * gpu.peak_tflops)
