"""The autoscaler loop's Prometheus series, in the operator's registry.

| metric | type | labels |
|---|---|---|
| tandem_autoscaler_pass_duration_seconds | histogram | |
| tandem_autoscaler_last_pass_timestamp_seconds | gauge | (when the last autoscaler pass ended, Unix seconds) |
| tandem_autoscaler_decisions_total | counter | namespace, group, outcome (scaled, unchanged, conflict, failed, or the ScalingActive condition's False reason) |
| tandem_autoscaler_desired_replicas | gauge | namespace, group, role (per unit, as last decided) |
| tandem_autoscaler_panic | gauge | namespace, group (1 while the policy panics) |
| tandem_autoscaler_signal_age_seconds | gauge | namespace, group (the signals' age when last decided from) |
| tandem_autoscaler_role_signal | gauge | namespace, group, role, signal (replicas, queueDepth, busyFraction, kvUtilization, tokensPerSecond) |
| tandem_autoscaler_group_signal | gauge | namespace, group, signal (windowSeconds, arrivalRate, inputTokensPerSecond, outputTokensPerSecond, ttftP90Seconds, itlP90Seconds) |

A figure not measured (NaN) has no series rather than a NaN one, and neither has a
decision taken without signals; a group without `spec.autoscaling` (or deleted) loses
all of its series, so a dashboard shows what the autoscaler last read, per group.
"""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from tandem.autoscaling.signals import Signals
from tandem.controller import AutoscaleReport

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

Series = tuple[Gauge | Counter, tuple[str, ...]]


def signal_values(signals: Signals) -> tuple[list[tuple[str, str, float]], list[tuple[str, float]]]:
    """The signals a decision read, by the names the series carry: per role (role,
    signal, value) and per group (signal, value), sorted."""
    per_role = []
    for role in sorted(signals.roles):
        figures = signals.roles[role]
        for name, value in (("busyFraction", figures.busy_fraction), ("kvUtilization", figures.kv_utilization), ("queueDepth", figures.queue_depth),
                            ("replicas", float(figures.replicas)), ("tokensPerSecond", figures.tokens_per_s)):
            per_role.append((role, name, value))
    group = [("arrivalRate", signals.arrival_rate), ("inputTokensPerSecond", signals.input_tokens_per_s), ("itlP90Seconds", signals.itl_p90_s),
             ("outputTokensPerSecond", signals.output_tokens_per_s), ("ttftP90Seconds", signals.ttft_p90_s), ("windowSeconds", signals.window_s)]
    return per_role, group


class AutoscalerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.pass_duration = Histogram("tandem_autoscaler_pass_duration_seconds", "Duration of one autoscaler pass (reading signals included).",
                                       buckets=_BUCKETS, registry=r)
        self.last_pass = Gauge("tandem_autoscaler_last_pass_timestamp_seconds", "When the last autoscaler pass ended (Unix seconds).", registry=r)
        self.decisions = Counter("tandem_autoscaler_decisions", "Autoscaler decisions per group, by outcome.", ["namespace", "group", "outcome"],
                                 registry=r)
        self.desired = Gauge("tandem_autoscaler_desired_replicas", "Replicas per unit of each managed role, as last decided.",
                             ["namespace", "group", "role"], registry=r)
        self.panic = Gauge("tandem_autoscaler_panic", "1 while the group's policy panics.", ["namespace", "group"], registry=r)
        self.age = Gauge("tandem_autoscaler_signal_age_seconds", "Age of the signals the last decision read, at that decision.",
                         ["namespace", "group"], registry=r)
        self.role_signal = Gauge("tandem_autoscaler_role_signal", "A per-role signal the last decision read.",
                                 ["namespace", "group", "role", "signal"], registry=r)
        self.group_signal = Gauge("tandem_autoscaler_group_signal", "A group-wide signal the last decision read.", ["namespace", "group", "signal"],
                                  registry=r)
        self._series: dict[tuple[str, str], set[Series]] = {}  # per group, every series it has

    def observe(self, report: AutoscaleReport, seconds: float, ended: float) -> None:
        """Count the pass and each decision; set each decided group's series; drop the series
        of groups that no longer configure autoscaling."""
        self.pass_duration.observe(seconds)
        self.last_pass.set(ended)
        for row in report.decided:
            key = (row.namespace, row.name)
            kept: set[Series] = {s for s in self._series.get(key, set()) if s[0] is self.decisions}
            self.decisions.labels(row.namespace, row.name, row.outcome).inc()
            kept.add((self.decisions, (row.namespace, row.name, row.outcome)))
            values: list[tuple[Gauge, tuple[str, ...], float]] = [(self.panic, key, 1.0 if row.panic else 0.0)]
            values += [(self.desired, (*key, role), float(count)) for role, count in sorted(row.desired.items())]
            if row.signals is not None and row.age is not None:
                values.append((self.age, key, row.age))
                per_role, group = signal_values(row.signals)
                values += [(self.role_signal, (*key, role, name), value) for role, name, value in per_role]
                values += [(self.group_signal, (*key, name), value) for name, value in group]
            for gauge, labels, value in values:
                if math.isfinite(value):
                    gauge.labels(*labels).set(value)
                    kept.add((gauge, labels))
            self._replace(key, kept)
        present = set(report.groups)
        for key in [k for k in self._series if k not in present]:
            self._replace(key, set())

    def _replace(self, key: tuple[str, str], kept: set[Series]) -> None:
        for metric, labels in self._series.pop(key, set()) - kept:
            metric.remove(*labels)
        if kept:
            self._series[key] = kept
