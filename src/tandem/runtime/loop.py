"""The loop both processes turn: a tick when something is due, then a wait until the next
pass or Lease renewal is due or an informer reports a change; on the way out the Lease is
given up, so a standby takes over at once. `PassLoop` is that tick, the same in both
processes but for the pass each runs and what it records of it. And how a lasting election
failure is said: at once when it is new, then at most once a minute while it lasts."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Generic, Protocol, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge

from tandem.cluster.ports import Cluster
from tandem.runtime.informer_metrics import follow_informers
from tandem.runtime.leader import LeaderElector
from tandem.runtime.schedule import PassSchedule

ELECTION_LOG_EVERY_S = 60.0  # a lasting leader-election failure is logged again this often


def run_loop(tick: Callable[[float], object], schedule: PassSchedule, elector: LeaderElector | None, wake: threading.Event,
             stop: threading.Event, clock: Callable[[], float], log: logging.Logger, stopping: Callable[[], None] | None = None) -> None:
    """Loop until `stop` is set; then call `stopping` (a loop beside this one ends its
    writes) and give the Lease up."""
    while not stop.is_set():
        now = clock()
        try:
            tick(now)
        except Exception:  # a bug in one pass must not kill the process; the next pass retries
            log.exception("pass failed")
            # after the back-off, as a pass with failed writes: the schedule never heard of
            # this one, and would have it due again at once, a hundred times a second
            schedule.ran(now, None, retry=True)
        wake.clear()
        wait = schedule.next_due(clock()) - clock()
        if elector is not None:
            wait = min(wait, elector.config.renew_every)
        wake.wait(timeout=min(max(wait, 0.01), 1.0))
        if stop.is_set():
            break
    if stopping is not None:
        stopping()
    if elector is not None:
        elector.release(clock())


@dataclass
class ElectionLog:
    """Counts each failed election attempt and logs it without flooding."""

    errors: Counter  # labelled by `code`
    log: logging.Logger
    _failing: tuple[tuple[int, str], float] | None = None  # the failure last logged, and when

    def note(self, elector: LeaderElector, now: float) -> None:
        failure = elector.failure
        if failure is None:
            if self._failing is not None:
                self.log.info("leader election: the Lease can be read and written again")
            self._failing = None
            return
        self.errors.labels(code=str(failure.code)).inc()
        said = (failure.code, failure.message)
        if self._failing is not None and self._failing[0] == said and now - self._failing[1] < ELECTION_LOG_EVERY_S:
            return
        self._failing = (said, now)
        where = f"{elector.config.namespace}/{elector.config.name}"
        self.log.warning(
            "leader election: cannot use the Lease %s (%d %s: %s); this process cannot lead until that is fixed",
            where, failure.code, failure.reason, failure.message, extra={"lease": where, "code": failure.code},
        )


class PassOutcome(Protocol):
    """What the loop needs of a pass's report: when to run again."""

    @property
    def requeue_after(self) -> float | None: ...

    @property
    def retryable(self) -> object: ...  # truthy: some writes failed and may succeed later


class LoopMetrics(Protocol):
    """The series the loop itself keeps (each process names them its own way)."""

    @property
    def registry(self) -> CollectorRegistry: ...

    @property
    def leader(self) -> Gauge: ...

    @property
    def election_errors(self) -> Counter: ...

    @property
    def last_pass(self) -> Gauge: ...


Report = TypeVar("Report", bound=PassOutcome)


class PassLoop(Generic[Report]):
    """Elect, then run a pass when one is due; a follower keeps its informers warm and its
    elector polling, and writes nothing. A process's runner is a dataclass with the fields
    below and says only how to run its pass (`_pass`), what to count of it (`_observe`) and
    how to log it (`_log`). `tick(now)` is the loop body, time passed in, so tests drive it
    with any time they like."""

    cluster: Cluster
    clock: Callable[[], float]
    elector: LeaderElector | None  # None: no election, this process always leads
    schedule: PassSchedule
    metrics: LoopMetrics
    on_synced: Callable[[], None] | None  # once, the first time the informers have synced
    log: ClassVar[logging.Logger]
    passes: int
    last_tick: float | None
    leading: bool

    def __post_init__(self) -> None:
        self.passes, self.last_tick, self.leading = 0, None, False
        self._synced_once = False
        self._wake = threading.Event()
        self._election_log = ElectionLog(self.metrics.election_errors, self.log)
        follow_informers(self.metrics.registry, self.cluster)  # lag and disconnection, when the cluster has informers

    def _pass(self, now: float) -> Report:
        raise NotImplementedError

    def _observe(self, report: Report, elapsed: float) -> None:
        raise NotImplementedError

    def _log(self, report: Report, elapsed: float) -> None:
        raise NotImplementedError

    def changed(self, *_: Any) -> None:
        """An informer saw a change (any kind): a pass becomes due once the schedule's
        debounce (the batching window) closes."""
        self.schedule.changed(self.clock())
        self._wake.set()

    def ready(self) -> bool:
        synced = getattr(self.cluster, "has_synced", None)
        return synced() if synced is not None else True

    def tick(self, now: float) -> Report | None:
        """One turn of the loop; the pass's report if one ran."""
        self.last_tick = now
        was_leading = self.leading
        self.leading = self.elector.step(now) if self.elector is not None else True
        self.metrics.leader.set(1 if self.leading else 0)
        if self.elector is not None:
            self._election_log.note(self.elector, now)
        if self.leading != was_leading:
            self.log.info("leadership %s", "acquired" if self.leading else "lost", extra={"leading": self.leading})
            if self.leading:
                self.schedule.changed(now)  # a new leader looks at everything at once
        ready = self.ready()
        if ready and not self._synced_once:
            self._synced_once = True
            if self.on_synced is not None:
                self.on_synced()
        if not self.leading or not ready or not self.schedule.due(now):
            return None
        report = self._pass(now)
        self.schedule.ran(now, report.requeue_after, retry=bool(report.retryable))
        self.passes += 1
        elapsed = max(self.clock() - now, 0.0)
        self._observe(report, elapsed)
        self.metrics.last_pass.set(self.clock())
        self._log(report, elapsed)
        return report

    def run(self, stop: threading.Event) -> None:
        """Loop until `stop` is set; then give the Lease up."""
        run_loop(self.tick, self.schedule, self.elector, self._wake, stop, self.clock, self.log, self._stopping)

    def _stopping(self) -> None:
        """Before the Lease is given up: a process with a loop beside this one waits for it here."""

    def stop_waiting(self) -> None:
        self._wake.set()
