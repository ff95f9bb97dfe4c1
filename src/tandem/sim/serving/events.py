"""The serving model's clock and its queue of scheduled events.

Arrivals are not in the queue: the model reads them from the request table in order and
handles one before any event of the same time, so that prompts arriving together start
in one prefill batch. Every other hand-off of a request is one of the `Event` kinds.
"""

from __future__ import annotations

import heapq
from enum import IntEnum
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from tandem.sim.serving.replicas import DecodeReplica, PrefillReplica

# What an event is about: a prefill replica (PREFILL_START, PREFILL_DONE), a request's index
# (TRANSFER_DONE), a decode replica (RUN_END), or either kind of replica (DRAIN_END).
EventTarget = Union["PrefillReplica", "DecodeReplica", int]


class Event(IntEnum):
    """Kinds of scheduled event. The values order events of equal time: they run in this order."""

    PREFILL_START = 0  # a prefill replica starts its next batch
    PREFILL_DONE = 1  # a prefill batch ends: its finished prompts wait for a decode replica
    TRANSFER_DONE = 2  # a request's KV has reached its decode replica: its first token is out
    RUN_END = 3  # a decode replica's run ends: a member finishes, a newcomer joins, or blocks run out
    DRAIN_END = 4  # a draining replica's grace period is over


# (time, kind, sequence number, target, token): the sequence number keeps events of equal
# time and kind in the order they were scheduled; the token lets the target ignore an event
# it has cancelled since (it bumps its own token).
Entry = tuple[float, Event, int, EventTarget, int]


class EventQueue:
    """The model's time (`now`) and its pending events, a heap of `Entry`. `ServingModel.advance`
    pops them (inline: it is the hottest loop), moving `now` and counting them."""

    __slots__ = ("now", "processed", "heap", "_seq")

    def __init__(self) -> None:
        self.now = 0.0
        self.processed = 0  # events handled (prefill batches, transfers, decode runs, drains)
        self.heap: list[Entry] = []
        self._seq = 0

    def schedule(self, at: float, kind: Event, target: EventTarget, token: int) -> None:
        self._seq += 1
        heapq.heappush(self.heap, (at, kind, self._seq, target, token))
