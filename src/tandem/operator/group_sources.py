"""Each autoscaled group's metrics source in the operator: chosen from the group's
`spec.autoscaling.metrics` over the operator's flags (`choose_source`, pure), built once per
distinct configuration and kept across passes.

    sources = GroupSources(SourceDefaults("pods"), cluster.snapshot)
    autoscale(cluster, now, None, sources=sources)       # sources(group) -> Metrics | NoSource

Groups configured alike share one source (one HTTP client setting, one scrape history
keyed by group). A group that changes its configuration, or is gone, has its history
dropped from the source it leaves, and a source no group uses any more is let go: the
sources held are those of the groups' current configurations, never one per pass.
"""

from __future__ import annotations

from typing import Callable

from tandem.api.resources import InferenceGroup
from tandem.autoscaling.metrics_source import NoSource, PodsSource, PrometheusSource, SourceConfig, SourceDefaults, choose_source
from tandem.cluster.ports import Reader
from tandem.controller import Metrics
from tandem.operator.pod_metrics import PodMetrics
from tandem.operator.prometheus_metrics import PrometheusMetrics

Built = PodsSource | PrometheusSource
Build = Callable[[Built, Callable[[], Reader]], Metrics]


def build_source(config: Built, snapshot: Callable[[], Reader]) -> Metrics:
    """The source a configuration describes, over the operator's cluster snapshot."""
    if isinstance(config, PodsSource):
        return PodMetrics(snapshot, window_s=config.window_s, renames=dict(config.names), port=config.port, path=config.path)
    return PrometheusMetrics(config.url, snapshot, window_s=config.window_s, renames=dict(config.names), overrides=dict(config.queries))


class GroupSources:
    """`Sources` for the autoscaler's pass: a group in, its metrics source (or why it has none) out."""

    def __init__(self, defaults: SourceDefaults, snapshot: Callable[[], Reader], build: Build = build_source):
        self.defaults = defaults
        self._snapshot = snapshot
        self._build = build
        self._built: dict[Built, Metrics] = {}
        self._chosen: dict[tuple[str, str], Built] = {}  # each group's configuration, as last asked

    def __call__(self, group: InferenceGroup) -> Metrics | NoSource:
        spec = group.spec.autoscaling
        config: SourceConfig = choose_source(spec.metrics if spec is not None else None, self.defaults)
        key = (group.metadata.namespace, group.metadata.name)
        if self._chosen.get(key) != config:
            self.forget(*key)
        if isinstance(config, NoSource):
            return config
        source = self._built.get(config)
        if source is None:
            try:
                source = self._build(config, self._snapshot)
            except ValueError as exc:  # a URL the schema let through that the client cannot use
                return NoSource(f"spec.autoscaling.metrics.prometheus.url: {exc}")
            self._built[config] = source
        self._chosen[key] = config
        return source

    def forget(self, namespace: str, name: str) -> None:
        """The group is gone, or configured otherwise: its history goes from the source it
        used, and the source goes when no other group uses it."""
        config = self._chosen.pop((namespace, name), None)
        if config is None:
            return
        source = self._built.get(config)
        drop = getattr(source, "forget", None)
        if drop is not None:
            drop(namespace, name)
        if config not in self._chosen.values():
            self._built.pop(config, None)

    @property
    def built(self) -> int:
        """How many sources are held (one per distinct configuration in use)."""
        return len(self._built)
