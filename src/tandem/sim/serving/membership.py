"""Replicas joining, draining and leaving, and the requests that lose work when one goes.

A replica that leaves sends its queued prompts back to the front of the router queue;
requests whose prefill had begun, whose KV it held or was receiving, or that were
decoding on it are restarted: prefilled again over the prompt plus the tokens already
delivered, which also yields the next token, and decoding resumes from there. A draining
replica takes no new request and leaves when idle, or when its grace period ends (what
it still holds then goes back to the router, counted in `drain_requeued`).
"""

from __future__ import annotations

import math

import numpy as np

from tandem.sim.serving import roofline
from tandem.sim.serving.costs import EngineCosts
from tandem.sim.serving.decode import DecodeStage
from tandem.sim.serving.events import Event, EventQueue
from tandem.sim.serving.replicas import DecodeReplica, Fleet, PrefillReplica, ReplicaInfo
from tandem.sim.serving.requests import Requests, RequestState
from tandem.sim.serving.transfer import KvTransfers


class Membership:
    """Changes to the fleet, and what they do to the requests on the replicas concerned."""

    def __init__(
        self,
        requests: Requests,
        fleet: Fleet,
        events: EventQueue,
        costs: EngineCosts,
        transfers: KvTransfers,
        decoding: DecodeStage,
        *,
        block_tokens: int,
        swap_space_gib: float,
    ) -> None:
        self.requests = requests
        self.fleet = fleet
        self.events = events
        self.costs = costs
        self.transfers = transfers
        self.decoding = decoding
        self.block_tokens = block_tokens
        self.swap_space_gib = swap_space_gib

    def join(self, info: ReplicaInfo) -> None:
        """A new replica: its KV capacity (the weights must fit) in prefix-cache or decode blocks."""
        fleet = self.fleet
        model, gpu = self.costs.model, self.costs.gpu
        now = self.events.now
        index = len(fleet.all)
        if info.kind == "prefill":
            capacity = roofline.kv_capacity_tokens(model, gpu, info.gpus)  # the weights must fit
            prefill = PrefillReplica(
                info=info, index=index, joined_at=now, cache_blocks=capacity // self.requests.prefix_block_tokens
            )
            fleet.prefills[info.id] = prefill
            fleet.all.append(prefill)
            return
        gpus = info.gpus
        capacity = roofline.kv_capacity_tokens(model, gpu, gpus)
        decode = DecodeReplica(
            info=info,
            index=index,
            joined_at=now,
            capacity=capacity,
            blocks=capacity // self.block_tokens,
            swap_blocks=int(self.swap_space_gib * 2**30 * gpus / self.costs.kv_bytes) // self.block_tokens,
        )
        fleet.decodes[info.id] = decode
        fleet.all.append(decode)

    def restart(self, request: int) -> None:
        """The request lost work: it goes back to the router and is prefilled again."""
        requests = self.requests
        requests.restarts[request] += 1
        requests.generation[request] += 1
        requests.state[request] = RequestState.ROUTER
        source = requests.prefill_of.pop(request, None)
        if source is not None:
            source.holding.discard(request)
        target = requests.decode_of.pop(request, None)
        self.transfers.in_flight.pop(request, None)
        if target is not None:
            target.held -= int(requests.blocks[request])
            target.transferring.discard(request)
        requests.blocks[request] = 0
        requests.progress[request] = 0
        requests.hit[request] = 0
        requests.swapped[request] = False

    def leave(self, replica: PrefillReplica | DecodeReplica) -> list[int]:
        """The replica goes now; returns the requests it gives back to the router."""
        return self.leave_prefill(replica) if isinstance(replica, PrefillReplica) else self.leave_decode(replica)

    def leave_prefill(self, replica: PrefillReplica) -> list[int]:
        requests = self.requests
        now = self.events.now
        replica.left_at = now
        replica.token += 1
        back = []
        for request in replica.queue:
            if requests.progress[request] > requests.hit[request]:  # a chunk of it was computed here: lost
                self.restart(request)
            requests.progress[request] = requests.hit[request] = 0
            back.append(request)
        if replica.busy:
            # the part of the batch done so far counts as work done, for throughput and busy time
            replica.starts.append(replica.batch_start)
            replica.ends.append(now)
            done = now - replica.batch_start
            span = replica.batch_end - replica.batch_start
            partial = int(round(replica.batch_tokens * done / span)) if span > 0 else 0
            replica.tokens.append(partial)
            replica.total_tokens += partial
        running = replica.batch + ([replica.partial] if replica.partial >= 0 else [])
        for request in running:
            self.restart(request)
            back.append(request)
        for request in sorted(replica.holding):
            self.restart(request)
            back.append(request)
        for request in back:
            requests.state[request] = RequestState.ROUTER
        replica.queue.clear()
        replica.busy = False
        replica.batch = []
        replica.partial = -1
        replica.outstanding = 0
        return back

    def leave_decode(self, decode: DecodeReplica) -> list[int]:
        now = self.events.now
        decode.left_at = now
        decode.token += 1
        run = decode.run
        if run is not None:
            done = run.done_by(now, decode.run_end_k - 1)
            self.decoding.iterate(decode, done)  # tokens delivered before it went; none finishes here
            decode.ends[-1] = now  # busy until now, in an iteration whose tokens are lost
            decode.run = None
        lost = sorted(set(decode.ids.tolist()) | set(decode.joiners) | decode.transferring | set(decode.resume))
        for request in lost:
            self.restart(request)
        decode.ids = np.zeros(0, np.int64)
        decode.remaining = np.zeros(0, np.int64)
        decode.context = np.zeros(0, np.int64)
        decode.joiners.clear()
        decode.resume.clear()
        decode.held = decode.run_peak = decode.swapped = 0
        return lost

    def begin_drain(self, replica: PrefillReplica | DecodeReplica, grace_s: float) -> None:
        """The replica left the Ready set with a grace period: it finishes what it holds."""
        now = self.events.now
        self.fleet.draining[replica.info.id] = replica
        replica.drain_token += 1  # its other pending events stay valid
        replica.drain_at = now
        if math.isfinite(grace_s):
            self.events.schedule(now + max(grace_s, 0.0), Event.DRAIN_END, replica, replica.drain_token)

    def check_drained(self, replica: PrefillReplica | DecodeReplica) -> None:
        """A draining replica with nothing left leaves."""
        draining = self.fleet.draining
        if draining.get(replica.info.id) is replica and replica.idle():
            del draining[replica.info.id]
            self.leave(replica)

    def end_drain(self, replica: PrefillReplica | DecodeReplica) -> list[int]:
        """A draining replica's grace period is over: it goes, and what it still held goes
        back to the router (counted in `drain_requeued`)."""
        del self.fleet.draining[replica.info.id]
        back = self.leave(replica)
        for request in back:
            self.requests.drain_requeued[request] += 1
        return back
