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
so tests drive it with any time they like. Beside it, in a thread of its own, the
autoscaler's loop (`autoscaler_loop.py`) decides the counts of the groups with
`spec.autoscaling`, while this loop's elector holds the Lease; it ends before the Lease
is given up.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from tandem.cluster.ports import Cluster
from tandem.controller import DelegationSettings, Memo, Metrics, PassReport, ProvisioningSettings, Sources, reconcile
from tandem.operator.autoscaler_loop import AutoscalerLoop
from tandem.operator.metrics import OperatorMetrics
from tandem.placement import place
from tandem.runtime.leader import LeaderElector
from tandem.runtime.logs import IN_MESSAGE
from tandem.runtime.loop import PassLoop
from tandem.runtime.schedule import PassSchedule

log = logging.getLogger("tandem.operator")


class Watched(Cluster, Protocol):
    """A cluster whose informers can tell the operator about changes."""

    def has_synced(self) -> bool: ...


@dataclass
class Operator(PassLoop[PassReport]):
    """The group controller's pass in the shared loop (runtime/loop.py)."""

    cluster: Cluster
    clock: Callable[[], float]
    elector: LeaderElector | None = None  # None: no election, this process always leads
    schedule: PassSchedule = field(default_factory=PassSchedule)
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)
    memo: Memo = field(default_factory=Memo)  # validated models by resourceVersion, across passes
    # Called once, the first time the informers have synced: the process freezes the heap
    # it has built (the caches) out of the garbage collector's reach (see process.py).
    on_synced: Callable[[], None] | None = None
    provisioning: ProvisioningSettings = field(default_factory=ProvisioningSettings)  # off unless asked
    delegation: DelegationSettings = field(default_factory=DelegationSettings)  # no scheduler but tandem's unless asked
    # Where the autoscaler reads each group's signals; None: nowhere, and the autoscaled
    # groups' ScalingActive condition says so.
    metrics_source: Metrics | None = None
    # Each group's source instead (the process's: `group_sources.GroupSources`, the group's
    # spec.autoscaling.metrics over the flags); None: `metrics_source` for every group.
    group_sources: Sources | None = None
    log = log

    def __post_init__(self) -> None:
        super().__post_init__()
        self.autoscaler = AutoscalerLoop(self.cluster, self.clock, self.metrics_source, self.may_write, self.metrics.autoscaler,
                                         sources=self.group_sources)
        self._autoscaler_thread: threading.Thread | None = None

    def may_write(self, now: float) -> bool:
        """What a loop beside this one asks before it writes: this process leads (its Lease
        renewed within the deadline, as of `now`) and its informers have synced."""
        holds = self.elector.holds(now) if self.elector is not None else True
        return self.leading and holds and self.ready()

    def changed(self, *args: object) -> None:
        super().changed(*args)
        if not args or args[0] == "InferenceGroup":  # a group added or edited may be due a decision
            self.autoscaler.changed()

    def run(self, stop: threading.Event) -> None:
        """The reconcile loop here, the autoscaler's in a thread of its own; both until `stop`."""
        self._autoscaler_thread = threading.Thread(target=self.autoscaler.run, args=(stop,), name="autoscaler", daemon=True)
        self._autoscaler_thread.start()
        super().run(stop)

    def _stopping(self) -> None:
        """The autoscaler's pass under way finishes before the Lease is given up."""
        thread = self._autoscaler_thread
        if thread is None:
            return
        self.autoscaler.stop_waiting()
        thread.join(timeout=30.0)
        if thread.is_alive():
            log.warning("the autoscaler's pass did not end within 30 s; giving the Lease up anyway")

    def stop_waiting(self) -> None:
        super().stop_waiting()
        self.autoscaler.stop_waiting()

    def _pass(self, now: float) -> PassReport:
        return reconcile(self.cluster, now, self._timed_place, self.memo, self.provisioning, self.delegation)

    def _observe(self, report: PassReport, elapsed: float) -> None:
        self.metrics.observe_pass(report, elapsed)
        snapshot = self.cluster.snapshot()
        self.metrics.observe_cluster(snapshot)
        self.metrics.observe_groups(snapshot)
        if self.delegation.backends:
            served = self.cluster.served(self.delegation.kinds)
            self.metrics.observe_backends({b: all(k in served for k in self.delegation.backend_kinds(b)) for b in self.delegation.backends})

    def _log(self, report: PassReport, elapsed: float) -> None:
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

    def _timed_place(self, *args: Any, **kwargs: Any) -> Any:
        start = self.clock()
        plan = place(*args, **kwargs)
        self.metrics.placement.observe(max(self.clock() - start, 0.0))
        return plan
