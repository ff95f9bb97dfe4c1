"""When the next pass runs: changes coalesced, a rate limit, requeue times, a resync.

A change seen by an informer makes a pass due `debounce` seconds later, so a burst of
events (a kubectl apply, a rack failing) costs one pass, not one each; passes start at
least `min_interval` apart; a pass's `requeue_after` makes one due then even if nothing
changes; and every `resync` seconds one runs anyway, the safety net against a missed
event. Pure: every method takes the time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PassSchedule:
    debounce: float = 0.05
    min_interval: float = 0.1
    resync: float = 300.0
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

    def ran(self, started: float, requeue_after: float | None) -> None:
        """A pass started at `started` saw every change up to then; one that came while it
        ran (a pass's own writes coming back from the watch, say) makes the next one due."""
        self.last_pass = started
        if self.changed_at is not None:
            later = self.latest_change is not None and self.latest_change > started
            self.changed_at = self.latest_change if later else None
        self.requeue_at = None if requeue_after is None else started + requeue_after
