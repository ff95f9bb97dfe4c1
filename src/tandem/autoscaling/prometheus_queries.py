"""PromQL for the autoscaler's figures, and a Prometheus server's answers read as `Signals` (pure).

The operator asks a Prometheus server, per engine kind in a group, one instant query per
figure (`EngineQueries`, templates with `$selector`, the group's label matchers, and
`$window`, the window as `60s`). Per-pod queries answer one series per pod, labelled
`pod`; the two latency queries answer one series for the group. `group_signals` turns the
answers into `Signals` with the same meanings as the pods' own `/metrics`
(`scrape_window`):

- **Counters** are `rate()`s over the window (Prometheus counts a counter reset as the
  pods source does); **histograms** `histogram_quantile(0.9, ...)` of the bucket rates;
  **gauges** `avg_over_time`; busy is the share of the window with a running request.
- **A pod missing**: a Ready replica leader with no series in an answer (Prometheus never
  scraped it, or its series went stale: Prometheus marks a series stale when a scrape
  fails or the target goes, and a range query keeps only the samples inside the window)
  leaves its role's totals not measured (NaN): fewer series than Ready replicas would sum
  too low and could scale down. Rates need two scrapes of the pod in the window
  (`scrapes`); a pod scraped twice with no counter series has counted nothing yet (0).
- **A figure with no query** (another engine's mapping that names no series for it, `""`):
  not asked, not measured (NaN); without a `scrapes` query no pod has a series.
- **Prometheus down** (no answer, an error, a query that failed) and **no series of any
  engine pod of the group** (not scraped: the relabel config is missing, or every series
  is stale): no `Signals` at all, so nothing is decided, never a scale-down.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields, replace
from typing import Mapping, Sequence

from tandem.autoscaling.engine_metrics import ENGINE_NAMES, EngineNames
from tandem.autoscaling.scrape_window import Serves
from tandem.autoscaling.signals import RoleSignals, Signals

# The labels the relabel config (examples/prometheus/prometheus.yml) gives every series.
NAMESPACE_LABEL = "namespace"
POD_LABEL = "pod"
GROUP_LABEL = "tandem_dev_group"
ROLE_LABEL = "tandem_dev_role"

PER_POD = ("scrapes", "waiting", "busy", "kv_usage", "prompt_tokens", "generation_tokens", "requests")
PER_GROUP = ("ttft_p90", "itl_p90")


@dataclass(frozen=True)
class EngineQueries:
    """PromQL templates for one engine kind (`$selector`, `$window` are filled in)."""

    scrapes: str  # per pod: how many times it was scraped in the window (samples of a gauge)
    waiting: str  # per pod: mean requests queued
    busy: str  # per pod: share of the window with a request running (0..1)
    kv_usage: str  # per pod: mean KV-cache use (0..1)
    prompt_tokens: str  # per pod: prompt tokens processed per second
    generation_tokens: str  # per pod: tokens generated per second
    requests: str  # per pod: requests finished per second
    ttft_p90: str  # group: 90th percentile of time to first token, seconds
    itl_p90: str  # group: 90th percentile of inter-token latency, seconds


class BadQueries(ValueError):
    """Queries given for an engine that cannot be used; the message names the field."""


def _series(name: str) -> str:
    return f"{name}{{$selector}}"


def _first(parts: Sequence[str]) -> str:
    """Alternatives, the first present wins per pod (PromQL `or` keeps the left side's series);
    none: "" (not asked)."""
    return " or ".join(f"({p})" for p in parts) if len(parts) > 1 else parts[0] if parts else ""


def _counter(name: str) -> str:
    matcher = re.escape(name)
    return f'{{__name__=~"{matcher}|{matcher}_total",$selector}}'


def default_queries(names: EngineNames) -> EngineQueries:
    """The queries that read an engine's series as the pods source reads its exposition."""
    gauges = (*names.waiting, *names.running, *names.kv_usage)
    counted = _first([f"count_over_time({_series(n)}[$window])" for n in gauges])
    return EngineQueries(
        scrapes=f"max by (pod) ({counted})" if counted else "",
        waiting=_first([f"avg by (pod) (sum by (pod, instance) (avg_over_time({_series(n)}[$window])))" for n in names.waiting]),
        busy=_first([f"avg by (pod) (avg_over_time((sum by (pod, instance) ({_series(n)}) > bool 0)[$window:]))" for n in names.running]),
        kv_usage=_first([f"avg by (pod) (avg_over_time({_series(n)}[$window]))" for n in names.kv_usage]),
        prompt_tokens=_first([f"sum by (pod) (rate({_counter(n)}[$window]))" for n in names.prompt_tokens]),
        generation_tokens=_first([f"sum by (pod) (rate({_counter(n)}[$window]))" for n in names.generation_tokens]),
        requests=_first([f"sum by (pod) (rate({_counter(n)}[$window]))" for n in names.requests]),
        ttft_p90=_first([f"histogram_quantile(0.9, sum by (le) (rate({_series(n + '_bucket')}[$window])))" for n in names.ttft]),
        itl_p90=_first([f"histogram_quantile(0.9, sum by (le) (rate({_series(n + '_bucket')}[$window])))" for n in names.itl]),
    )


# By engine kind, as `tandem.api.engines.engine_of` names it.
ENGINE_QUERIES: Mapping[str, EngineQueries] = {kind: default_queries(names) for kind, names in sorted(ENGINE_NAMES.items())}


def engine_queries(mapping: Mapping[str, object]) -> EngineQueries:
    """An `EngineQueries` from a plain mapping (a file's), every query given, each using `$selector`."""
    known = [f.name for f in fields(EngineQueries)]
    unknown = sorted(set(mapping) - set(known))
    if unknown:
        raise BadQueries(f"{unknown[0]}: not a query (one of {', '.join(known)})")
    given: dict[str, str] = {}
    for name in known:
        value = mapping.get(name)
        if not isinstance(value, str) or "$selector" not in value:
            raise BadQueries(f"{name}: a PromQL query using $selector (the group's label matchers) is required")
        given[name] = value
    return EngineQueries(**given)


def with_queries(base: EngineQueries, queries: Mapping[str, str]) -> EngineQueries:
    """`base` with each figure in `queries` (names of `EngineQueries`' fields) asked by that template instead."""
    return replace(base, **dict(sorted(queries.items())))


def _label_value(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def selector(namespace: str, group: str) -> str:
    """The label matchers of a group's series."""
    return f"{NAMESPACE_LABEL}={_label_value(namespace)},{GROUP_LABEL}={_label_value(group)}"


def window(window_s: float) -> str:
    """A PromQL duration of whole milliseconds (`60s`, `1500ms`)."""
    ms = max(1, round(window_s * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def render(template: str, namespace: str, group: str, window_s: float) -> str:
    """A query of the group: the template with its selector and window filled in."""
    return template.replace("$selector", selector(namespace, group)).replace("$window", window(window_s))


@dataclass(frozen=True)
class LeaderPod:
    """A Ready replica leader of the group, as the cluster lists it."""

    role: str  # the group's role (`tandem.dev/role`)
    serves: Serves  # the engine's own role; None: serves whole requests
    kind: str | None  # whose queries read it; None: no engine whose queries are known (a router)


@dataclass(frozen=True)
class KindAnswers:
    """One engine kind's answers: per-pod figures by pod name, the group's latencies."""

    per_pod: Mapping[str, Mapping[str, float]]  # figure -> pod -> value
    ttft_p90: float  # NaN: no series (no first token in the window)
    itl_p90: float


def group_signals(
    pods: Mapping[str, LeaderPod], roles: Sequence[str], answers: Mapping[str, KindAnswers], at: float, window_s: float
) -> Signals | None:
    """The group's `Signals` from the answers for its engine kinds; None when no engine pod has a series."""
    engines = {n: p for n, p in sorted(pods.items()) if p.kind is not None and p.kind in answers}
    scrapes = {n: answers[p.kind].per_pod.get("scrapes", {}).get(n, 0.0) for n, p in engines.items() if p.kind is not None}
    if not engines or all(not count >= 1 for count in scrapes.values()):
        return None

    def figure(pod: str, name: str) -> float:
        """A pod's figure; NaN where not measured."""
        if pod not in engines or not scrapes[pod] >= 1:
            return math.nan
        kind = engines[pod].kind
        assert kind is not None
        asked = answers[kind].per_pod.get(name)
        if asked is None:
            return math.nan  # no query for the figure: not measured
        value = asked.get(pod)
        if name in ("prompt_tokens", "generation_tokens", "requests"):
            if not scrapes[pod] >= 2:
                return math.nan
            return 0.0 if value is None else value  # a counter not exported yet has counted nothing
        return math.nan if value is None else value

    def tokens(pod: str) -> float:
        return figure(pod, "prompt_tokens" if pods[pod].serves == "prefill" else "generation_tokens")

    role_figures: dict[str, RoleSignals] = {}
    for role in sorted(set(roles) | {p.role for p in pods.values()}):
        names = [n for n in sorted(pods) if pods[n].role == role]
        if not names:
            role_figures[role] = RoleSignals(replicas=0, queue_depth=math.nan, busy_fraction=math.nan, kv_utilization=math.nan, tokens_per_s=math.nan)
            continue
        role_figures[role] = RoleSignals(
            replicas=len(names),
            queue_depth=_strict_sum([figure(n, "waiting") for n in names]),
            busy_fraction=_strict_mean([figure(n, "busy") for n in names]),
            kv_utilization=_strict_mean([figure(n, "kv_usage") for n in names]),
            tokens_per_s=_strict_sum([tokens(n) for n in names]),
        )
    generating = [n for n, p in engines.items() if p.serves != "prefill"]
    # as the pods source: the prefill pods, else those serving whole requests, never decode pods
    prompting = [n for n, p in engines.items() if p.serves == "prefill"] or [n for n, p in engines.items() if p.serves is None]
    kinds = sorted({p.kind for p in engines.values() if p.kind is not None})
    return Signals(
        at=at,
        window_s=float(window_s),
        roles=role_figures,
        arrival_rate=_strict_sum([figure(n, "requests") for n in generating]),
        input_tokens_per_s=_strict_sum([figure(n, "prompt_tokens") for n in prompting]),
        output_tokens_per_s=_strict_sum([figure(n, "generation_tokens") for n in generating]),
        ttft_p90_s=_highest([answers[k].ttft_p90 for k in kinds]),
        itl_p90_s=_highest([answers[k].itl_p90 for k in kinds]),
    )


def _highest(values: Sequence[float]) -> float:
    """A group of several engine kinds: the highest of their percentiles (never the lower one)."""
    measured = [v for v in values if not math.isnan(v)]
    return max(measured) if measured else math.nan


def _strict_sum(values: Sequence[float]) -> float:
    """NaN when any part is: a total with a part missing is not measured."""
    return math.nan if not values or any(math.isnan(v) for v in values) else math.fsum(values)


def _strict_mean(values: Sequence[float]) -> float:
    return math.nan if not values or any(math.isnan(v) for v in values) else math.fsum(values) / len(values)
