"""The topology controller's Prometheus metrics, in a registry of its own.

| metric | type | labels |
|---|---|---|
| tandem_topology_passes_total | counter | |
| tandem_topology_pass_duration_seconds | histogram | |
| tandem_topology_writes_total | counter | backend (volcano, kai, kueue, koordinator; tandem for the ClusterTopology), kind, verb (events are not counted) |
| tandem_topology_write_failures_total | counter | |
| tandem_topology_topologies | gauge | (ClusterTopologies seen by the last pass) |
| tandem_topology_nodes | gauge | (nodes seen by the last pass) |
| tandem_topology_unlabeled_nodes | gauge | topology (nodes lacking one of its levels' labels, as its status counts them) |
| tandem_topology_leader | gauge | (1 when this process holds its Lease) |
| tandem_topology_leader_election_errors_total | counter | code |
| tandem_topology_last_successful_pass_timestamp_seconds | gauge | |
| tandem_topology_webhook_requests_total | counter | verdict (allowed, denied, malformed, error) |
| tandem_topology_webhook_review_seconds | histogram | |
| tandem_informer_event_delay_seconds, tandem_informer_disconnected_seconds | | kind, as the operator's (runtime/informer_metrics.py) |
| process_*, python_* | | the standard collectors |

Names differ from the operator's (`tandem_topology_` prefix) so a Prometheus scraping
both processes never mixes their series.
"""

from __future__ import annotations

from typing import Iterable, Protocol

from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR, CollectorRegistry, Gauge, Histogram
from prometheus_client import Counter as PromCounter
from prometheus_client.exposition import generate_latest

from tandem.topology_controller.kinds import BACKEND_KINDS

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
OWN = "tandem"  # the backend label of what is tandem's own: the ClusterTopology's status, events


class PassFigures(Protocol):
    """What a metric needs of a pass's report."""

    @property
    def writes(self) -> int: ...

    @property
    def failures(self) -> int: ...

    @property
    def by_kind(self) -> Iterable[tuple[tuple[str, str], int]]: ...  # successful writes: ((verb, kind), count)

    @property
    def topologies(self) -> int: ...

    @property
    def nodes(self) -> int: ...

    @property
    def unlabeled(self) -> Iterable[tuple[str, int]]: ...  # (topology, nodes lacking one of its level labels)


def backend_of(kind: str) -> str:
    """The backend a kind belongs to (`tandem` for ClusterTopology, Event and anything else)."""
    for backend, kinds in sorted(BACKEND_KINDS.items()):
        if any(k.key == kind for k in kinds):
            return backend
    return OWN


class TopologyMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.passes = PromCounter("tandem_topology_passes", "Topology passes run.", registry=r)
        self.pass_duration = Histogram("tandem_topology_pass_duration_seconds", "Duration of one topology pass.", buckets=_LATENCY_BUCKETS, registry=r)
        self.writes = PromCounter("tandem_topology_writes", "Successful writes, by backend, kind and verb.", ["backend", "kind", "verb"], registry=r)
        self.failures = PromCounter("tandem_topology_write_failures", "Writes that failed (each object's failure counted once per pass).", registry=r)
        self.topologies = Gauge("tandem_topology_topologies", "ClusterTopologies seen by the last pass.", registry=r)
        self.nodes = Gauge("tandem_topology_nodes", "Nodes seen by the last pass.", registry=r)
        self.unlabeled = Gauge("tandem_topology_unlabeled_nodes", "Nodes lacking one of the topology's level labels (its status.unlabeledNodes).",
                               ["topology"], registry=r)
        self.leader = Gauge("tandem_topology_leader", "1 when this process holds its Lease.", registry=r)
        self.election_errors = PromCounter("tandem_topology_leader_election_errors",
                                           "Leader-election attempts the API refused or could not answer, by HTTP code.", ["code"], registry=r)
        self.last_pass = Gauge("tandem_topology_last_successful_pass_timestamp_seconds", "When the last topology pass ran to its end (Unix seconds).",
                               registry=r)
        self.webhook_requests = PromCounter("tandem_topology_webhook_requests", "ClusterTopology admission reviews answered, by verdict.",
                                            ["verdict"], registry=r)
        self.webhook_seconds = Histogram("tandem_topology_webhook_review_seconds", "Time to review one AdmissionReview.", buckets=_LATENCY_BUCKETS,
                                         registry=r)
        self._unlabeled_series: set[str] = set()
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            r.register(collector)

    def observe_pass(self, report: PassFigures, seconds: float) -> None:
        self.passes.inc()
        self.pass_duration.observe(seconds)
        for (verb, kind), count in sorted(report.by_kind):
            self.writes.labels(backend=backend_of(kind), kind=kind, verb=verb).inc(count)
        if report.failures:
            self.failures.inc(report.failures)

    def observe_cluster(self, report: PassFigures) -> None:
        """Topologies, nodes and each topology's unlabeled nodes, as the pass counted them
        (reading the cluster again would cost more than the pass); a topology that is gone
        loses its series."""
        self.topologies.set(report.topologies)
        self.nodes.set(report.nodes)
        present = set()
        for name, unlabeled in report.unlabeled:
            present.add(name)
            self.unlabeled.labels(topology=name).set(unlabeled)
        for gone in sorted(self._unlabeled_series - present):
            self.unlabeled.remove(gone)
        self._unlabeled_series = present

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
