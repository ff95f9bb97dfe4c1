"""A seeded discrete-event loop: a heap of (time, sequence) ordered events.

The sequence number breaks ties in scheduling order, so the same seed and the same
scenario give the same run, event for event.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any


@dataclass(order=True, frozen=True)
class Event:
    at: float
    sequence: int
    kind: str = field(compare=False)
    data: dict[str, Any] = field(compare=False, default_factory=dict)


class EventLoop:
    def __init__(self) -> None:
        self._heap: list[Event] = []
        self._sequence = 0
        self.now = 0.0

    def schedule(self, at: float, kind: str, **data: Any) -> Event:
        event = Event(max(at, self.now), self._sequence, kind, data)
        self._sequence += 1
        heapq.heappush(self._heap, event)
        return event

    def pop_batch(self) -> list[Event]:
        """Every event due at the next time, in order; advances `now` to it."""
        if not self._heap:
            return []
        at = self._heap[0].at
        batch = []
        while self._heap and self._heap[0].at == at:
            batch.append(heapq.heappop(self._heap))
        self.now = at
        return batch

    def __len__(self) -> int:
        return len(self._heap)

    def next_time(self) -> float | None:
        return self._heap[0].at if self._heap else None
