"""PromQL for the autoscaler's figures and a Prometheus server's answers read as Signals:
the queries select the group's series over the window, a missing pod leaves its role not
measured (never a lower total), two scrapes are needed for a rate, and a group with no
series gives no signals."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from tandem.autoscaling.prometheus_queries import (
    ENGINE_QUERIES,
    BadQueries,
    KindAnswers,
    LeaderPod,
    engine_queries,
    group_signals,
    render,
    selector,
    window,
)


def test_queries_select_the_groups_series_over_the_window() -> None:
    vllm = ENGINE_QUERIES["vllm"]
    assert selector("serving", 'we"ird') == 'namespace="serving",tandem_dev_group="we\\"ird"'
    assert window(60) == "60s" and window(1.5) == "1500ms"
    assert render(vllm.waiting, "serving", "g", 30) == (
        'avg by (pod) (sum by (pod, instance) (avg_over_time(vllm:num_requests_waiting{namespace="serving",tandem_dev_group="g"}[30s])))'
    )
    assert render(vllm.generation_tokens, "ns", "g", 60) == (
        'sum by (pod) (rate({__name__=~"vllm:generation_tokens|vllm:generation_tokens_total",namespace="ns",tandem_dev_group="g"}[60s]))'
    )
    assert render(ENGINE_QUERIES["sglang"].ttft_p90, "ns", "g", 60) == (
        'histogram_quantile(0.9, sum by (le) (rate(sglang:time_to_first_token_seconds_bucket{namespace="ns",tandem_dev_group="g"}[60s])))'
    )
    # vLLM exports ITL under two names: the first present wins, never both summed
    assert render(vllm.itl_p90, "ns", "g", 60).count(" or ") == 1
    assert "> bool 0)[60s:]" in render(vllm.busy, "ns", "g", 60)
    assert all("$" not in render(q, "ns", "g", 60) for q in vars(ENGINE_QUERIES["sglang"]).values())


def test_queries_for_another_engine_name_every_query_and_use_the_selector() -> None:
    given_queries = {name: f"sum by (pod) (x_{name}{{$selector}})" for name in vars(ENGINE_QUERIES["vllm"])}
    assert engine_queries(given_queries).waiting == "sum by (pod) (x_waiting{$selector})"
    with pytest.raises(BadQueries, match="^busy: a PromQL query using"):
        engine_queries({**given_queries, "busy": "up"})
    with pytest.raises(BadQueries, match="^queue: not a query"):
        engine_queries({**given_queries, "queue": "x{$selector}"})


PODS = {
    "p-0": LeaderPod("prefill", "prefill", "vllm"),
    "d-0": LeaderPod("decode", "decode", "vllm"),
    "d-1": LeaderPod("decode", "decode", "vllm"),
    "r-0": LeaderPod("router", None, None),
}


def answers(**overrides: dict[str, float]) -> dict[str, KindAnswers]:
    per_pod: dict[str, dict[str, float]] = {
        "scrapes": {"p-0": 12, "d-0": 12, "d-1": 12},
        "waiting": {"p-0": 3, "d-0": 1, "d-1": 0.5},
        "busy": {"p-0": 1, "d-0": 0.5, "d-1": 0.25},
        "kv_usage": {"p-0": 0, "d-0": 0.4, "d-1": 0.2},
        "prompt_tokens": {"p-0": 900, "d-0": 1, "d-1": 2},
        "generation_tokens": {"p-0": 5, "d-0": 100, "d-1": 50},
        "requests": {"p-0": 5, "d-0": 3, "d-1": 2},
    }
    per_pod.update(overrides)
    return {"vllm": KindAnswers(per_pod, ttft_p90=0.2, itl_p90=0.03)}


def test_answers_become_role_and_group_figures() -> None:
    got = group_signals(PODS, ["prefill", "decode", "router"], answers(), 7.0, 60)
    assert got is not None and got.at == 7.0 and got.window_s == 60
    decode, prefill, router = got.roles["decode"], got.roles["prefill"], got.roles["router"]
    assert (decode.replicas, decode.queue_depth, decode.busy_fraction, decode.kv_utilization, decode.tokens_per_s) == (2, 1.5, 0.375, pytest.approx(0.3), 150)
    assert prefill.tokens_per_s == 900, "a prefill engine's tokens are the prompt tokens it processed"
    assert router.replicas == 1 and math.isnan(router.queue_depth), "a router counts, its figures are not measured"
    assert (got.arrival_rate, got.input_tokens_per_s, got.output_tokens_per_s) == (5, 900, 150)
    assert (got.ttft_p90_s, got.itl_p90_s) == (0.2, 0.03)


def test_a_ready_pod_with_no_series_leaves_its_role_not_measured() -> None:
    got = group_signals(PODS, ["prefill", "decode"], answers(waiting={"p-0": 3, "d-0": 1}), 0, 60)
    assert got is not None
    assert math.isnan(got.roles["decode"].queue_depth), "fewer series than Ready replicas: a sum would be too low"
    stale = group_signals(PODS, ["prefill", "decode"], answers(scrapes={"p-0": 12, "d-0": 12}), 0, 60)
    assert stale is not None and math.isnan(stale.roles["decode"].tokens_per_s) and math.isnan(stale.output_tokens_per_s)
    assert stale.roles["prefill"].tokens_per_s == 900, "the other role is still measured"


def test_a_prefill_role_with_no_ready_pod_leaves_the_prompt_tokens_unmeasured() -> None:
    """As the pods source (found by the fault campaign, issue 29): never the decode pods' prompts."""
    decode_only = {n: p for n, p in PODS.items() if p.role == "decode"}
    got = group_signals(decode_only, ["prefill", "decode"], answers(), 0, 60)
    assert got is not None and math.isnan(got.input_tokens_per_s) and got.output_tokens_per_s == 150
    whole = {"e-0": LeaderPod("engine", None, "vllm")}
    assert group_signals(whole, ["engine"], answers(scrapes={"e-0": 12}, prompt_tokens={"e-0": 70}), 0, 60).input_tokens_per_s == 70


