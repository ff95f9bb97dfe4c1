"""The autoscaler's pass as a loop of the operator, beside the reconcile loop.

    while not stopped:
        if may_write(now) and schedule.due(now):         # the Lease holder, informers synced
            report = autoscale(cluster, now, source, sources=sources)  # the same pass the simulator runs
            schedule.ran(now, report.requeue_after, retry=report.retryable)
        wait until the next group is due, or a group changes

Each group decides on its own `spec.autoscaling.intervalSeconds` (the pass says when the
next one is due); a new or edited group is looked at within a second. It runs in a thread
of its own so that reading signals (a scrape of every pod, a query) never holds up a
reconcile pass, and only while the reconcile loop's elector holds the Lease: it never
touches the Lease itself. `sources` picks each group's metrics source (its
`spec.autoscaling.metrics` over the operator's flags: `group_sources.GroupSources`);
without it `source` reads every group. A group left without one (`--metrics-source none`
and nothing in the group, or Prometheus with no server named) still runs the pass: it gets
`ScalingActive=False NoMetricsSource` saying what to set, so the operator never ignores
`spec.autoscaling` in silence. `tick(now)` is the loop body, the
time passed in, so tests drive it with any time they like.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Callable

from tandem.cluster.ports import Cluster
from tandem.controller import AutoscaleReport, Metrics, Sources, autoscale
from tandem.operator.autoscaler_metrics import AutoscalerMetrics
from tandem.runtime.loop import run_loop
from tandem.runtime.schedule import PassSchedule

log = logging.getLogger("tandem.operator.autoscaler")


def autoscaler_schedule() -> PassSchedule:
    """A change looked at after 50 ms, passes at least 1 s apart (a busy cluster's changes
    cost one listing of the groups a second), and a pass every minute anyway."""
    return PassSchedule(debounce=0.05, min_interval=1.0, resync=60.0)


@dataclass
class AutoscalerLoop:
    cluster: Cluster
    clock: Callable[[], float]
    source: Metrics | None  # None: no metrics source, the groups' condition says so
    may_write: Callable[[float], bool]  # whether this process holds the Lease and its informers synced, at a time
    metrics: AutoscalerMetrics
    schedule: PassSchedule = field(default_factory=autoscaler_schedule)
    sources: Sources | None = None  # each group's source (wins over `source`)
    log = log

    def __post_init__(self) -> None:
        self.passes = 0
        self._wake = threading.Event()
        self._groups: set[tuple[str, str]] = set()  # the autoscaled groups the last pass listed

    def changed(self) -> None:
        """A group was added or changed: a pass becomes due (it decides only for groups due)."""
        self.schedule.changed(self.clock())
        self._wake.set()

    def tick(self, now: float) -> AutoscaleReport | None:
        """One turn of the loop; the pass's report if one ran."""
        if not self.may_write(now) or not self.schedule.due(now):
            return None
        report = autoscale(self.cluster, now, self.source, sources=self.sources)
        self.schedule.ran(now, report.requeue_after, retry=report.retryable)
        self.passes += 1
        self._forget_gone(report)
        ended = self.clock()
        self.metrics.observe(report, max(ended - now, 0.0), ended)
        self._log(report)
        return report

    def _forget_gone(self, report: AutoscaleReport) -> None:
        """A source that keeps a history per group (PodMetrics' scrapes) drops the history of
        a group deleted or no longer autoscaled: nothing else would ask for it again."""
        listed = set(report.groups)
        for holder in (self.source, self.sources):
            forget = getattr(holder, "forget", None)
            if forget is not None:
                for namespace, name in sorted(self._groups - listed):
                    forget(namespace, name)
        self._groups = listed

    def _log(self, report: AutoscaleReport) -> None:
        """A line per change and per condition turned (Warning events at WARNING); a pass that
        changed nothing says so at DEBUG only."""
        warnings = set(report.warnings)
        for line in report.events:
            (self.log.warning if line in warnings else self.log.info)(line)
        figures = {"decided": len(report.decided), "changed": len(report.changes), "conflicts": report.conflicts,
                   "requeue_after": None if report.requeue_after is None else round(report.requeue_after, 3)}
        self.log.log(logging.INFO if report.changes else logging.DEBUG, "autoscaler pass", extra=figures)

    def run(self, stop: threading.Event) -> None:
        """Loop until `stop` is set (the Lease is the reconcile loop's to give up)."""
        run_loop(self.tick, self.schedule, None, self._wake, stop, self.clock, self.log)

    def stop_waiting(self) -> None:
        self._wake.set()
