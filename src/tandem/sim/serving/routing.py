"""Routing a request to a prefill replica: the router's queue and the choice of replica.

A request waits in the router until a prefill replica exists, then goes to the one with
the fewest outstanding prompt tokens (queued + running; ties by id). Requests a replica
gives back when it leaves go to the front of the router's queue, in arrival order.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable

from tandem.sim.serving.events import Event, EventQueue
from tandem.sim.serving.replicas import Fleet
from tandem.sim.serving.requests import Requests, RequestState


class Router:
    """The router in front of the prefill replicas."""

    def __init__(self, requests: Requests, fleet: Fleet, events: EventQueue) -> None:
        self.requests = requests
        self.fleet = fleet
        self.events = events
        self.waiting: deque[int] = deque()  # no prefill replica yet, or given back

    def arrive(self, request: int) -> None:
        """A request arrives (step 1 of the path): to a prefill replica, or to wait for one."""
        self.requests.state[request] = RequestState.ROUTER
        if not self.fleet.prefills:
            self.waiting.append(request)
            return
        self.send_to_prefill(request)

    def give_back(self, requests: Iterable[int]) -> None:
        """Requests a leaving replica held go first, in arrival order."""
        self.waiting.extendleft(reversed(sorted(requests)))

    def dispatch(self) -> None:
        """Send the waiting requests to the prefill replicas present."""
        while self.waiting and self.fleet.prefills:
            self.send_to_prefill(self.waiting.popleft())

    def send_to_prefill(self, request: int) -> None:
        """Queue the request on the prefill replica with the fewest outstanding prompt tokens;
        an idle replica starts a batch now (after the other arrivals of this instant)."""
        best = min(self.fleet.prefills.values(), key=lambda replica: (replica.outstanding, replica.info.id))
        best.queue.append(request)
        best.outstanding += self.requests.prompt(request)
        self.requests.state[request] = RequestState.QUEUED
        if not best.busy and not best.starting:
            best.starting = True
            self.events.schedule(self.events.now, Event.PREFILL_START, best, best.token)
