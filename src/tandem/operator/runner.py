"""The operator's loop: elect, then run passes when they are due, and nothing else.

    while not stopped:
        leading = elector.step(now)            # every loop turn; renews every few seconds
        if leading and schedule.due(now):
            report = reconcile(cluster, now)   # the same pass the simulator runs
            schedule.ran(now, report.requeue_after, retry=bool(report.retryable))
        wait until the next pass or renewal is due, or an informer reports a change

A follower keeps its informers warm and its elector polling, and writes nothing: when it
takes over, its first pass starts from the cluster as it is (the controller keeps no
memory of its own). Time comes from the injected `clock`; `tick(now)` is the loop body,
so tests drive it with any time they like.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from tandem.cluster.ports import Cluster
from tandem.controller import Memo, PassReport, ProvisioningSettings, reconcile
from tandem.operator.metrics import OperatorMetrics
from tandem.placement import place
from tandem.runtime.informer_metrics import follow_informers
from tandem.runtime.leader import LeaderElector
from tandem.runtime.logs import IN_MESSAGE
from tandem.runtime.loop import ElectionLog, run_loop
from tandem.runtime.schedule import PassSchedule

log = logging.getLogger("tandem.operator")


class Watched(Cluster, Protocol):
    """A cluster whose informers can tell the operator about changes."""

    def has_synced(self) -> bool: ...


@dataclass
class Operator:
    cluster: Cluster
    clock: Callable[[], float]
    elector: LeaderElector | None = None  # None: no election, this process always leads
    schedule: PassSchedule = field(default_factory=PassSchedule)
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)
    memo: Memo = field(default_factory=Memo)  # validated models by resourceVersion, across passes
    passes: int = 0
    last_tick: float | None = None
    leading: bool = False
    # Called once, the first time the informers have synced: the process freezes the heap
    # it has built (the caches) out of the garbage collector's reach (see process.py).
    on_synced: Callable[[], None] | None = None
    provisioning: ProvisioningSettings = field(default_factory=ProvisioningSettings)  # off unless asked
    _synced_once: bool = False
    _wake: threading.Event = field(default_factory=threading.Event)
    _election_log: ElectionLog = field(init=False)

    def __post_init__(self) -> None:
        self._election_log = ElectionLog(self.metrics.election_errors, log)
        follow_informers(self.metrics.registry, self.cluster)  # lag and disconnection, when the cluster has informers

    def changed(self, *_: Any) -> None:
        """An informer saw a change (any kind): a pass becomes due shortly."""
        self.schedule.changed(self.clock())
        self._wake.set()

    def ready(self) -> bool:
        synced = getattr(self.cluster, "has_synced", None)
        return synced() if synced is not None else True

    def tick(self, now: float) -> PassReport | None:
        """One turn of the loop; returns the pass's report if one ran."""
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
        report = reconcile(self.cluster, now, self._timed_place, self.memo, self.provisioning)
        self.schedule.ran(now, report.requeue_after, retry=bool(report.retryable))
        self.passes += 1
        elapsed = max(self.clock() - now, 0.0)
        self.metrics.observe_pass(report, elapsed)
        snapshot = self.cluster.snapshot()
        self.metrics.observe_cluster(snapshot)
        self.metrics.observe_groups(snapshot)
        self.metrics.last_pass.set(self.clock())
        self._log(report, elapsed)
        return report

    @staticmethod
    def _log(report: PassReport, elapsed: float) -> None:
        """A line per decision that changed something (a replica created and placed, peers
        updated, a condition turned), then the pass's figures; a pass that wrote nothing
        says nothing at INFO, and bookkeeping (a status write that turned no condition)
        goes to DEBUG."""
        for change in report.changes:
            log.log(logging.DEBUG if change.quiet else logging.INFO, change.line, extra={**change.fields(), IN_MESSAGE: True})
        figures = {
            "seconds": round(elapsed, 4),
            "writes": report.writes,
            "placed": report.placed,
            "errors": [str(e) for e in report.fresh_errors],  # a refusal already reported is not logged again
            "requeue_after": None if report.requeue_after is None else round(report.requeue_after, 3),
        }
        log.log(logging.INFO if report.writes or report.fresh_errors else logging.DEBUG, "pass", extra=figures)
        warnings = set(report.warnings)  # Warning events and refused writes (each refusal once)
        for line in report.events:
            (log.warning if line in warnings else log.info)(line)

    def run(self, stop: threading.Event) -> None:
        """Loop until `stop` is set; then give the Lease up."""
        run_loop(self.tick, self.schedule, self.elector, self._wake, stop, self.clock, log)

    def stop_waiting(self) -> None:
        self._wake.set()

    def _timed_place(self, *args: Any, **kwargs: Any) -> Any:
        start = self.clock()
        plan = place(*args, **kwargs)
        self.metrics.placement.observe(max(self.clock() - start, 0.0))
        return plan
