"""`ServingModel`: the serving model's entry points, and the hand-offs between its stages.

The stages (`routing`, `prefill`, `admission`, `transfer`, `decode`) each handle one step
of a request's path; this class owns the clock and hands a request from one to the next
when its event comes due (`_on_*`). The package docstring walks one request through.
"""

from __future__ import annotations

import math
from heapq import heappop
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from tandem.autoscaling.signals import Signals
from tandem.errors import InputError, Problem
from tandem.sim.serving.admission import Admission
from tandem.sim.serving.costs import EngineCosts
from tandem.sim.serving.decode import PREEMPTION_MODES, DecodeStage
from tandem.sim.serving.events import Event, EventQueue
from tandem.sim.serving.measure import Measurements
from tandem.sim.serving.membership import Membership
from tandem.sim.serving.prefill import PrefillStage
from tandem.sim.serving.profiles import GpuProfile, ModelProfile
from tandem.sim.serving.replicas import KINDS, DecodeReplica, Fleet, PrefillReplica, ReplicaInfo
from tandem.sim.serving.requests import Requests
from tandem.sim.serving.results import ServingResults
from tandem.sim.serving.routing import Router
from tandem.sim.serving.transfer import KvTransfers


class ServingModel:
    """Requests through routers, prefill and decode replicas, on the roofline of one model and GPU."""

    def __init__(
        self,
        model: ModelProfile,
        gpu: GpuProfile,
        bandwidth_gbps: Callable[[str, str], float | None],
        *,
        ttft_slo_s: float,
        itl_slo_s: float,
        max_prefill_batch_tokens: int = 8192,
        max_decode_batch: int = 256,
        unknown_bandwidth_gbps: float | None = None,
        block_tokens: int = 16,
        preemption: str = "recompute",
        swap_space_gib: float = 4.0,
        swap_gbps: float = 25.0,
        prefix_caching: bool = True,
        chunked_prefill: bool = False,
    ) -> None:
        """`bandwidth_gbps(prefill_node, decode_node)` is the link's Gbit/s (e.g.
        `TopologyView.bandwidth_gbps`); where it says None, `unknown_bandwidth_gbps` is used,
        and without one that is an InputError.

        Decode KV is paged in blocks of `block_tokens` (vLLM's default 16) allocated as
        tokens are produced; out of blocks, the most recently arrived sequence is preempted
        (`preemption`: "recompute", vLLM's default, or "swap" to `swap_space_gib` of host
        memory per GPU at `swap_gbps` GB/s per GPU). `prefix_caching`: prefill replicas
        reuse the KV of prompt prefixes they computed before (needs the trace's prefix
        hashes). `chunked_prefill`: prompts are split so that each prefill iteration
        computes at most `max_prefill_batch_tokens` tokens (docs/serving.md)."""
        if max_prefill_batch_tokens < 1 or max_decode_batch < 1:
            raise ValueError("max_prefill_batch_tokens and max_decode_batch must be >= 1")
        if block_tokens < 1:
            raise ValueError(f"block_tokens must be >= 1, got {block_tokens}")
        if preemption not in PREEMPTION_MODES:
            raise ValueError(f"preemption must be one of {', '.join(PREEMPTION_MODES)}, got {preemption!r}")
        if swap_space_gib < 0 or not swap_gbps > 0:
            raise ValueError("swap_space_gib must be >= 0 and swap_gbps > 0")
        self.model = model
        self.gpu = gpu
        self.ttft_slo_s = ttft_slo_s
        self.itl_slo_s = itl_slo_s
        # the shared bookkeeping
        self.events = EventQueue()
        self.requests = Requests()
        self.fleet = Fleet()
        costs = EngineCosts(model, gpu, swap_gbps)
        # the stages, in the order a request meets them (but the transfers before admission, which starts them)
        self.router = Router(self.requests, self.fleet, self.events)
        self.prefilling = PrefillStage(
            self.requests,
            self.events,
            costs,
            max_batch_tokens=max_prefill_batch_tokens,
            chunked=chunked_prefill,
            prefix_caching=prefix_caching,
        )
        self.transfers = KvTransfers(model, gpu, self.requests, self.events, bandwidth_gbps, unknown_bandwidth_gbps)
        self.admission = Admission(self.requests, self.fleet, self.transfers, block_tokens=block_tokens)
        self.decoding = DecodeStage(
            self.requests, self.events, costs, max_batch=max_decode_batch, block_tokens=block_tokens, preemption=preemption
        )
        self.membership = Membership(
            self.requests,
            self.fleet,
            self.events,
            costs,
            self.transfers,
            self.decoding,
            block_tokens=block_tokens,
            swap_space_gib=swap_space_gib,
        )
        self.measurements = Measurements(self.requests, self.fleet, self.events, self.router, self.admission, self.decoding)
        self._next_arrival = 0  # the next request to arrive

    @property
    def now(self) -> float:
        """The model's time: everything up to it has been processed."""
        return self.events.now

    @property
    def events_processed(self) -> int:
        """Events handled so far (prefill batches, transfers, decode runs, drains); arrivals are not events."""
        return self.events.processed

    # ------------------------------------------------------------------ inputs

    def add_requests(
        self,
        arrival_s: npt.ArrayLike,
        input_tokens: npt.ArrayLike,
        output_tokens: npt.ArrayLike,
        prefix_hashes: Sequence[Sequence[int]] | None = None,
        prefix_block_tokens: int = 512,
    ) -> None:
        """Append requests (sorted by arrival, none before the last one added or before now).
        `prefix_hashes`: per request, the ids of its prompt's prefix blocks of
        `prefix_block_tokens` tokens (Mooncake's `hash_ids`); without them no prefix hits."""
        arrival = np.asarray(arrival_s, dtype=float)
        inputs = np.asarray(input_tokens)
        outputs = np.asarray(output_tokens)
        if arrival.ndim != 1 or inputs.shape != arrival.shape or outputs.shape != arrival.shape:
            raise InputError(Problem("requests", "arrival_s, input_tokens and output_tokens must be 1-D arrays of one length"))
        for name, values in (("input_tokens", inputs), ("output_tokens", outputs)):
            if values.size and not np.issubdtype(values.dtype, np.integer):
                if not np.all(np.isfinite(values)) or not np.all(values == np.round(values)):
                    bad = int(np.argmax(~np.isfinite(values) | (values != np.round(values))))
                    raise InputError(Problem(f"{name}[{bad}]", f"must be a whole number of tokens, got {values[bad]!r}"))
            if values.size and values.min() < 1:
                bad = int(np.argmax(values < 1))
                raise InputError(Problem(f"{name}[{bad}]", f"must be >= 1, got {values[bad]}"))
        requests = self.requests
        if arrival.size:
            if not np.all(np.isfinite(arrival)):
                bad = int(np.argmax(~np.isfinite(arrival)))
                raise InputError(Problem(f"arrival_s[{bad}]", f"must be a finite time, got {arrival[bad]}"))
            if np.any(np.diff(arrival) < 0):
                bad = int(np.argmax(np.diff(arrival) < 0)) + 1
                raise InputError(Problem(f"arrival_s[{bad}]", "arrivals must be sorted (non-decreasing)"))
            earliest = max(self.now, float(requests.arrival[-1]) if requests.arrival.size else 0.0)
            if arrival[0] < earliest:
                raise InputError(Problem("arrival_s[0]", f"must be >= {earliest} (the model's time or the last arrival added)"))
        n = arrival.size
        if prefix_hashes is not None:
            if len(prefix_hashes) != n:
                raise InputError(Problem("prefix_hashes", f"must have one row per request ({n}), got {len(prefix_hashes)}"))
            if prefix_block_tokens < 1:
                raise InputError(Problem("prefix_block_tokens", f"must be >= 1, got {prefix_block_tokens}"))
            requests.prefix_block_tokens = prefix_block_tokens
            hashes = [tuple(row) for row in prefix_hashes]
        else:
            hashes = [()] * n
        requests.append(arrival, inputs, outputs, hashes)

    def set_replicas(self, now: float, replicas: Sequence[ReplicaInfo], drain_s: Mapping[str, float] | None = None) -> None:
        """The complete set of Ready replicas from `now`: new ids join, missing ids leave
        (an id whose kind, unit, GPUs or node changed leaves and joins again).

        A missing id listed in `drain_s` drains instead of leaving at once (a graceful
        shutdown): it takes no new request, finishes what it holds and leaves when idle, or
        after `drain_s[id]` seconds (its grace period), when what is left is sent back to
        the router and counted in `drain_requeued`. Others leave at once (forced: their
        requests restart)."""
        self.advance(now)
        drain_s = drain_s or {}
        wanted: dict[str, ReplicaInfo] = {}
        for position, info in enumerate(replicas):
            if info.kind not in KINDS:
                raise InputError(Problem(f"replicas[{position}].kind", f"must be one of {', '.join(KINDS)}, got {info.kind!r}"))
            if info.gpus < 1:
                raise InputError(Problem(f"replicas[{position}].gpus", f"must be >= 1, got {info.gpus}"))
            if info.id in wanted:
                raise InputError(Problem(f"replicas[{position}].id", f"duplicate replica id {info.id!r}"))
            wanted[info.id] = info
        fleet = self.fleet
        membership = self.membership
        leaving_prefills = sorted(i for i, r in fleet.prefills.items() if wanted.get(i) != r.info)
        leaving_decodes = sorted(i for i, r in fleet.decodes.items() if wanted.get(i) != r.info)
        reborn = sorted(i for i in fleet.draining if i in wanted)  # a draining id back: the old one goes now
        if leaving_prefills or leaving_decodes or reborn:
            self.measurements.sample()  # the leavers' last busy time and tokens are measured before they go
        back_to_router: list[int] = []
        for replica_id in reborn:
            back_to_router += membership.end_drain(fleet.draining[replica_id])
        draining: list[PrefillReplica | DecodeReplica] = []
        for replica_id in leaving_prefills:
            prefill = fleet.prefills.pop(replica_id)
            if replica_id in drain_s and replica_id not in wanted:
                draining.append(prefill)
            else:
                back_to_router += membership.leave_prefill(prefill)
        for replica_id in leaving_decodes:
            decode = fleet.decodes.pop(replica_id)
            if replica_id in drain_s and replica_id not in wanted:
                draining.append(decode)
            else:
                back_to_router += membership.leave_decode(decode)
        for replica in draining:
            membership.begin_drain(replica, float(drain_s[replica.info.id]))
        for replica_id in sorted(wanted):
            if replica_id not in fleet.prefills and replica_id not in fleet.decodes:
                membership.join(wanted[replica_id])
        fleet.regroup()
        self.router.give_back(back_to_router)
        self.admission.regroup()
        self.router.dispatch()
        self.admission.admit()
        for replica in draining:
            membership.check_drained(replica)
        self.measurements.sample()

    # ------------------------------------------------------------------ time

    def advance(self, until: float) -> None:
        """Process every arrival and internal event with time <= until, in time order (an
        arrival before the events of its time)."""
        events = self.events
        if until < events.now:
            raise ValueError(f"time went backwards: {until} < {events.now}")
        arrival = self.requests.arrival
        total = arrival.size
        heap = events.heap
        handlers = self._HANDLERS
        # read from the array once per arrival, not once per event
        next_arrival = float(arrival[self._next_arrival]) if self._next_arrival < total else math.inf
        while True:
            next_event = heap[0][0] if heap else math.inf
            if next_arrival <= next_event:
                if next_arrival > until:
                    break
                events.now = next_arrival
                request = self._next_arrival
                self._next_arrival += 1
                next_arrival = float(arrival[self._next_arrival]) if self._next_arrival < total else math.inf
                self.router.arrive(request)
                continue
            if next_event > until:
                break
            at, kind, _, target, token = heappop(heap)
            events.now = at
            events.processed += 1
            handlers[kind](self, target, token)
        if math.isfinite(until):
            events.now = until

    # ------------------------------------------------------------------ the hand-offs, one per event kind

    def _on_prefill_start(self, replica: PrefillReplica, _token: int) -> None:
        """Event.PREFILL_START: the replica's next batch begins."""
        self.prefilling.start_batch(replica)

    def _on_prefill_done(self, replica: PrefillReplica, token: int) -> None:
        """Event.PREFILL_DONE: the batch's prompts are prefilled; their KV waits for a decode replica."""
        if token != replica.token or not math.isnan(replica.left_at):
            return  # cancelled: the replica left
        for request in self.prefilling.finish_batch(replica):
            self.admission.enqueue(request, replica)
        self.admission.admit()
        if self.fleet.draining:
            self.membership.check_drained(replica)

    def _on_transfer_done(self, request: int, generation: int) -> None:
        """Event.TRANSFER_DONE: the KV is on the decode replica, and with it the first token."""
        if generation != self.requests.generation[request]:
            return  # cancelled: the request restarted since
        source, decode = self.transfers.finish(request)
        parked = self.decoding.parked
        completed = self.decoding.receive(request, decode)
        if completed or self.decoding.parked != parked:  # room came free: the pool may move
            self.admission.admit()
        if self.fleet.draining:
            if completed:
                self.membership.check_drained(decode)
            self.membership.check_drained(source)

    def _on_run_end(self, decode: DecodeReplica, token: int) -> None:
        """Event.RUN_END: the decode run delivered its tokens; the finished requests leave."""
        if token != decode.token or not math.isnan(decode.left_at):
            return  # cancelled: the run was cut or restarted, or the replica left
        parked = self.decoding.parked
        if self.decoding.end_run(decode) or self.decoding.parked != parked:  # room came free: the pool may move
            self.admission.admit()
        if self.fleet.draining:
            self.membership.check_drained(decode)

    def _on_drain_end(self, replica: PrefillReplica | DecodeReplica, token: int) -> None:
        """Event.DRAIN_END: a draining replica's grace period is over; what it holds goes back."""
        if self.fleet.draining.get(replica.info.id) is not replica or token != replica.drain_token:
            return  # it left already, or drains again since
        self.measurements.sample()
        self.router.give_back(self.membership.end_drain(replica))
        self.admission.regroup()
        self.router.dispatch()
        self.admission.admit()

    # What each event kind does, indexed by the kind (an event's target is typed by its kind).
    # Functions, not bound methods: a model holding its own methods would be a reference
    # cycle, freed only by the garbage collector's full passes.
    _HANDLERS: ClassVar[tuple[Callable[[ServingModel, Any, int], None], ...]] = (
        _on_prefill_start,
        _on_prefill_done,
        _on_transfer_done,
        _on_run_end,
        _on_drain_end,
    )
    assert [handler.__name__ for handler in _HANDLERS] == [f"_on_{kind.name.lower()}" for kind in Event]

    # ------------------------------------------------------------------ measurements

    def allocated_blocks(self, decode: DecodeReplica) -> int:
        """KV blocks the decode replica has allocated now."""
        return self.decoding.allocated_blocks(decode)

    def signals(self, now: float, window_s: float) -> Signals:
        """Load figures over (now - window_s, now], roles keyed "prefill" and "decode"."""
        if not window_s > 0:
            raise ValueError(f"window_s must be > 0, got {window_s}")
        self.advance(now)
        signals = self.measurements.signals(window_s)
        self.measurements.sample()
        return signals

    def sample(self, now: float) -> None:
        """Record each Ready replica's figures over the interval since the last sample."""
        self.advance(now)
        self.measurements.sample()

    def results(self) -> ServingResults:
        """Everything measured so far; requests not finished have NaN e2e/ITL and completed False."""
        return self.measurements.results(self.ttft_slo_s, self.itl_slo_s)
