"""When the next pass runs: changes coalesced, a rate limit, requeue times, a resync.

A change seen by an informer makes a pass due `debounce` seconds later, so a burst of
events (a kubectl apply, a rack failing) costs one pass, not one each; passes start at
least `min_interval` apart; a pass's `requeue_after` makes one due then even if nothing
changes; a pass whose writes failed and may succeed later (409, 429, 5xx) makes one due
after `retry_base` seconds, doubling with each such pass in a row up to `retry_cap` (as
client-go's work queue rate-limits a failed key), since nothing else may change to wake
one; and every `resync` seconds one runs anyway, the safety net against a missed event.
Pure: every method takes the time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PassSchedule:
    debounce: float = 0.05
    min_interval: float = 0.1
    resync: float = 300.0
    retry_base: float = 0.5
    retry_cap: float = 60.0
    failures: int = 0  # passes in a row whose writes failed retryably
    changed_at: float | None = None  # the first change not yet seen by a pass
    latest_change: float | None = None
    requeue_at: float | None = None
    last_pass: float | None = None

    def changed(self, now: float) -> None:
        if self.changed_at is None:
            self.changed_at = now
        self.latest_change = now

    def next_due(self, now: float) -> float:
        """The time the next pass is due (may be in the past: due now)."""
        if self.last_pass is None:
            return now  # the first pass runs at once
        candidates = [self.last_pass + self.resync]
        if self.changed_at is not None:
            candidates.append(self.changed_at + self.debounce)
        if self.requeue_at is not None:
            candidates.append(self.requeue_at)
        return max(min(candidates), self.last_pass + self.min_interval)

    def due(self, now: float) -> bool:
        return self.next_due(now) <= now

    def ran(self, started: float, requeue_after: float | None, retry: bool = False) -> None:
        """A pass started at `started` saw every change up to then; one that came while it
        ran (a pass's own writes coming back from the watch, say) makes the next one due.
        `retry`: some of its writes failed and are worth trying again."""
        self.last_pass = started
        if self.changed_at is not None:
            later = self.latest_change is not None and self.latest_change > started
            self.changed_at = self.latest_change if later else None
        self.requeue_at = None if requeue_after is None else started + requeue_after
        self.failures = self.failures + 1 if retry else 0
        if retry:
            backoff = started + min(self.retry_base * 2 ** (self.failures - 1), self.retry_cap)
            self.requeue_at = backoff if self.requeue_at is None else min(self.requeue_at, backoff)
