"""Which metrics source reads a group's signals (pure): the group's `spec.autoscaling.metrics`
over the operator's flags.

    config = choose_source(spec.metrics, defaults)   # PodsSource | PrometheusSource | NoSource

Each field the group leaves out keeps the operator's (`--metrics-source`, `--prometheus-url`,
`--metrics-window`): the source, then the server's URL. A group that leaves the source out
but says where to read, on one side only (a Prometheus `url`, or the pods' `port` or
`path`), reads there: a server named and then ignored would surprise. A group may choose a source the
operator was not started with (`--metrics-source none` included): the flags are defaults,
the group's spec is the more specific word. A group that asks for Prometheus where neither
it nor the operator names a server gets `NoSource`, whose message says what to set (the
`ScalingActive=False NoMetricsSource` condition shows it).

A configuration is a frozen value, equal for groups configured alike, so the operator
builds one source per distinct configuration and keeps it across passes
(`tandem.operator.group_sources`). `names` and `queries` are (figure, value) pairs, sorted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tandem.api.autoscaling import MetricsSpec

SourceName = Literal["pods", "prometheus", "none"]
DEFAULT_WINDOW_S = 60.0  # Knative's stable window, and Kthena's default

# What a group without a source is told, by what left it without one.
OPERATOR_HAS_NONE = (
    "the operator runs without a metrics source (tandem operator --metrics-source none) and the group names none: the counts are not "
    "sized to load, only kept inside spec.autoscaling.roles; set spec.autoscaling.metrics.source (pods or prometheus) or the "
    "operator's --metrics-source"
)
PROMETHEUS_WITHOUT_URL = (
    "the metrics source is prometheus ({chosen}) but no server is named: set spec.autoscaling.metrics.prometheus.url, or start the "
    "operator with --prometheus-url"
)


@dataclass(frozen=True)
class SourceDefaults:
    """The operator's flags."""

    source: SourceName = "pods"
    prometheus_url: str | None = None
    window_s: float = DEFAULT_WINDOW_S


@dataclass(frozen=True)
class PodsSource:
    """Scrape the group's Ready replica leaders."""

    window_s: float
    names: tuple[tuple[str, str], ...] = ()  # (figure, series) the group names; the rest: the engine's own
    port: int | str | None = None  # None: the container port named `metrics`, else the engine's
    path: str = "/metrics"


@dataclass(frozen=True)
class PrometheusSource:
    """Ask a Prometheus server."""

    url: str
    window_s: float
    names: tuple[tuple[str, str], ...] = ()  # (figure, series): the default queries are made from them
    queries: tuple[tuple[str, str], ...] = ()  # (figure, PromQL template) the group gives


@dataclass(frozen=True)
class NoSource:
    """The group has no usable metrics source; `message` says what to set."""

    message: str


SourceConfig = PodsSource | PrometheusSource | NoSource


def choose_source(metrics: MetricsSpec | None, defaults: SourceDefaults) -> SourceConfig:
    """The group's source: its `spec.autoscaling.metrics` over the operator's `defaults`."""
    spec = metrics if metrics is not None else MetricsSpec()
    source: SourceName = spec.source or _implied(spec) or defaults.source
    names = _pairs(spec.names.model_dump(exclude_none=True))
    if source == "none":
        return NoSource(OPERATOR_HAS_NONE)
    if source == "pods":
        return PodsSource(defaults.window_s, names, spec.pods.port, spec.pods.path)
    url = spec.prometheus.url if spec.prometheus.url is not None else defaults.prometheus_url
    if url is None:
        chosen = "spec.autoscaling.metrics.source" if spec.source is not None else "the operator's --metrics-source"
        return NoSource(PROMETHEUS_WITHOUT_URL.format(chosen=chosen))
    return PrometheusSource(url, defaults.window_s, names, _pairs(spec.prometheus.queries.model_dump(exclude_none=True)))


def _implied(spec: MetricsSpec) -> SourceName | None:
    """The source a group without `source` points at: the one side it says where to read."""
    prometheus = spec.prometheus.url is not None
    pods = bool(spec.pods.model_fields_set & {"port", "path"})
    if prometheus == pods:
        return None
    return "prometheus" if prometheus else "pods"


def _pairs(mapping: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(mapping.items()))
