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
from dataclasses import dataclass, field
from typing import Callable

from tandem.cluster.ports import Cluster
from tandem.runtime.leader import LeaderElector
from tandem.runtime.loop import PassLoop
from tandem.runtime.schedule import PassSchedule
from tandem.topology_controller.metrics import TopologyMetrics
from tandem.topology_controller.reconcile import TopologyMemo, TopologyPassReport, TopologySettings, reconcile

log = logging.getLogger("tandem.topology")
BATCH_WINDOW_S = 0.2
WARNED_PER_PASS = 20  # failed writes a pass logs as warnings; the rest are counted, each at DEBUG


@dataclass
class TopologyController(PassLoop[TopologyPassReport]):
    """The topology pass in the shared loop (runtime/loop.py)."""

    cluster: Cluster
    clock: Callable[[], float]
    settings: TopologySettings = field(default_factory=TopologySettings)
    elector: LeaderElector | None = None  # None: no election, this process always leads
    schedule: PassSchedule = field(default_factory=lambda: PassSchedule(debounce=BATCH_WINDOW_S))
    metrics: TopologyMetrics = field(default_factory=TopologyMetrics)
    memo: TopologyMemo = field(default_factory=TopologyMemo)  # parsed topologies and rendered objects, across passes
    on_synced: Callable[[], None] | None = None  # once, the first time the informers have synced
    log = log

    def _pass(self, now: float) -> TopologyPassReport:
        return reconcile(self.cluster, now, self.settings, self.memo)

    def _observe(self, report: TopologyPassReport, elapsed: float) -> None:
        self.metrics.observe_pass(report, elapsed)
        self.metrics.observe_cluster(report)

    def _log(self, report: TopologyPassReport, elapsed: float) -> None:
        """The pass's figures (at DEBUG when it wrote nothing and nothing new failed), then a
        line per event it recorded and per failed write (a warning; a refusal told before,
        at DEBUG: a write refused for good is logged once, not every pass)."""
        figures = {"seconds": round(elapsed, 4), "topologies": report.topologies, "writes": report.writes, "failures": report.failures,
                   "held": report.held, "skipped": report.skipped, "events_dropped": report.events_dropped, "requeue_after": report.requeue_after}
        fresh = report.fresh_errors
        log.log(logging.INFO if report.writes or fresh else logging.DEBUG, "pass", extra=figures)
        for error in fresh[:WARNED_PER_PASS]:
            log.warning("%s", error, exc_info=error.cause)
        if len(fresh) > WARNED_PER_PASS:  # RBAC missing for a kind at 65,536 nodes: thousands at once
            log.warning("and %d more failed writes in this pass (each topology's status says which)", len(fresh) - WARNED_PER_PASS)
        for error in fresh[WARNED_PER_PASS:]:
            log.debug("%s", error)
        for error in report.known:
            log.debug("%s (refused again, told before)", error)
        failed = {str(error) for error in report.errors}
        for line in report.events:
            if line not in failed:
                log.info("%s", line)
