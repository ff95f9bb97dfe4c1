"""A history of scrapes of a group's pods turned into `Signals` (pure).

Each `ScrapeRound` lists the pods that were Ready (one per replica: the leader, which
serves the engine's HTTP) at its time, each with its reading or None when it did not
answer. The window is the `window_s` seconds up to the latest round; `Signals.at` is that
round's time, so the scaler's `metricMaxAgeSeconds` judges how old they are.

- Gauges (queue, KV use) are each pod's mean over its readings in the window; a role's
  queue is the sum over its pods, its KV use the mean. `busy_fraction` is the share of a
  pod's readings with a running request (engines export no busy time), averaged.
- Counters become rates: a pod's increase between its first and last reading in the
  window over the time between them. **A counter reset** (a value lower than the one
  before: the pod restarted, or was recreated under its name) counts the new value as
  the increase since the previous reading, as Prometheus' `rate()` does; never negative.
- Histograms become the 90th percentile of the observations made in the window, their
  bucket counts' increases merged over the pods, interpolated inside a bucket as
  Prometheus' `histogram_quantile()` does (a reset as for counters); NaN when none.
- **A pod missing from a scrape** (no answer, a time-out, an exposition that did not
  parse or is not its engine's) is represented by its other readings in the window. A pod that is Ready in the
  latest round and has no reading in the window, or too few for a rate (two), makes its
  role's totals not measured (NaN): a sum without it would be too low and could scale
  down. The policy then takes no action, naming the figure.
- **A stale series**: a reading older than the window is never used (the pod counts as
  missing), and a gauge a pod stopped exporting is NaN in that reading, never 0 (what an
  absent counter or histogram means: `engine_metrics`).
- **All scrapes failed** (no pod answered in the latest round), no round, or no Ready
  engine pod: no `Signals` at all (None), so nothing is decided on missing data.
- A pod that runs no engine whose metrics are known (a router) counts in its role's
  replicas; its role's figures are not measured and it is left out of the group's.

Tokens per second of a role are prompt tokens for prefill engines, generated tokens
otherwise. Group figures: arrivals are requests finished per second and output tokens
generated per second at the pods that are not prefill-only, input tokens prompt tokens
per second at the prefill pods, or, when none is Ready, at the pods that serve whole
requests; never at decode pods (their prompts were prefilled elsewhere): with only decode
pods Ready they are not measured. Engines count what they
processed, not what arrived; a backlog shows in the queues.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal, Mapping, Sequence

from tandem.autoscaling.engine_metrics import Histogram, PodReading
from tandem.autoscaling.signals import RoleSignals, Signals

Serves = Literal["prefill", "decode"] | None
QUANTILE = 0.9


@dataclass(frozen=True)
class ScrapedPod:
    role: str  # the group's role (`tandem.dev/role`)
    serves: Serves  # the engine's own role; None: serves whole requests
    reading: PodReading | None  # None: missing from this scrape
    engine: bool = True  # False: it runs no engine whose metrics are known (a router): never read


@dataclass(frozen=True)
class ScrapeRound:
    at: float
    pods: Mapping[str, ScrapedPod]  # every Ready leader pod of the group, by name


def window_signals(rounds: Sequence[ScrapeRound], roles: Sequence[str], window_s: float) -> Signals | None:
    """The group's signals over the window ending at the latest round; None when nothing was measured."""
    if not rounds:
        return None
    ordered = sorted(rounds, key=lambda r: r.at)
    latest = ordered[-1]
    engines = {name: p for name, p in latest.pods.items() if p.engine}
    if not engines or all(p.reading is None for p in engines.values()):
        return None
    start = latest.at - window_s
    inside = [r for r in ordered if r.at > start or r is latest]
    history: dict[str, list[tuple[float, PodReading]]] = {}
    for name in sorted(latest.pods):
        history[name] = [(r.at, p.reading) for r in inside if (p := r.pods.get(name)) is not None and p.reading is not None]
    pods = {name: latest.pods[name] for name in sorted(latest.pods)}
    role_figures = {role: _role(role, pods, history) for role in sorted(set(roles) | {p.role for p in pods.values()})}
    generating = [n for n, p in pods.items() if p.engine and p.serves != "prefill"]
    # Prompts arrive at the prefill pods, else at the pods that serve whole requests; never
    # at decode pods (their prompts were prefilled elsewhere): none Ready, none measured.
    prompting = [n for n, p in pods.items() if p.engine and p.serves == "prefill"] or [n for n, p in pods.items() if p.engine and p.serves is None]
    return Signals(
        at=latest.at,
        window_s=float(window_s),
        roles=role_figures,
        arrival_rate=_total_rate(history, generating, lambda r: r.requests),
        input_tokens_per_s=_total_rate(history, prompting, lambda r: r.prompt_tokens),
        output_tokens_per_s=_total_rate(history, generating, lambda r: r.generation_tokens),
        ttft_p90_s=quantile(QUANTILE, _merged(history, lambda r: r.ttft)),
        itl_p90_s=quantile(QUANTILE, _merged(history, lambda r: r.itl)),
    )


