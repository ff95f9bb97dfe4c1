"""Decode iteration: continuous batching on each decode replica, with paged KV.

A request whose KV has arrived joins the running batch at the next iteration boundary
(at once on an idle replica), up to `max_decode_batch`; each iteration gives every member
one token. Between joins and departures the batch is fixed, so a run of iterations is
timed in closed form (`batching.BatchRun`): one event at the run's end, never one per
token. KV is paged in blocks allocated as tokens are produced; out of blocks, the most
recently arrived member is preempted (its KV recomputed, or swapped to host memory) and
resumes first when blocks free up.
"""

from __future__ import annotations

import math

import numpy as np

from tandem.sim.serving.batching import BatchRun
from tandem.sim.serving.costs import EngineCosts
from tandem.sim.serving.events import Event, EventQueue
from tandem.sim.serving.replicas import DecodeReplica
from tandem.sim.serving.requests import Ints, Requests, RequestState

PREEMPTION_MODES = ("recompute", "swap")


class DecodeStage:
    """Runs of the decode replicas' batches."""

    def __init__(
        self,
        requests: Requests,
        events: EventQueue,
        costs: EngineCosts,
        *,
        max_batch: int,
        block_tokens: int,
        preemption: str,
    ) -> None:
        self.requests = requests
        self.events = events
        self.costs = costs
        self.max_batch = max_batch
        self.block_tokens = block_tokens
        self.preemption = preemption
        # Requests parked so far (longer than a whole cache): each one frees the room it
        # was waiting for, so the caller wakes admission when this moves.
        self.parked = 0

    # ------------------------------------------------------------------ the request's hand-offs

    def receive(self, request: int, decode: DecodeReplica) -> bool:
        """The request's KV is on `decode` (step 5 of the path): the token its prefill produced
        reaches the user with it, the first one (TTFT) or after a restart the next one (a gap
        between tokens). A one-token answer is then complete (True); any other joins the batch."""
        requests = self.requests
        now = self.events.now
        if requests.delivered[request] == 0:
            ttft = now - requests.arrival[request]
            requests.ttft[request] = ttft
            requests.ttft_at.append(now)
            requests.ttft_values.append(float(ttft))
        else:
            gap = now - requests.last_token_at[request]
            requests.max_gap[request] = gap if math.isnan(requests.max_gap[request]) else max(requests.max_gap[request], gap)
        requests.last_token_at[request] = now
        requests.delivered[request] += 1
        if requests.delivered[request] >= requests.output[request]:
            decode.held -= int(requests.blocks[request])
            requests.blocks[request] = 0
            requests.complete(request, now)
            return True
        self.join(request, decode)
        return False

    def join(self, request: int, decode: DecodeReplica) -> None:
        """Wait for the next iteration boundary (step 6 of the path): a run not begun yet
        starts again with the newcomer; a running one is cut at its next boundary."""
        now = self.events.now
        self.requests.state[request] = RequestState.JOINING
        decode.joiners.append(request)
        run = decode.run
        if run is None:
            self.start_run(decode)
        elif run.start == now and decode.ids.size < self.max_batch:
            self.start_run(decode)  # no iteration done yet: begin again with the newcomer
        elif decode.ids.size < self.max_batch:
            k = run.first_boundary_from(now, decode.run_end_k)
            if k < decode.run_end_k:
                decode.run_end_k = k
                decode.run_peak = self.member_blocks(decode, k - 1)
                decode.token += 1
                self.events.schedule(run.boundary(k), Event.RUN_END, decode, decode.token)

    def end_run(self, decode: DecodeReplica) -> int:
        """The run reached its last iteration (step 7 of the path): tokens are delivered, finished
        members complete, and the next run starts. Returns how many completed."""
        # the run's last iteration held the most blocks: held + run_peak (exactly, at this boundary)
        decode.peak_blocks = max(decode.peak_blocks, decode.held + decode.run_peak)
        finished = self.iterate(decode, decode.run_end_k)
        now = self.events.now
        for request in finished:
            self.requests.complete(int(request), now)
        self.start_run(decode)
        return len(finished)

    # ------------------------------------------------------------------ runs

    def start_run(self, decode: DecodeReplica) -> None:
        """Begin a run at now: preempted requests come back first (when their blocks fit),
        then joiners fill free slots (FIFO); the batch is fixed. If the batch would run out
        of blocks before its first departure, the run ends at that iteration, where the most
        recently arrived members are preempted (`preempt`)."""
        requests = self.requests
        room = self.max_batch - decode.ids.size
        delay, decode.delay = decode.delay, 0.0
        newcomers: list[int] = []
        if (decode.resume or decode.joiners) and room > 0:
            newcomers, delay = self._take_newcomers(decode, room, delay)
        if newcomers:
            ids = np.asarray(newcomers, dtype=np.int64)
            state, decoding = requests.state, RequestState.DECODING
            for request in newcomers:
                state[request] = decoding
            decode.ids = np.concatenate([decode.ids, ids])
            delivered = requests.delivered[ids]
            decode.remaining = np.concatenate([decode.remaining, requests.output[ids] - delivered])
            decode.context = np.concatenate([decode.context, requests.input[ids] + delivered])
        available = decode.blocks - decode.held
        preempted = False
        end_need = -1
        first_departure = 0  # iterations until the first member finishes
        if decode.ids.size:
            first_departure = int(decode.remaining.min())
            end_need = self.member_blocks(decode, first_departure - 1)
            if end_need > available:  # else every iteration of the run fits (the need only grows)
                end_need = -1
                while decode.ids.size and self.member_blocks(decode, 0) > available:
                    delay += self.preempt(decode)
                    preempted = True
        if decode.ids.size == 0:
            decode.run = None
            decode.run_peak = 0
            if preempted and decode.resume and decode.held == 0:
                self.start_run(decode)  # all preempted with nothing else holding blocks: retry alone (or park)
            return
        batch = int(decode.ids.size)
        context = int(decode.context.sum())
        fixed, per_token = self.costs.decode_step_parts(decode.info.gpus, batch)  # an iteration takes fixed + per_token x context
        decode.run = BatchRun(
            start=self.events.now + delay,
            batch=batch,
            context=context,
            base=fixed + per_token * context,
            slope=per_token * batch,
            floor=0.0,
        )
        if preempted:
            first_departure = int(decode.remaining.min())  # the batch changed
        end_k = first_departure
        if end_need < 0 and self.member_blocks(decode, end_k - 1) > available:
            # the first iteration that would need more blocks than there are ends the run
            low, high = 0, end_k - 1  # fits at low, not at high
            while high - low > 1:
                middle = (low + high) // 2
                if self.member_blocks(decode, middle) > available:
                    high = middle
                else:
                    low = middle
            end_k = high
        decode.run_end_k = end_k
        decode.run_departure = first_departure
        decode.run_peak = end_need if end_need >= 0 else self.member_blocks(decode, end_k - 1)
        decode.token += 1
        self.events.schedule(decode.run.boundary(decode.run_end_k), Event.RUN_END, decode, decode.token)

    def _take_newcomers(self, decode: DecodeReplica, room: int, delay: float) -> tuple[list[int], float]:
        """Requests that enter the batch at this run's start, preempted ones first, and the
        engine seconds owed before it starts: `delay` plus bringing their KV back (swap-in
        or recompute)."""
        requests = self.requests
        newcomers: list[int] = []
        free = decode.blocks - decode.held - (self.member_blocks(decode, 0) if decode.resume and decode.ids.size else 0)
        while decode.resume and room > 0:
            request = decode.resume[0]
            context = int(requests.input[request] + requests.delivered[request])
            need = -(-context // self.block_tokens)
            if need > decode.blocks:
                # a sequence longer than the whole cache cannot go on (vLLM refuses a
                # sequence beyond its cache): it stays unfinished
                decode.resume.popleft()
                self.parked += 1
                requests.state[request] = RequestState.PARKED
                requests.decode_of.pop(request, None)
                if requests.swapped[request]:
                    decode.swapped -= need
                    requests.swapped[request] = False
                continue
            if need > free:
                break
            decode.resume.popleft()
            free -= need
            room -= 1
            newcomers.append(request)
            if requests.swapped[request]:  # swap in: host memory -> HBM over PCIe
                decode.swapped -= need
                requests.swapped[request] = False
                delay += self.costs.swap_seconds(decode.info.gpus, context)
            else:  # recompute the lost KV: a prefill of the prompt and the tokens so far
                delay += self.costs.recompute_seconds(decode.info.gpus, context)
        while decode.joiners and room > 0:
            request = decode.joiners.popleft()
            decode.held -= int(requests.blocks[request])
            requests.blocks[request] = 0
            room -= 1
            newcomers.append(request)
        return newcomers, delay

    def preempt(self, decode: DecodeReplica) -> float:
        """Preempt the most recently arrived member (vLLM's FCFS victim): its blocks are
        freed (recompute) or copied to host memory (swap, when the swap space holds them;
        else recompute). It waits at the front of the replica's queue. Returns the engine
        seconds the preemption costs now (a swap-out)."""
        requests = self.requests
        position = int(np.argmax(decode.ids))
        request = int(decode.ids[position])
        keep = np.ones(decode.ids.size, bool)
        keep[position] = False
        decode.ids = decode.ids[keep]
        decode.remaining = decode.remaining[keep]
        decode.context = decode.context[keep]
        requests.preemptions[request] += 1
        requests.state[request] = RequestState.PREEMPTED
        decode.resume.appendleft(request)
        context = int(requests.input[request] + requests.delivered[request])
        blocks = -(-context // self.block_tokens)
        if self.preemption == "swap" and decode.swapped + blocks <= decode.swap_blocks:
            decode.swapped += blocks
            requests.swapped[request] = True
            return self.costs.swap_seconds(decode.info.gpus, context)
        return 0.0

    def iterate(self, decode: DecodeReplica, k: int) -> Ints:
        """Apply k iterations of the current run: deliver tokens, return (and drop) finished requests."""
        run = decode.run
        assert run is not None
        requests = self.requests
        end = run.boundary(k)
        decode.runs.append((run, k))
        decode.ends.append(end)
        decode.total_tokens += run.batch * k
        if k == 0:
            return np.zeros(0, np.int64)
        ids = decode.ids
        first_gap = run.start + run.step(0) - requests.last_token_at[ids]
        gaps = np.maximum(first_gap, run.step(k - 1)) if k >= 2 else first_gap
        requests.max_gap[ids] = np.fmax(requests.max_gap[ids], gaps)
        requests.last_token_at[ids] = end
        requests.delivered[ids] += k
        decode.remaining -= k
        decode.context += k
        if k < decode.run_departure:  # no member's last iteration yet (saves a scan of the batch)
            return np.zeros(0, np.int64)
        done = decode.remaining == 0
        keep = ~done
        finished: Ints = ids[done]
        decode.ids = ids[keep]
        decode.remaining = decode.remaining[keep]
        decode.context = decode.context[keep]
        return finished

    # ------------------------------------------------------------------ KV blocks

    def member_blocks(self, decode: DecodeReplica, k: int) -> int:
        """Blocks the running batch holds in its iteration k (context + k tokens each)."""
        b = self.block_tokens
        return int(((decode.context + (k + b - 1)) // b).sum())

    def allocated_blocks(self, decode: DecodeReplica) -> int:
        """Blocks allocated now: outside the batch, plus the batch's in its current iteration."""
        run = decode.run
        if run is None or decode.ids.size == 0:
            return decode.held
        now = self.events.now
        k = run.done_by(now, decode.run_end_k) if now > run.start else 0
        return decode.held + self.member_blocks(decode, min(k, max(decode.run_end_k - 1, 0)))
