"""Engine expositions read as Signals over a window: names, rates, percentiles, and what a
counter reset, a missing pod, a stale series and all scrapes failing mean."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from tandem.autoscaling.engine_metrics import SGLANG, VLLM, BadEngineNames, Histogram, PodReading, Sample, engine_names, read_pod
from tandem.autoscaling.signals import Signals
from tandem.autoscaling.scrape_window import ScrapedPod, ScrapeRound, histogram_increase, increase, quantile, rate, window_signals

FAST = settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAN = math.nan
BOUNDS = (0.1, 0.5, 1.0, math.inf)


def reading(waiting=0.0, running=0.0, kv=0.0, prompt=0.0, generated=0.0, requests=0.0, ttft=None, itl=None) -> PodReading:
    return PodReading(waiting, running, kv, prompt, generated, requests, ttft or Histogram(()), itl or Histogram(()))


def hist(*counts: float) -> Histogram:
    """Cumulative counts over BOUNDS."""
    return Histogram(tuple(zip(BOUNDS, counts)))


def flat(signals: Signals | None) -> dict[str, float]:
    assert signals is not None
    figures = {k: float(v) for k, v in vars(signals).items() if k != "roles"}
    for role, found in signals.roles.items():
        figures.update({f"{role}.{k}": float(v) for k, v in vars(found).items()})
    return figures


def rounds(*steps: tuple[float, dict[str, tuple[str, str | None, PodReading | None]]]) -> list[ScrapeRound]:
    return [ScrapeRound(at, {pod: ScrapedPod(role, serves, r) for pod, (role, serves, r) in pods.items()}) for at, pods in steps]


# ----------------------------------------------------------------------------- reading a pod


def test_vllm_names_are_read_preferring_the_current_kv_gauge_and_one_itl_histogram() -> None:
    labels = (("engine", "0"), ("model_name", "m"))
    samples = [
        Sample("vllm:num_requests_waiting", labels, 3.0),
        Sample("vllm:num_requests_waiting", (("engine", "1"), ("model_name", "m")), 2.0),
        Sample("vllm:num_requests_running", labels, 4.0),
        Sample("vllm:kv_cache_usage_perc", labels, 0.5),
        Sample("vllm:kv_cache_usage_perc", (("engine", "1"), ("model_name", "m")), 0.7),
        Sample("vllm:gpu_cache_usage_perc", labels, 0.9),
        Sample("vllm:prompt_tokens_total", labels, 100.0),
        Sample("vllm:generation_tokens_total", labels, 40.0),
        Sample("vllm:request_success_total", (*labels, ("finished_reason", "length")), 2.0),
        Sample("vllm:request_success_total", (*labels, ("finished_reason", "stop")), 3.0),
        *[Sample("vllm:inter_token_latency_seconds_bucket", (*labels, ("le", le)), c) for le, c in (("0.1", 1), ("+Inf", 2))],
        *[Sample("vllm:time_per_output_token_seconds_bucket", (*labels, ("le", le)), c) for le, c in (("0.1", 1), ("+Inf", 2))],
    ]
    got = read_pod(samples, VLLM)
    assert got is not None
    assert (got.waiting, got.running, got.prompt_tokens, got.generation_tokens, got.requests) == (5.0, 4.0, 100.0, 40.0, 5.0)
    assert got.kv_usage == pytest.approx(0.6), "usage averaged over engines; the pre-V1 name not added"
    assert got.itl == Histogram(((0.1, 1.0), (math.inf, 2.0))), "ITL exported twice is read once"
    assert got.ttft == Histogram(()) and got.prompt_tokens == 100.0


def test_an_absent_gauge_is_not_measured_while_an_absent_counter_has_counted_nothing_yet() -> None:
    """prometheus-client shows a labelled counter only from its first increment (SGLang's do)."""
    got = read_pod([Sample("sglang:num_queue_reqs", (), NAN), Sample("sglang:num_running_reqs", (), 2.0)], SGLANG)
    assert got is not None and math.isnan(got.waiting) and got.running == 2.0
    assert got.prompt_tokens == 0.0 and got.ttft == Histogram(())


def test_an_exposition_with_none_of_the_engines_gauges_is_no_reading() -> None:
    """A wrong mapping must not read as an idle engine (zero rates would scale down)."""
    assert read_pod([Sample("vllm:num_requests_waiting", (), 3.0), Sample("sglang:prompt_tokens_total", (), 5.0)], SGLANG) is None
    assert read_pod([], VLLM) is None


def test_another_engine_is_mapped_by_name_and_a_bad_mapping_names_its_field() -> None:
    names = engine_names({"waiting": "q", "running": ["r"], "kv_usage": "kv", "prompt_tokens": "p", "generation_tokens": "g",
                          "requests": "n", "ttft": "t", "itl": "i"})
    got = read_pod([Sample("q", (), 7.0), Sample("p_total", (), 9.0)], names)
    assert got is not None and (got.waiting, got.prompt_tokens) == (7.0, 9.0)
    with pytest.raises(BadEngineNames, match="^itl: "):
        engine_names({"waiting": "q", "running": "r", "kv_usage": "kv", "prompt_tokens": "p", "generation_tokens": "g", "requests": "n", "ttft": "t"})
    with pytest.raises(BadEngineNames, match="^queue: not a figure"):
        engine_names({"queue": "q"})


# ----------------------------------------------------------------------------- counters and histograms


def test_a_counter_reset_counts_the_new_value_as_the_increase() -> None:
    """A restarted pod's counter starts again from 0: 100 -> 130 -> (restart) 20 -> 50 is 30 + 20 + 30."""
    assert increase([100, 130, 20, 50]) == 80
    assert rate([(0, 100), (10, 130), (20, 20), (30, 50)]) == pytest.approx(80 / 30)
    assert math.isnan(rate([(0, 100)])), "one reading has no rate"


def test_a_histogram_reset_counts_the_new_buckets_and_the_p90_interpolates_inside_a_bucket() -> None:
    observed = histogram_increase([hist(1, 2, 3, 3), hist(5, 8, 9, 10), hist(0, 1, 1, 1)])
    assert observed == {0.1: 4.0, 0.5: 7.0, 1.0: 7.0, math.inf: 8.0}
    assert histogram_increase([Histogram(()), hist(1, 1, 2, 2)]) == {0.1: 1.0, 0.5: 1.0, 1.0: 2.0, math.inf: 2.0}, \
        "a histogram that appears counts its first observations"
    assert quantile(0.9, {0.1: 0.0, 0.5: 10.0, math.inf: 10.0}) == pytest.approx(0.1 + 0.4 * 0.9)
    assert quantile(0.9, {0.1: 1.0, math.inf: 10.0}) == 0.1, "in +Inf: the highest finite bound"
    assert math.isnan(quantile(0.9, {0.1: 0.0, math.inf: 0.0}))


@FAST
@given(st.lists(st.tuples(st.integers(0, 50), st.floats(0, 1e6)), min_size=2, max_size=12))
def test_a_rate_is_never_negative_and_is_the_plain_slope_without_resets(points: list[tuple[int, float]]) -> None:
    timed = [(float(i * 5 + t % 5), v) for i, (t, v) in enumerate(points)]
    got = rate(timed)
    assert got >= 0
    monotone = [(at, v) for at, v in zip([a for a, _ in timed], sorted(v for _, v in timed))]
    assert rate(monotone) == pytest.approx((monotone[-1][1] - monotone[0][1]) / (monotone[-1][0] - monotone[0][0]))


@FAST
@given(st.lists(st.integers(0, 20), min_size=4, max_size=4), st.floats(0.01, 0.99))
def test_a_quantile_lies_inside_the_bucket_that_holds_its_rank(increments: list[int], q: float) -> None:
    cumulative = [float(sum(increments[: i + 1])) for i in range(4)]
    got = quantile(q, dict(zip(BOUNDS, cumulative)))
    if cumulative[-1] == 0:
        assert math.isnan(got)
    else:
        assert 0 <= got <= 1.0
        assert quantile(min(q + 0.005, 1.0), dict(zip(BOUNDS, cumulative))) >= got


# ----------------------------------------------------------------------------- the window


def steady(at: float, pod: int, gauge: float = 1.0) -> PodReading:
    """Pod `pod` at a steady load: constant gauges, counters rising 10 x (pod + 1) per second."""
    per_s = 10.0 * (pod + 1)
    return reading(waiting=gauge * (pod + 1), running=1.0, kv=0.1 * (pod + 1), prompt=per_s * at, generated=per_s * at / 2,
                   requests=at * 0.1, ttft=hist(at, at, at, at), itl=hist(at, 2 * at, 2 * at, 2 * at))


def test_a_window_gives_per_role_sums_means_rates_and_group_figures() -> None:
    history = rounds(*[(t, {"p-0": ("prefill", "prefill", steady(t, 0)), "d-0": ("decode", "decode", steady(t, 1)),
                             "d-1": ("decode", "decode", steady(t, 2))}) for t in (0.0, 15.0, 30.0)])
    got = window_signals(history, ["prefill", "decode"], 60)
    assert got is not None and got.at == 30.0 and got.window_s == 60.0
    prefill, decode = got.roles["prefill"], got.roles["decode"]
    assert (prefill.replicas, prefill.queue_depth, prefill.tokens_per_s) == (1, 1.0, pytest.approx(10.0)), "prefill: prompt tokens/s"
    assert (decode.replicas, decode.queue_depth) == (2, 5.0)
    assert decode.tokens_per_s == pytest.approx(10.0 + 15.0), "decode: generated tokens/s"
    assert decode.kv_utilization == pytest.approx(0.25) and decode.busy_fraction == 1.0
    assert got.arrival_rate == pytest.approx(0.2) and got.output_tokens_per_s == pytest.approx(25.0)
    assert got.input_tokens_per_s == pytest.approx(10.0), "prompt tokens counted at the prefill pods"
    assert got.ttft_p90_s == pytest.approx(0.1 * 0.9), "all 90 observations in the first bucket"


def test_a_pod_missing_from_a_scrape_is_represented_by_its_other_readings_in_the_window() -> None:
    full = rounds(*[(t, {"d-0": ("decode", "decode", steady(t, 0)), "d-1": ("decode", "decode", steady(t, 1))}) for t in (0.0, 15.0, 30.0)])
    gap = rounds(*[(t, {"d-0": ("decode", "decode", steady(t, 0)), "d-1": ("decode", "decode", None if t == 30.0 else steady(t, 1))})
                   for t in (0.0, 15.0, 30.0)])
    assert flat(window_signals(gap, ["decode"], 60)) == pytest.approx(flat(window_signals(full, ["decode"], 60)), nan_ok=True)


def test_a_ready_pod_with_no_reading_in_the_window_leaves_its_role_unmeasured_not_smaller() -> None:
    """A new decode pod that has not answered yet: the total without it would be too low and could scale down."""
    history = rounds((0.0, {"d-0": ("decode", "decode", steady(0.0, 0))}),
                     (15.0, {"d-0": ("decode", "decode", steady(15.0, 0)), "d-1": ("decode", "decode", None)}))
    got = window_signals(history, ["decode", "prefill"], 60)
    assert got is not None
    decode = got.roles["decode"]
    assert decode.replicas == 2 and math.isnan(decode.queue_depth) and math.isnan(decode.tokens_per_s)
    assert math.isnan(got.output_tokens_per_s)
    assert got.roles["prefill"].replicas == 0 and math.isnan(got.roles["prefill"].queue_depth), "a role with no Ready pod: unmeasured"


def test_a_reading_older_than_the_window_is_stale_and_not_used() -> None:
    history = rounds((0.0, {"d-0": ("decode", "decode", steady(0.0, 0)), "d-1": ("decode", "decode", steady(0.0, 1))}),
                     (90.0, {"d-0": ("decode", "decode", steady(90.0, 0)), "d-1": ("decode", "decode", None)}))
    got = window_signals(history, ["decode"], 60)
    assert got is not None and math.isnan(got.roles["decode"].queue_depth), "d-1's only answer is 90 s old in a 60 s window"


def test_when_every_scrape_of_the_latest_round_failed_there_are_no_signals() -> None:
    history = rounds(*[(t, {"d-0": ("decode", "decode", steady(t, 0))}) for t in (0.0, 15.0)],
                     (30.0, {"d-0": ("decode", "decode", None)}))
    assert window_signals(history, ["decode"], 60) is None
    assert window_signals([], ["decode"], 60) is None
    assert window_signals(rounds((0.0, {})), ["decode"], 60) is None, "no Ready pod: nothing measured"


def test_a_router_pod_counts_in_its_role_but_not_in_the_group_figures() -> None:
    steps = [ScrapeRound(t, {"d-0": ScrapedPod("decode", "decode", steady(t, 0)), "r-0": ScrapedPod("router", None, None, engine=False)})
             for t in (0.0, 15.0)]
    got = window_signals(steps, ["decode", "router"], 60)
    assert got is not None and got.roles["router"].replicas == 1 and math.isnan(got.roles["router"].queue_depth)
    assert got.output_tokens_per_s == pytest.approx(5.0)


@FAST
@given(st.integers(1, 4), st.integers(2, 6), st.data())
def test_at_a_steady_load_missing_scrapes_only_ever_turn_a_figure_unmeasured_never_change_it(pods: int, steps: int, data) -> None:
    """The invariant behind "no scale-down on missing data": losing scrapes never yields a
    different number (in particular a smaller total), only NaN or no Signals."""
    times = [15.0 * i for i in range(steps)]
    roles = {f"pod-{i}": ("prefill", "prefill") if i % 2 else ("decode", "decode") for i in range(pods)}
    full = rounds(*[(t, {p: (*roles[p], steady(t, i)) for i, p in enumerate(roles)}) for t in times])
    lost = data.draw(st.sets(st.tuples(st.sampled_from(range(steps)), st.sampled_from(sorted(roles)))))
    gappy = rounds(*[(t, {p: (*roles[p], None if (k, p) in lost else steady(t, i)) for i, p in enumerate(roles)}) for k, t in enumerate(times)])
    whole, partial = window_signals(full, ["prefill", "decode"], 120), window_signals(gappy, ["prefill", "decode"], 120)
    assert whole is not None
    if partial is None:
        return
    for role, figures in partial.roles.items():
        for field in ("queue_depth", "busy_fraction", "kv_utilization", "tokens_per_s"):
            got, expected = getattr(figures, field), getattr(whole.roles[role], field)
            assert math.isnan(got) or got == pytest.approx(expected), (role, field)
    for field in ("arrival_rate", "input_tokens_per_s", "output_tokens_per_s"):
        got, expected = getattr(partial, field), getattr(whole, field)
        assert math.isnan(got) or got == pytest.approx(expected), field


def test_a_prefill_role_with_no_ready_pod_leaves_the_prompt_tokens_unmeasured() -> None:
    """Found by the fault campaign (issue 29): every prefill pod not Ready, the prompt
    tokens were read at the decode pods (none arrive there), and SLO scaled prefill down."""
    decode_only = rounds(*[(t, {"d-0": ("decode", "decode", steady(t, 1))}) for t in (0.0, 15.0, 30.0)])
    got = window_signals(decode_only, ["prefill", "decode"], 60)
    assert got is not None and math.isnan(got.input_tokens_per_s) and got.output_tokens_per_s == pytest.approx(10.0)
    whole_requests = rounds(*[(t, {"e-0": ("engine", None, steady(t, 0))}) for t in (0.0, 15.0, 30.0)])
    assert flat(window_signals(whole_requests, ["engine"], 60))["input_tokens_per_s"] == pytest.approx(10.0), "no prefill role: every pod"
