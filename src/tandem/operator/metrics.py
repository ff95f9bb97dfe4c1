"""The operator's Prometheus metrics, in a registry of its own (no process-global state).

| metric | type | labels |
|---|---|---|
| tandem_pass_duration_seconds | histogram | |
| tandem_writes_total | counter | verb, kind |
| tandem_write_errors_total | counter | kind, code, retryable |
| tandem_conflicts_total | counter | kind |
| tandem_units | gauge | state (Progressing, Complete, Stalled) |
| tandem_gated_pods_waiting | gauge | |
| tandem_placement_decision_seconds | histogram | |
| tandem_leader | gauge | (1 when this process leads) |
| tandem_leader_election_errors_total | counter | code (each election attempt the API refused, or could not answer) |
| tandem_informer_lag_seconds | gauge | kind |
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client import Counter as PromCounter
from prometheus_client.exposition import generate_latest

from tandem.api.naming import GATE, GROUP_LABEL
from tandem.api.naming import ADMITTED
from tandem.cluster.ports import Reader
from tandem.controller import PassReport

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.pass_duration = Histogram("tandem_pass_duration_seconds", "Duration of one reconcile pass.", buckets=_LATENCY_BUCKETS, registry=r)
        self.writes = PromCounter("tandem_writes", "Successful writes to the API, by verb and kind.", ["verb", "kind"], registry=r)
        self.write_errors = PromCounter("tandem_write_errors", "Failed writes, by kind, HTTP code and retryability.", ["kind", "code", "retryable"], registry=r)
        self.conflicts = PromCounter("tandem_conflicts", "Writes refused with 409, by kind.", ["kind"], registry=r)
        self.units = Gauge("tandem_units", "Units by coordination state.", ["state"], registry=r)
        self.gated = Gauge("tandem_gated_pods_waiting", "Admitted pods still behind tandem's scheduling gate.", registry=r)
        self.placement = Histogram(
            "tandem_placement_decision_seconds", "Time the placement engine took per pass that placed.", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.leader = Gauge("tandem_leader", "1 when this process holds the Lease.", registry=r)
        self.election_errors = PromCounter(
            "tandem_leader_election_errors", "Leader-election attempts the API refused or could not answer, by HTTP code.", ["code"], registry=r
        )
        self.informer_lag = Gauge("tandem_informer_lag_seconds", "Seconds since an informer last heard from the API.", ["kind"], registry=r)

    def observe_pass(self, report: PassReport, seconds: float) -> None:
        self.pass_duration.observe(seconds)
        for (verb, kind), count in report.by_kind.items():
            self.writes.labels(verb=verb, kind=kind).inc(count)
        for error in report.errors:
            kind = error.action.split(" ")[-2] if " " in error.action else "?"
            self.write_errors.labels(kind=kind, code=str(error.code), retryable=str(error.retryable).lower()).inc()
            if error.code == 409:
                self.conflicts.labels(kind=kind).inc()

    def observe_cluster(self, reader: Reader) -> None:
        """Units by state and gated pods, from what the pass will see next."""
        states: Counter[str] = Counter({"Progressing": 0, "Complete": 0, "Stalled": 0})
        for group in reader.list("InferenceGroup"):
            for unit in (group.get("status") or {}).get("units") or []:
                states[str(unit.get("state"))] += 1
        for state, count in states.items():
            self.units.labels(state=state).set(count)
        waiting = 0
        for pod in reader.list("Pod", labels=GROUP_LABEL):
            gated = any(g.get("name") == GATE for g in (pod.get("spec") or {}).get("schedulingGates", []))
            if gated and (pod["metadata"].get("annotations") or {}).get(ADMITTED) == "true":
                waiting += 1
        self.gated.set(waiting)

    def observe_lag(self, lag: Mapping[str, float]) -> None:
        for kind, seconds in lag.items():
            self.informer_lag.labels(kind=kind).set(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
