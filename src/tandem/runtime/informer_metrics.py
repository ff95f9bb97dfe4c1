"""How far behind the API server the operator's informers are, as lag and not as silence.

- `tandem_informer_event_delay_seconds{kind}` (histogram): for each watch event whose
  object says when the server made the change (a real API server stamps
  `managedFields[].time` on every write; an ADDED object has its `creationTimestamp`),
  the time from then to the event reaching the informer. Server times are whole seconds,
  so a delay reads up to a second long, plus any skew between the clocks.
- `tandem_informer_disconnected_seconds{kind}` (gauge, read at scrape): seconds since the
  kind's informer last had a watch open; 0 while one is, however quiet the cluster.

The old gauge, seconds since an informer last heard anything, grew in a quiet cluster
until the next bookmark and so said nothing about lag; it is gone.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

DELAY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0, 300.0)


class _Disconnected(Collector):
    def __init__(self, read: Callable[[], Mapping[str, float]]):
        self.read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("tandem_informer_disconnected_seconds",
                                   "Seconds since the kind's informer last had a watch open (0 while one is).", labels=["kind"])
        for kind, seconds in sorted(self.read().items()):
            family.add_metric([kind], seconds)
        yield family


def follow_informers(registry: CollectorRegistry, cluster: Any) -> Histogram | None:
    """Export the informers' delay and disconnection, when `cluster` has informers
    (`KubeCluster`: `follow_delays`, `disconnected`); the delay histogram, or None."""
    follow, disconnected = getattr(cluster, "follow_delays", None), getattr(cluster, "disconnected", None)
    if follow is None or disconnected is None:
        return None
    delay = Histogram("tandem_informer_event_delay_seconds", "From the server's change (its timestamp on the object) to the watch event here.",
                      ["kind"], buckets=DELAY_BUCKETS, registry=registry)
    follow(lambda kind, seconds: delay.labels(kind=kind).observe(seconds))
    registry.register(_Disconnected(disconnected))
    return delay