def test_a_rate_needs_two_scrapes_and_a_counter_not_exported_yet_counted_nothing() -> None:
    once = group_signals(PODS, ["decode"], answers(scrapes={"p-0": 12, "d-0": 12, "d-1": 1}), 0, 60)
    assert once is not None and math.isnan(once.roles["decode"].tokens_per_s)
    assert once.roles["decode"].queue_depth == 1.5, "one scrape is enough for a gauge"
    quiet = group_signals(PODS, ["decode"], answers(generation_tokens={"p-0": 5, "d-0": 100}), 0, 60)
    assert quiet is not None and quiet.roles["decode"].tokens_per_s == 100


def test_no_series_of_any_engine_pod_gives_no_signals() -> None:
    assert group_signals(PODS, ["decode"], answers(scrapes={}), 0, 60) is None, "not scraped, or every series stale"
    assert group_signals({"r-0": PODS["r-0"]}, ["router"], {}, 0, 60) is None
    assert group_signals({}, ["decode"], {}, 0, 60) is None


def test_two_engine_kinds_give_the_higher_percentile() -> None:
    pods = {"a": LeaderPod("decode", None, "vllm"), "b": LeaderPod("decode", None, "sglang")}
    one = {"scrapes": {"a": 3, "b": 3}}
    got = group_signals(pods, ["decode"], {"vllm": KindAnswers(one, 0.1, math.nan), "sglang": KindAnswers(one, 0.3, 0.02)}, 0, 60)
    assert got is not None and (got.ttft_p90_s, got.itl_p90_s) == (0.3, 0.02)


FIGURES = ("waiting", "busy", "kv_usage", "prompt_tokens", "generation_tokens", "requests")
value = st.floats(min_value=0, max_value=1e4, allow_nan=False)


@settings(max_examples=examples(100))
@given(st.dictionaries(st.sampled_from(["d-0", "d-1", "p-0"]), st.fixed_dictionaries({f: value for f in FIGURES}), min_size=1),
       st.sampled_from(["d-0", "d-1", "p-0"]))
def test_a_pod_dropped_from_the_answers_never_lowers_a_total_it_leaves_it_not_measured(series, dropped) -> None:
    def kind(pods_series: dict[str, dict[str, float]]) -> dict[str, KindAnswers]:
        per_pod = {f: {p: s[f] for p, s in pods_series.items()} for f in FIGURES}
        per_pod["scrapes"] = {p: 5 for p in pods_series}
        return {"vllm": KindAnswers(per_pod, 0.1, 0.01)}

    full = group_signals(PODS, ["prefill", "decode"], kind(series), 0, 60)
    less = group_signals(PODS, ["prefill", "decode"], kind({p: s for p, s in series.items() if p != dropped}), 0, 60)
    if less is None:
        return
    assert full is not None
    role = PODS[dropped].role
    for name in ("queue_depth", "tokens_per_s", "kv_utilization", "busy_fraction"):
        assert math.isnan(getattr(less.roles[role], name)), "the dropped pod's role is not measured"
    for other in {"prefill", "decode"} - {role}:
        assert repr(less.roles[other]) == repr(full.roles[other]), "other roles are as they were"
