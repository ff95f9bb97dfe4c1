"""One engine's `/metrics` read as the figures the autoscaler needs (pure).

The operator parses a pod's exposition (prometheus-client's parser, at the edge) into
`Sample`s; `read_pod` picks the series an `EngineNames` maps to each figure. vLLM's names
are those of vllm-project/vllm `vllm/v1/metrics/loggers.py`, SGLang's those of
sgl-project/sglang `python/sglang/srt/metrics/collector.py` (the local API server's stand-ins
export the same). Another engine is read by giving its own `EngineNames`.

Each figure lists alternative names, the first one present wins (vLLM renamed its KV gauge
and exports ITL twice; summing both would count it double). Across label sets a gauge of
requests is summed, a usage gauge averaged, counters and histogram buckets summed.

What an absent series means: a gauge that is absent, or NaN (Prometheus' staleness
marker), is not measured (NaN, never 0). A counter or histogram that is absent has counted
nothing yet (0, no observations): prometheus-client shows a labelled series only from its
first increment, as SGLang's do. A figure mapped to no name at all (another engine's
mapping that leaves it out: `renamed`) is not measured (NaN), whatever its kind. An exposition with none of the mapped gauges is not this
engine's (a wrong mapping, a sidecar answering): no reading at all, the pod is missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

FIGURES = ("waiting", "running", "kv_usage", "prompt_tokens", "generation_tokens", "requests", "ttft", "itl")


@dataclass(frozen=True)
class Sample:
    """One line of an exposition: `name{labels} value` (a counter keeps its `_total`)."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


@dataclass(frozen=True)
class EngineNames:
    """Which series give each figure, alternatives in order of preference."""

    waiting: tuple[str, ...]  # gauge: requests queued
    running: tuple[str, ...]  # gauge: requests in the running batch
    kv_usage: tuple[str, ...]  # gauge: KV-cache use, 0..1
    prompt_tokens: tuple[str, ...]  # counter: prompt tokens processed
    generation_tokens: tuple[str, ...]  # counter: tokens generated
    requests: tuple[str, ...]  # counter: requests finished
    ttft: tuple[str, ...]  # histogram: time to first token, seconds
    itl: tuple[str, ...]  # histogram: inter-token latency, seconds


VLLM = EngineNames(
    waiting=("vllm:num_requests_waiting",),
    running=("vllm:num_requests_running",),
    kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    prompt_tokens=("vllm:prompt_tokens",),
    generation_tokens=("vllm:generation_tokens",),
    requests=("vllm:request_success",),
    ttft=("vllm:time_to_first_token_seconds",),
    itl=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
)

SGLANG = EngineNames(
    waiting=("sglang:num_queue_reqs",),
    running=("sglang:num_running_reqs",),
    kv_usage=("sglang:token_usage",),
    prompt_tokens=("sglang:prompt_tokens",),
    generation_tokens=("sglang:generation_tokens",),
    requests=("sglang:num_requests",),
    ttft=("sglang:time_to_first_token_seconds",),
    itl=("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
)

# By engine kind, as `tandem.api.engines.engine_of` names it.
ENGINE_NAMES: Mapping[str, EngineNames] = {"sglang": SGLANG, "vllm": VLLM}


# Another engine's mapping before any figure is named: nothing is read.
NO_NAMES = EngineNames(waiting=(), running=(), kv_usage=(), prompt_tokens=(), generation_tokens=(), requests=(), ttft=(), itl=())


def renamed(base: EngineNames | None, names: Mapping[str, str]) -> EngineNames:
    """`base` (an engine's own names; None: an engine without defaults) with each figure in
    `names` read from that one series instead; figures are `FIGURES`."""
    return replace(base if base is not None else NO_NAMES, **{figure: (name,) for figure, name in sorted(names.items())})


class BadEngineNames(ValueError):
    """A mapping for another engine that cannot be used; the message names the field."""


def engine_names(mapping: Mapping[str, object]) -> EngineNames:
    """An `EngineNames` from a plain mapping (a file's or a flag's), each figure a name or a
    list of names; every figure must be given."""
    unknown = sorted(set(mapping) - set(FIGURES))
    if unknown:
        raise BadEngineNames(f"{unknown[0]}: not a figure (one of {', '.join(FIGURES)})")
    fields: dict[str, tuple[str, ...]] = {}
    for figure in FIGURES:
        value = mapping.get(figure)
        names = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, (list, tuple)) else None
        if not names or not all(isinstance(n, str) and n for n in names):
            raise BadEngineNames(f"{figure}: a metric name or a non-empty list of names is required")
        fields[figure] = names
    return EngineNames(**fields)


@dataclass(frozen=True)
class Histogram:
    """Cumulative bucket counts, by upper bound ascending (the last is +Inf); none: nothing observed yet."""

    buckets: tuple[tuple[float, float], ...]

    @property
    def count(self) -> float:
        return self.buckets[-1][1] if self.buckets else 0.0


@dataclass(frozen=True)
class PodReading:
    """One pod's figures in one scrape (gauges NaN where not exported)."""

    waiting: float
    running: float
    kv_usage: float
    prompt_tokens: float
    generation_tokens: float
    requests: float
    ttft: Histogram
    itl: Histogram


def read_pod(samples: Iterable[Sample], names: EngineNames) -> PodReading | None:
    """The figures `names` maps, from one pod's exposition; None when it has none of its gauges."""
    by_name: dict[str, list[Sample]] = {}
    for sample in samples:
        if not math.isnan(sample.value):
            by_name.setdefault(sample.name, []).append(sample)
    if not any(name in by_name for name in (*names.waiting, *names.running, *names.kv_usage)):
        return None
    return PodReading(
        waiting=_gauge(by_name, names.waiting, mean=False),
        running=_gauge(by_name, names.running, mean=False),
        kv_usage=_gauge(by_name, names.kv_usage, mean=True),
        prompt_tokens=_counter(by_name, names.prompt_tokens),
        generation_tokens=_counter(by_name, names.generation_tokens),
        requests=_counter(by_name, names.requests),
        ttft=_histogram(by_name, names.ttft),
        itl=_histogram(by_name, names.itl),
    )


def _gauge(by_name: Mapping[str, list[Sample]], names: Sequence[str], *, mean: bool) -> float:
    for name in names:
        found = by_name.get(name)
        if found:
            total = math.fsum(s.value for s in found)
            return total / len(found) if mean else total
    return math.nan


def _counter(by_name: Mapping[str, list[Sample]], names: Sequence[str]) -> float:
    if not names:
        return math.nan  # mapped to nothing: not measured (not "counted nothing")
    for name in names:
        for exposed in (name, name + "_total"):
            found = by_name.get(exposed)
            if found:
                return math.fsum(s.value for s in found)
    return 0.0


def _histogram(by_name: Mapping[str, list[Sample]], names: Sequence[str]) -> Histogram:
    for name in names:
        found = by_name.get(name + "_bucket")
        if not found:
            continue
        counts: dict[float, float] = {}
        for sample in found:
            bound = _bound(dict(sample.labels).get("le"))
            if bound is not None:
                counts[bound] = counts.get(bound, 0.0) + sample.value
        if counts and math.inf in counts:
            return Histogram(tuple(sorted(counts.items())))
    return Histogram(())


def _bound(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None