def _role(role: str, pods: Mapping[str, ScrapedPod], history: Mapping[str, list[tuple[float, PodReading]]]) -> RoleSignals:
    names = [n for n, p in pods.items() if p.role == role]
    if not names:
        return RoleSignals(replicas=0, queue_depth=math.nan, busy_fraction=math.nan, kv_utilization=math.nan, tokens_per_s=math.nan)
    queues = [_mean([r.waiting for _, r in history[n]]) for n in names]
    busy = [_mean([float(r.running > 0) if not math.isnan(r.running) else math.nan for _, r in history[n]]) for n in names]
    kv = [_mean([r.kv_usage for _, r in history[n]]) for n in names]
    rates = [
        rate([(at, r.prompt_tokens if pods[n].serves == "prefill" else r.generation_tokens) for at, r in history[n]]) for n in names
    ]
    return RoleSignals(
        replicas=len(names),
        queue_depth=_strict_sum(queues),
        busy_fraction=_strict_mean(busy),
        kv_utilization=_strict_mean(kv),
        tokens_per_s=_strict_sum(rates),
    )


def increase(values: Sequence[float]) -> float:
    """A counter's increase over successive values; a drop is a reset (the new value is the increase)."""
    total = 0.0
    for before, after in zip(values, values[1:]):
        total += after - before if after >= before else after
    return total


def rate(points: Sequence[tuple[float, float]]) -> float:
    """Per-second increase of a counter over its (time, value) points that were measured; NaN
    with fewer than two or no time between them."""
    measured = [(at, v) for at, v in points if not math.isnan(v)]
    if len(measured) < 2 or measured[-1][0] <= measured[0][0]:
        return math.nan
    return increase([v for _, v in measured]) / (measured[-1][0] - measured[0][0])


def histogram_increase(readings: Sequence[Histogram]) -> dict[float, float]:
    """Cumulative counts observed between the first and last histogram, by upper bound; a
    count that dropped, or buckets that changed (from none: the first observations), is a reset."""
    total: dict[float, float] = {}
    for before, after in zip(readings, readings[1:]):
        same = [b for b, _ in before.buckets] == [b for b, _ in after.buckets]
        reset = not same or any(a < b for (_, b), (_, a) in zip(before.buckets, after.buckets))
        for index, (bound, count) in enumerate(after.buckets):
            grown = count if reset else count - before.buckets[index][1]
            total[bound] = total.get(bound, 0.0) + grown
    return total


def quantile(q: float, buckets: Mapping[float, float]) -> float:
    """Prometheus' histogram_quantile over cumulative counts by upper bound: NaN without
    observations; the highest finite bound when the rank lands in +Inf."""
    ordered = sorted(buckets.items())
    if not ordered or ordered[-1][1] <= 0:
        return math.nan
    rank = q * ordered[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def _merged(history: Mapping[str, list[tuple[float, PodReading]]], pick: Callable[[PodReading], Histogram]) -> dict[float, float]:
    merged: dict[float, float] = {}
    for name in sorted(history):
        for bound, count in histogram_increase([pick(r) for _, r in history[name]]).items():
            merged[bound] = merged.get(bound, 0.0) + count
    return merged


def _total_rate(history: Mapping[str, list[tuple[float, PodReading]]], names: Sequence[str], pick: Callable[[PodReading], float]) -> float:
    return _strict_sum([rate([(at, pick(r)) for at, r in history[n]]) for n in names])


def _mean(values: Sequence[float]) -> float:
    measured = [v for v in values if not math.isnan(v)]
    return math.fsum(measured) / len(measured) if measured else math.nan


def _strict_sum(values: Sequence[float]) -> float:
    """NaN when any part is: a total with a part missing is not measured."""
    return math.nan if not values or any(math.isnan(v) for v in values) else math.fsum(values)


def _strict_mean(values: Sequence[float]) -> float:
    return math.nan if not values or any(math.isnan(v) for v in values) else math.fsum(values) / len(values)
