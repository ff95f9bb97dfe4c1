"""The loop both processes turn: a tick when something is due, then a wait until the next
pass or Lease renewal is due or an informer reports a change; on the way out the Lease is
given up, so a standby takes over at once. And how a lasting election failure is said:
at once when it is new, then at most once a minute while it lasts."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable

from prometheus_client import Counter

from tandem.runtime.leader import LeaderElector
from tandem.runtime.schedule import PassSchedule

ELECTION_LOG_EVERY_S = 60.0  # a lasting leader-election failure is logged again this often


def run_loop(tick: Callable[[float], object], schedule: PassSchedule, elector: LeaderElector | None, wake: threading.Event,
             stop: threading.Event, clock: Callable[[], float], log: logging.Logger) -> None:
    """Loop until `stop` is set; then give the Lease up."""
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
