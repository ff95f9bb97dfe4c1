"""The topology controller's loop: elect, then run a topology pass when one is due.

    while not stopped:
        leading = elector.step(now)
        if leading and informers synced and schedule.due(now):
            report = reconcile(cluster, now, settings)    # every ClusterTopology, once
            schedule.ran(now, report.requeue_after, retry=report.retryable)
        wait until the next pass or renewal is due, or an informer reports a change

Event-driven and batched: an informer's change makes a pass due `batch_window` seconds
after the first change not yet seen by a pass, so a rack of nodes joining (a burst of
Node events) is one pass; a pass whose writes failed retryably (409, 429, 5xx) makes
another due after a doubling back-off; every `resync` seconds one runs anyway. The same
schedule and loop as the operator's (runtime/), another pass. `tick(now)` is the loop
body, time passed in, so tests drive it with any time they like.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from tandem.cluster.ports import Cluster
from tandem.runtime.informer_metrics import follow_informers
from tandem.runtime.leader import LeaderElector
from tandem.runtime.loop import ElectionLog, run_loop
from tandem.runtime.schedule import PassSchedule
from tandem.topology_controller.metrics import TopologyMetrics
from tandem.topology_controller.reconcile import TopologyMemo, TopologyPassReport, TopologySettings, reconcile

log = logging.getLogger("tandem.topology")
BATCH_WINDOW_S = 0.2


@dataclass
class TopologyController:
    cluster: Cluster
    clock: Callable[[], float]
    settings: TopologySettings = field(default_factory=TopologySettings)
    elector: LeaderElector | None = None  # None: no election, this process always leads
    schedule: PassSchedule = field(default_factory=lambda: PassSchedule(debounce=BATCH_WINDOW_S))
    metrics: TopologyMetrics = field(default_factory=TopologyMetrics)
    memo: TopologyMemo = field(default_factory=TopologyMemo)  # parsed topologies and rendered objects, across passes
    on_synced: Callable[[], None] | None = None  # once, the first time the informers have synced
    passes: int = 0
    last_tick: float | None = None
    leading: bool = False
    _synced_once: bool = False
    _wake: threading.Event = field(default_factory=threading.Event)
    _election_log: ElectionLog = field(init=False)

    def __post_init__(self) -> None:
        self._election_log = ElectionLog(self.metrics.election_errors, log)
        follow_informers(self.metrics.registry, self.cluster)

    def changed(self, *_: Any) -> None:
        """An informer saw a change: a pass becomes due once the batching window closes."""
        self.schedule.changed(self.clock())
        self._wake.set()

    def ready(self) -> bool:
        synced = getattr(self.cluster, "has_synced", None)
        return synced() if synced is not None else True

    def tick(self, now: float) -> TopologyPassReport | None:
        """One turn of the loop; the pass's report if one ran."""
        self.last_tick = now
        was_leading = self.leading
        self.leading = self.elector.step(now) if self.elector is not None else True
        self.metrics.leader.set(1 if self.leading else 0)
        if self.elector is not None:
            self._election_log.note(self.elector, now)
        if self.leading != was_leading:
            log.info("leadership %s", "acquired" if self.leading else "lost", extra={"leading": self.leading})
            if self.leading:
                self.schedule.changed(now)  # a new leader looks at everything at once
        ready = self.ready()
        if ready and not self._synced_once:
            self._synced_once = True
            if self.on_synced is not None:
                self.on_synced()
        if not self.leading or not ready or not self.schedule.due(now):
            return None
        report = reconcile(self.cluster, now, self.settings, self.memo)
        self.schedule.ran(now, report.requeue_after, retry=bool(report.retryable))
        self.passes += 1
        elapsed = max(self.clock() - now, 0.0)
        self.metrics.observe_pass(report, elapsed)
        self.metrics.observe_cluster(self.cluster.snapshot(), report.nodes)
        self.metrics.last_pass.set(self.clock())
        self._log(report, elapsed)
        return report

    @staticmethod
    def _log(report: TopologyPassReport, elapsed: float) -> None:
        """The pass's figures (at DEBUG when it wrote nothing and nothing failed), then a
        line per event it recorded and per failed write (a warning)."""
        figures = {"seconds": round(elapsed, 4), "topologies": report.topologies, "writes": report.writes, "failures": report.failures,
                   "requeue_after": report.requeue_after}
        log.log(logging.INFO if report.writes or report.failures else logging.DEBUG, "pass", extra=figures)
        for error in report.errors:
            log.warning("%s", error)
        failed = {str(error) for error in report.errors}
        for line in report.events:
            if line not in failed:
                log.info("%s", line)

    def run(self, stop: threading.Event) -> None:
        """Loop until `stop` is set; then give the Lease up."""
        run_loop(self.tick, self.schedule, self.elector, self._wake, stop, self.clock, log)

    def stop_waiting(self) -> None:
        self._wake.set()
