"""A request-level discrete-event model of prefill/decode-disaggregated serving.

Path of a request (docs/serving.md has the full rules and their limits):

1. Router: it waits until a prefill replica exists, then goes to the prefill replica with
   the fewest outstanding prompt tokens (queued + running; ties by id).
2. Prefill: each replica runs FCFS batches of whole prompts up to
   `max_prefill_batch_tokens` (a longer prompt runs alone) in `prefill_seconds`.
3. Admission: the request needs a decode replica of its prefill replica's unit when that
   unit has any, else of any unit; among those with room, the least loaded (in steps of
   DECODE_LOAD_STEP sequences), then the nearest (highest bandwidth to the prefill node),
   then the most free KV tokens, then id, reserves prompt + output tokens. Requests
   without room wait in FIFO admission pools, one per unit (and one for "any unit"); a
   request never overtakes an earlier one of its pool. One that needs more KV than any
   candidate replica holds when empty is parked until the replica set changes.
4. KV transfer: `kv_transfer_seconds` of the prompt at the Gbit/s the transfer gets: the
   NICs of the smaller replica's ranks, capped by the link between the nodes shared fairly
   with the transfers in flight over the same uplink when it starts; it streams layer by
   layer behind the prefill that made the KV when admitted at once. The first token is
   delivered when it completes (TTFT).
5. Decode: continuous batching; the request joins the running batch at the next
   iteration boundary (at once on an idle replica), up to `max_decode_batch`; each
   iteration gives every member one token in `decode_step_seconds(batch, context)`. It
   leaves and frees its KV after output_tokens - 1 iterations.

A replica that leaves sends its queued prompts back to the front of the router queue;
requests whose prefill had begun, whose KV it held or was receiving, or that were
decoding on it are re-prefilled (a restart): over the prompt plus the tokens already
delivered, which also yields the next token, and decoding resumes from there.

Decode runs are timed in closed form (`batching.BatchRun`): a heap event only at a join
or a departure, never per token. Deterministic: no randomness, ties broken by id.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from tandem.autoscaling.signals import RoleSignals, Signals
from tandem.errors import InputError, Problem
from tandem.sim.serving import roofline
from tandem.sim.serving.batching import BatchRun
from tandem.sim.serving.profiles import GpuProfile, ModelProfile
from tandem.sim.serving.results import ReplicaSamples, ServingResults

KINDS = ("prefill", "decode")
_ANY_UNIT = -1  # the admission pool of units without a decode replica

# The router counts a decode replica's load in steps of this many sequences (running,
# waiting for a slot, or being transferred to it) before it looks at distance.
DECODE_LOAD_STEP = 8

# request states
_PENDING, _ROUTER, _QUEUED, _PREFILLING, _WAITING_KV, _PARKED, _TRANSFERRING, _JOINING, _DECODING, _DONE, _PREEMPTED = range(11)

# event kinds, in the order they run at equal times (after arrivals, so that prompts
# arriving together start in one batch)
_PREFILL_START, _PREFILL_DONE, _TRANSFER_DONE, _RUN_END, _DRAIN_END = range(5)

PREEMPTION_MODES = ("recompute", "swap")


@dataclass(frozen=True)
class ReplicaInfo:
    id: str  # stable identity, e.g. "serving/llama-70b/0/prefill/3"
    kind: str  # "prefill" | "decode"
    unit: int  # the group's unit (copy) it belongs to
    gpus: int  # GPUs of the whole replica (all its pods)
    node: str  # node of the replica's leader pod, for bandwidth


@dataclass(eq=False)
class _Replica:
    info: ReplicaInfo
    index: int  # into the results' replica arrays
    joined_at: float
    left_at: float = math.nan
    token: int = 0  # bumped to cancel the replica's pending event
    drain_token: int = 0  # matches its pending drain-end event
    drain_at: float = math.nan  # when it began to drain
    total_tokens: int = 0  # prefill: prompt tokens processed; decode: tokens generated


@dataclass(eq=False)
class _Prefill(_Replica):
    queue: deque[int] = field(default_factory=deque)
    outstanding: int = 0  # prompt tokens queued + running
    busy: bool = False  # a batch is running
    batch: list[int] = field(default_factory=list)  # requests whose prefill this batch completes
    partial: int = -1  # chunked prefill: the request this batch runs a (non-final) chunk of
    batch_tokens: int = 0  # tokens computed (prefix-cache hits excluded)
    batch_prompts: int = 0  # whole prompts this batch completes, for `outstanding`
    batch_start: float = 0.0
    batch_end: float = 0.0
    starting: bool = False  # a batch start is scheduled for now
    holding: set[int] = field(default_factory=set)  # requests whose KV it holds (waiting or sending)
    cache: dict[int, None] = field(default_factory=dict)  # prefix blocks held, least recently used first
    cache_blocks: int = 0  # how many prefix blocks its KV holds
    # completed batches, in time order
    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)

    def work(self, start: float, end: float) -> tuple[float, float]:
        """(busy seconds, prompt tokens) within (start, end]; a batch's tokens count pro rata."""
        busy = tokens = 0.0
        first = bisect.bisect_right(self.ends, start)
        spans = list(zip(self.starts[first:], self.ends[first:], self.tokens[first:]))
        if self.busy and math.isnan(self.left_at):
            spans.append((self.batch_start, self.batch_end, self.batch_tokens))
        for begin, last, count in spans:
            if begin >= end:
                break
            overlap = min(last, end) - max(begin, start)
            if overlap > 0:
                busy += overlap
                tokens += count * overlap / (last - begin)
        return busy, tokens


@dataclass(eq=False)
class _Decode(_Replica):
    capacity: int = 0  # KV tokens
    blocks: int = 0  # KV blocks (capacity // block size)
    held: int = 0  # blocks of requests not in the running batch (transferring in, waiting for a slot)
    run_peak: int = 0  # blocks the running batch holds in the last iteration of its run
    peak_blocks: int = 0
    swap_blocks: int = 0  # swap space (host memory), in blocks
    swapped: int = 0  # blocks swapped out now
    delay: float = 0.0  # engine time owed before the next run (swap-outs)
    resume: deque[int] = field(default_factory=deque)  # preempted, waiting for blocks (front first)
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # running batch
    remaining: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # iterations left
    context: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # KV of its next iteration
    joiners: deque[int] = field(default_factory=deque)  # transferred, waiting for a boundary or a slot
    transferring: set[int] = field(default_factory=set)
    run: BatchRun | None = None
    run_end_k: int = 0
    run_departure: int = 0  # iterations of the run until its first member finishes (>= run_end_k)
    # completed (or cut) runs, in time order
    runs: list[tuple[BatchRun, int]] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)

    def work(self, start: float, end: float) -> tuple[float, float]:
        """(busy seconds, tokens generated) within (start, end]; an iteration's tokens count pro rata."""
        busy = tokens = 0.0
        first = bisect.bisect_right(self.ends, start)
        spans = [(run, k, last) for (run, k), last in zip(self.runs[first:], self.ends[first:])]
        if self.run is not None and math.isnan(self.left_at):
            spans.append((self.run, self.run_end_k, self.run.boundary(self.run_end_k)))
        for run, k, last in spans:
            if run.start >= end:
                break
            overlap = min(last, end) - max(run.start, start)
            if overlap > 0:
                busy += overlap
                if start <= run.start and last <= end:
                    tokens += run.batch * k
                else:
                    tokens += run.batch * (run.progress(end, k) - run.progress(start, k))
        return busy, tokens


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
    ):
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
        self.block_tokens = block_tokens
        self.preemption = preemption
        self.swap_space_gib = swap_space_gib
        self.swap_gbps = swap_gbps
        self.prefix_caching = prefix_caching
        self.chunked_prefill = chunked_prefill
        self.prefix_block_tokens = 512
        self._kv_bytes = roofline.kv_bytes_per_token(model)
        self.model = model
        self.gpu = gpu
        self._bandwidth_of = bandwidth_gbps
        self._unknown_gbps = unknown_bandwidth_gbps
        self.ttft_slo_s = ttft_slo_s
        self.itl_slo_s = itl_slo_s
        self.max_prefill_batch_tokens = max_prefill_batch_tokens
        self.max_decode_batch = max_decode_batch
        self._decode_parts: dict[tuple[int, int], tuple[float, float]] = {}  # (gpus, batch) -> roofline.decode_step_parts
        self._prefill_costs: dict[tuple[int, int, int, float], float] = {}  # (gpus, tokens, prompts, squares) -> seconds
        self._layouts: dict[int, roofline.Parallel] = {}  # gpus -> roofline.layout
        self._in_flight: dict[int, tuple[str, str, float]] = {}  # transfers: request -> (from node, to node, end)
        self._raw_bandwidths: dict[tuple[str, str], float | None] = {}

        self.now = 0.0
        self.events_processed = 0  # heap events handled (prefill batches, transfers, decode runs)
        self._events: list[tuple[float, int, int, object, int]] = []  # (time, kind, seq, target, token)
        self._seq = 0
        self._bandwidths: dict[tuple[str, str], float] = {}

        # requests
        self._arrival = np.zeros(0)
        self._input = np.zeros(0, np.int64)
        self._output = np.zeros(0, np.int64)
        self._state = np.zeros(0, np.int8)
        self._delivered = np.zeros(0, np.int64)
        self._ttft = np.zeros(0)
        self._e2e = np.zeros(0)
        self._itl = np.zeros(0)
        self._last_token_at = np.zeros(0)
        self._max_gap = np.zeros(0)
        self._transfer_s = np.zeros(0)
        self._prefill_s = np.zeros(0)
        self._prefill_replica = np.zeros(0, np.int64)
        self._decode_replica = np.zeros(0, np.int64)
        self._restarts = np.zeros(0, np.int64)
        self._generation = np.zeros(0, np.int64)  # bumped on restart: cancels a pending transfer
        self._ready_at = np.zeros(0)  # when prefill finished (admission order)
        self._blocks = np.zeros(0, np.int64)  # decode KV blocks held outside a running batch
        self._progress = np.zeros(0, np.int64)  # prompt tokens whose KV exists (cache hits + chunks done)
        self._hit = np.zeros(0, np.int64)  # prefix-cache hit of the current prefill attempt
        self._cached = np.zeros(0, np.int64)  # prompt tokens served from the prefix cache, all attempts
        self._queried = np.zeros(0, np.int64)  # prompt tokens prefilled, all attempts (hits included)
        self._preemptions = np.zeros(0, np.int64)
        self._swapped = np.zeros(0, bool)  # preempted by swapping (its KV is in host memory)
        self._drain_requeued = np.zeros(0, np.int64)  # sent back when a draining replica's grace ran out
        self._hashes: list[tuple[int, ...]] = []
        self._draining: dict[str, _Prefill | _Decode] = {}
        self._prefill_of: dict[int, _Prefill] = {}  # where the KV is computed / held
        self._decode_of: dict[int, _Decode] = {}
        self._next_arrival = 0

        # replicas
        self._replicas: list[_Prefill | _Decode] = []  # every replica that ever joined
        self._prefills: dict[str, _Prefill] = {}  # present, by id
        self._decodes: dict[str, _Decode] = {}
        self._decodes_by_unit: dict[int, list[_Decode]] = {}  # present, sorted by id; _ANY_UNIT: all
        self._router: deque[int] = deque()
        self._pools: dict[int, deque[int]] = {}
        self._parked: list[int] = []

        # logs for signals
        self._ttft_at: list[float] = []
        self._ttft_values: list[float] = []
        self._done_at: list[float] = []
        self._done_itl: list[float] = []

        # per-replica samples
        self._last_sample_at = 0.0
        self._samples: dict[str, list[float]] = {
            key: [] for key in ("at", "replica", "queue", "kv", "tokens_per_s", "busy")
        }

    # ------------------------------------------------------------------ inputs

    def add_requests(
        self,
        arrival_s: np.ndarray,
        input_tokens: np.ndarray,
        output_tokens: np.ndarray,
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
        if arrival.size:
            if not np.all(np.isfinite(arrival)):
                bad = int(np.argmax(~np.isfinite(arrival)))
                raise InputError(Problem(f"arrival_s[{bad}]", f"must be a finite time, got {arrival[bad]}"))
            if np.any(np.diff(arrival) < 0):
                bad = int(np.argmax(np.diff(arrival) < 0)) + 1
                raise InputError(Problem(f"arrival_s[{bad}]", "arrivals must be sorted (non-decreasing)"))
            earliest = max(self.now, float(self._arrival[-1]) if self._arrival.size else 0.0)
            if arrival[0] < earliest:
                raise InputError(Problem("arrival_s[0]", f"must be >= {earliest} (the model's time or the last arrival added)"))
        n = arrival.size
        if prefix_hashes is not None:
            if len(prefix_hashes) != n:
                raise InputError(Problem("prefix_hashes", f"must have one row per request ({n}), got {len(prefix_hashes)}"))
            if prefix_block_tokens < 1:
                raise InputError(Problem("prefix_block_tokens", f"must be >= 1, got {prefix_block_tokens}"))
            self.prefix_block_tokens = prefix_block_tokens
            self._hashes += [tuple(row) for row in prefix_hashes]
        else:
            self._hashes += [()] * n
        self._arrival = np.concatenate([self._arrival, arrival])
        self._input = np.concatenate([self._input, inputs.astype(np.int64)])
        self._output = np.concatenate([self._output, outputs.astype(np.int64)])
        self._state = np.concatenate([self._state, np.full(n, _PENDING, np.int8)])
        for name, fill, dtype in (
            ("_delivered", 0, np.int64),
            ("_ttft", math.nan, float),
            ("_e2e", math.nan, float),
            ("_itl", math.nan, float),
            ("_last_token_at", math.nan, float),
            ("_max_gap", math.nan, float),
            ("_transfer_s", 0.0, float),
            ("_prefill_s", 0.0, float),
            ("_prefill_replica", -1, np.int64),
            ("_decode_replica", -1, np.int64),
            ("_restarts", 0, np.int64),
            ("_generation", 0, np.int64),
            ("_ready_at", math.nan, float),
            ("_blocks", 0, np.int64),
            ("_progress", 0, np.int64),
            ("_hit", 0, np.int64),
            ("_cached", 0, np.int64),
            ("_queried", 0, np.int64),
            ("_preemptions", 0, np.int64),
            ("_swapped", False, bool),
            ("_drain_requeued", 0, np.int64),
        ):
            setattr(self, name, np.concatenate([getattr(self, name), np.full(n, fill, dtype)]))

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
        leaving_prefills = sorted(i for i, r in self._prefills.items() if wanted.get(i) != r.info)
        leaving_decodes = sorted(i for i, r in self._decodes.items() if wanted.get(i) != r.info)
        reborn = sorted(i for i in self._draining if i in wanted)  # a draining id back: the old one goes now
        if leaving_prefills or leaving_decodes or reborn:
            self._sample()  # the leavers' last busy time and tokens are measured before they go
        back_to_router: list[int] = []
        for replica_id in reborn:
            back_to_router += self._end_drain(self._draining[replica_id])
        draining: list[_Prefill | _Decode] = []
        for replica_id in leaving_prefills:
            prefill = self._prefills.pop(replica_id)
            if replica_id in drain_s and replica_id not in wanted:
                draining.append(prefill)
            else:
                back_to_router += self._leave_prefill(prefill)
        for replica_id in leaving_decodes:
            decode = self._decodes.pop(replica_id)
            if replica_id in drain_s and replica_id not in wanted:
                draining.append(decode)
            else:
                back_to_router += self._leave_decode(decode)
        for replica in draining:
            self._draining[replica.info.id] = replica
            grace = float(drain_s[replica.info.id])
            replica.drain_token += 1  # its other pending events stay valid
            replica.drain_at = now
            if math.isfinite(grace):
                self._schedule(now + max(grace, 0.0), _DRAIN_END, replica, replica.drain_token)
        for replica_id in sorted(wanted):
            info = wanted[replica_id]
            if replica_id not in self._prefills and replica_id not in self._decodes:
                self._join(info)
        by_unit: dict[int, list[_Decode]] = {_ANY_UNIT: [self._decodes[i] for i in sorted(self._decodes)]}
        for decode in by_unit[_ANY_UNIT]:
            by_unit.setdefault(decode.info.unit, []).append(decode)
        self._decodes_by_unit = by_unit
        self._router.extendleft(reversed(sorted(back_to_router)))
        self._rebuild_pools()
        self._dispatch_router()
        self._try_admit()
        for replica in draining:
            self._check_drained(replica)
        self._sample()

    # ------------------------------------------------------------------ time

    def advance(self, until: float) -> None:
        """Process every arrival and internal event with time <= until, in time order."""
        if until < self.now:
            raise ValueError(f"time went backwards: {until} < {self.now}")
        arrival = self._arrival
        total = arrival.size
        events = self._events
        # read from the array once per arrival, not once per event
        next_arrival = float(arrival[self._next_arrival]) if self._next_arrival < total else math.inf
        while True:
            next_event = events[0][0] if events else math.inf
            if next_arrival <= next_event:
                if next_arrival > until:
                    break
                self.now = next_arrival
                request = self._next_arrival
                self._next_arrival += 1
                next_arrival = float(arrival[self._next_arrival]) if self._next_arrival < total else math.inf
                self._route(request)
                continue
            if next_event > until:
                break
            at, kind, _, target, token = heapq.heappop(events)
            self.now = at
            self.events_processed += 1
            if kind == _PREFILL_START:
                self._start_batch(target)  # type: ignore[arg-type]
            elif kind == _PREFILL_DONE:
                self._prefill_done(target, token)  # type: ignore[arg-type]
            elif kind == _TRANSFER_DONE:
                self._transfer_done(int(target), token)  # type: ignore[call-overload]
            elif kind == _RUN_END:
                self._run_end(target, token)  # type: ignore[arg-type]
            else:
                self._drain_end(target, token)  # type: ignore[arg-type]
        if math.isfinite(until):
            self.now = until

    def _schedule(self, at: float, kind: int, target: object, token: int) -> None:
        self._seq += 1
        heapq.heappush(self._events, (at, kind, self._seq, target, token))

    # ------------------------------------------------------------------ router and prefill

    def _route(self, request: int) -> None:
        self._state[request] = _ROUTER
        if not self._prefills:
            self._router.append(request)
            return
        self._send_to_prefill(request)

    def _dispatch_router(self) -> None:
        while self._router and self._prefills:
            self._send_to_prefill(self._router.popleft())

    def _prompt(self, request: int) -> int:
        """Tokens to prefill: the prompt plus whatever was delivered before a restart."""
        return int(self._input[request] + self._delivered[request])

    def _admission_blocks(self, request: int) -> int:
        """KV blocks a decode replica allocates when the request's KV is sent to it: its
        context once the first token is out (prompt + tokens delivered + 1). Nothing is
        reserved for the answer: blocks are added as tokens are generated."""
        return -(-int(self._input[request] + self._delivered[request] + 1) // self.block_tokens)

    def _member_blocks(self, decode: _Decode, k: int) -> int:
        """Blocks the running batch holds in its iteration k (context + k tokens each)."""
        b = self.block_tokens
        return int(((decode.context + (k + b - 1)) // b).sum())

    def _free_blocks(self, decode: _Decode) -> int:
        """Blocks free for a newcomer: those neither held nor needed by the running batch
        before its run ends (so admitting never cuts the run short)."""
        return decode.blocks - decode.held - decode.run_peak

    def allocated_blocks(self, decode: _Decode) -> int:
        """Blocks allocated now: outside the batch, plus the batch's in its current iteration."""
        run = decode.run
        if run is None or decode.ids.size == 0:
            return decode.held
        k = run.done_by(self.now, decode.run_end_k) if self.now > run.start else 0
        return decode.held + self._member_blocks(decode, min(k, max(decode.run_end_k - 1, 0)))

    def _send_to_prefill(self, request: int) -> None:
        best = min(self._prefills.values(), key=lambda replica: (replica.outstanding, replica.info.id))
        best.queue.append(request)
        best.outstanding += self._prompt(request)
        self._state[request] = _QUEUED
        if not best.busy and not best.starting:
            best.starting = True
            self._schedule(self.now, _PREFILL_START, best, best.token)

    def _lookup(self, replica: _Prefill, request: int, prompt: int) -> int:
        """Prompt tokens whose KV the replica's prefix cache holds (leading blocks, up to
        the first miss; at least the last token is computed, as vLLM does); the request's
        blocks become the most recently used, the least recently used are evicted."""
        hashes = self._hashes[request]
        if not hashes or not self.prefix_caching or replica.cache_blocks <= 0:
            return 0
        cache = replica.cache
        matched = 0
        for block in hashes:
            if block not in cache:
                break
            matched += 1
        for block in hashes:
            cache.pop(block, None)
            cache[block] = None
        excess = len(cache) - replica.cache_blocks
        if excess > 0:
            for block in list(itertools.islice(cache, excess)):
                del cache[block]
        return min(matched * self.prefix_block_tokens, prompt - 1)

    def _start_batch(self, replica: _Prefill) -> None:
        """One prefill iteration, FCFS: whole prompts up to the token budget (a longer one
        alone), or with chunked prefill exactly the budget, the last prompt cut into a chunk.
        Tokens served from the prefix cache are not computed and not counted in the budget."""
        replica.starting = False
        queue = replica.queue
        if not queue or replica.busy or not math.isnan(replica.left_at):
            return
        budget = self.max_prefill_batch_tokens
        chunked = self.chunked_prefill
        finishing: list[int] = []
        lengths: list[int] = []
        total = prompts = 0
        squares = 0.0
        partial = -1
        while queue:
            request = queue[0]
            prompt = self._prompt(request)
            done = int(self._progress[request])
            if done == 0:
                hit = self._lookup(replica, request, prompt)
                self._hit[request] = hit
                self._progress[request] = done = hit
            left = prompt - done
            if chunked:
                take = min(left, budget - total)
                if take <= 0:
                    break
            else:
                if total and total + left > budget:
                    break
                take = left
            queue.popleft()
            total += take
            lengths.append(take)
            squares += float(done + take) ** 2 - float(done) ** 2
            self._progress[request] = done + take
            self._state[request] = _PREFILLING
            if done + take < prompt:
                partial = request  # chunked: the budget is spent
                break
            finishing.append(request)
            prompts += prompt
        replica.busy = True
        replica.batch = finishing
        replica.partial = partial
        replica.batch_tokens = total
        replica.batch_prompts = prompts
        replica.batch_start = self.now
        replica.batch_end = self.now + self._prefill_seconds(replica.info.gpus, lengths, squares)
        replica.token += 1
        self._schedule(replica.batch_end, _PREFILL_DONE, replica, replica.token)

    def _prefill_seconds(self, gpus: int, lengths: list[int], squares: float) -> float:
        """`roofline.prefill_seconds` of a batch of `lengths` tokens (prompts or chunks),
        remembered: it depends on the batch only through its token count, its number of
        prompts and `squares`, and batches of one prompt of a given length recur."""
        tokens = sum(lengths)
        key = (gpus, tokens, len(lengths), squares)
        seconds = self._prefill_costs.get(key)
        if seconds is None:
            seconds = roofline.prefill_seconds(self.model, self.gpu, self._layout(gpus), tokens, lengths, attention_squares=squares)
            self._prefill_costs[key] = seconds
        return seconds

    def _layout(self, gpus: int) -> roofline.Parallel:
        """`roofline.layout` of a replica of `gpus` GPUs, remembered (it searches the divisors)."""
        parallel = self._layouts.get(gpus)
        if parallel is None:
            parallel = self._layouts[gpus] = roofline.layout(self.model, self.gpu, gpus)
        return parallel

    def _prefill_done(self, replica: _Prefill, token: int) -> None:
        if token != replica.token or not math.isnan(replica.left_at):
            return
        duration = replica.batch_end - replica.batch_start
        if replica.partial >= 0:
            self._prefill_s[replica.partial] += duration
            self._state[replica.partial] = _QUEUED
            replica.queue.appendleft(replica.partial)  # its next chunk goes first
            replica.partial = -1
        for request in replica.batch:
            self._prefill_s[request] += duration
            self._cached[request] += self._hit[request]
            self._queried[request] += self._prompt(request)
            self._progress[request] = 0
            self._hit[request] = 0
            self._state[request] = _WAITING_KV
            self._ready_at[request] = self.now
            self._prefill_of[request] = replica
            self._prefill_replica[request] = replica.index
            replica.holding.add(request)
            self._pools.setdefault(self._pool_of(replica), deque()).append(request)
        replica.starts.append(replica.batch_start)
        replica.ends.append(replica.batch_end)
        replica.tokens.append(replica.batch_tokens)
        replica.total_tokens += replica.batch_tokens
        replica.outstanding -= replica.batch_prompts
        replica.busy = False
        replica.batch = []
        replica.batch_tokens = replica.batch_prompts = 0
        if replica.queue:
            self._start_batch(replica)
        self._try_admit()
        if self._draining:
            self._check_drained(replica)

    # ------------------------------------------------------------------ admission and transfer

    def _pool_of(self, replica: _Prefill) -> int:
        unit = replica.info.unit
        return unit if unit in self._decodes_by_unit and unit != _ANY_UNIT else _ANY_UNIT

    def _rebuild_pools(self) -> None:
        waiting = [r for pool in self._pools.values() for r in pool] + self._parked
        waiting = [r for r in waiting if self._state[r] in (_WAITING_KV, _PARKED)]
        waiting.sort(key=lambda r: (self._ready_at[r], r))
        self._pools = {}
        self._parked = []
        for request in waiting:
            self._state[request] = _WAITING_KV
            self._pools.setdefault(self._pool_of(self._prefill_of[request]), deque()).append(request)

    def _bandwidth(self, a: str, b: str) -> float:
        key = (a, b)
        value = self._bandwidths.get(key)
        if value is None:
            raw = self._bandwidth_of(a, b)
            if raw is None:
                if self._unknown_gbps is None:
                    raise InputError(
                        Problem(
                            "",
                            f"no link bandwidth between nodes {a!r} and {b!r}: "
                            "state linkBandwidthGbps for their lowest common level",
                        )
                    )
                raw = self._unknown_gbps
            value = float(raw)
            if not value > 0:
                raise InputError(Problem("", f"link bandwidth between nodes {a!r} and {b!r} must be > 0 Gbit/s, got {raw!r}"))
            self._bandwidths[key] = value
        return value

    def _try_admit(self) -> None:
        """Start transfers for waiting requests, oldest head of any unblocked pool first."""
        blocked: set[int] = set()
        pools = self._pools
        while True:
            chosen = -1
            best_key: tuple[float, int] | None = None
            for key, pool in pools.items():
                if pool and key not in blocked:
                    head = pool[0]
                    order = (self._ready_at[head], head)
                    if best_key is None or order < best_key:
                        best_key, chosen = order, key
            if best_key is None:
                return
            pool = pools[chosen]
            request = pool[0]
            candidates = self._decodes_by_unit.get(chosen, [])
            need = self._admission_blocks(request)
            source = self._prefill_of[request]
            target: _Decode | None = None
            target_rank: tuple[int, float, int, str] | None = None
            for decode in candidates:
                free = decode.blocks - decode.held - decode.run_peak
                if free >= need:
                    # Load first, in steps of DECODE_LOAD_STEP sequences, then the nearest,
                    # then the most room: near decode wins among replicas about as busy,
                    # and a far one is used before a near one runs ahead of it.
                    load = (decode.ids.size + len(decode.joiners) + len(decode.transferring) + len(decode.resume)) // DECODE_LOAD_STEP
                    rank = (load, -self._bandwidth(source.info.node, decode.info.node), -free, decode.info.id)
                    if target_rank is None or rank < target_rank:
                        target, target_rank = decode, rank
            if target is None:
                if candidates and need > max(decode.blocks for decode in candidates):
                    pool.popleft()
                    self._state[request] = _PARKED
                    self._parked.append(request)
                else:
                    blocked.add(chosen)
                continue
            pool.popleft()
            self._start_transfer(request, source, target, need)

    def _start_transfer(self, request: int, source: _Prefill, target: _Decode, need: int) -> None:
        target.held += need
        self._blocks[request] = need
        if target.run is None:
            target.peak_blocks = max(target.peak_blocks, target.held)
        target.transferring.add(request)
        self._decode_of[request] = target
        self._decode_replica[request] = target.index
        seconds = self._transfer_seconds(request, source, target)
        self._in_flight[request] = (source.info.node, target.info.node, self.now + seconds)
        self._transfer_s[request] += seconds
        self._state[request] = _TRANSFERRING
        self._schedule(self.now + seconds, _TRANSFER_DONE, request, int(self._generation[request]))

    def _transfer_seconds(self, request: int, source: _Prefill, target: _Decode) -> float:
        """The KV transfer's cost (docs/serving.md, "KV transfer"): its Gbit/s is the NICs of
        the smaller replica (one per GPU) capped by the link between the two nodes, shared
        fairly with the transfers in flight over the same uplink as it starts; admitted the
        moment its prefill ends, it streams layer by layer behind that prefill."""
        a, b = source.info.node, target.info.node
        link = self._bandwidth(a, b)
        gbps = roofline.kv_transfer_gbps(
            self.gpu, min(source.info.gpus, target.info.gpus), link, 1 + self._sharing(a, b, link), same_node=a == b
        )
        overlap = 0.0
        if self._ready_at[request] == self.now and source.ends and source.ends[-1] == self.now:
            overlap = source.ends[-1] - source.starts[-1]  # the batch that made this KV just ended
        return roofline.kv_transfer_seconds(
            self.model, self._prompt(request), gbps, latency_s=self.gpu.transfer_latency_us * 1e-6, overlap_s=overlap
        )

    def _sharing(self, a: str, b: str, link: float) -> int:
        """Transfers in flight that cross an uplink a transfer from node `a` to node `b`
        crosses. The domain below the nodes' lowest common level is the set of nodes nearer
        to `a` than `b` is (a bandwidth above `link`); a transfer crosses its uplink when one
        end is inside and the other is not. The larger count of `a`'s and `b`'s side."""
        self._in_flight = {r: flight for r, flight in self._in_flight.items() if flight[2] > self.now}
        if a == b:
            return 0  # within a node: NVLink, no shared uplink
        out = into = 0
        for c, d, _ in self._in_flight.values():
            out += self._near(a, c, link) != self._near(a, d, link)
            into += self._near(b, c, link) != self._near(b, d, link)
        return max(out, into)

    def _near(self, x: str, y: str, link: float) -> bool:
        """y is in x's domain below a link of `link` Gbit/s (a pair of unknown bandwidth is far)."""
        if x == y:
            return True
        key = (x, y)
        if key not in self._raw_bandwidths:
            self._raw_bandwidths[key] = self._bandwidth_of(x, y)
        value = self._raw_bandwidths[key]
        return value is not None and value > link

    def _transfer_done(self, request: int, generation: int) -> None:
        if generation != self._generation[request]:
            return
        self._in_flight.pop(request, None)
        decode = self._decode_of[request]
        source = self._prefill_of.pop(request)
        source.holding.discard(request)
        decode.transferring.discard(request)
        now = self.now
        if self._delivered[request] == 0:
            ttft = now - self._arrival[request]
            self._ttft[request] = ttft
            self._ttft_at.append(now)
            self._ttft_values.append(float(ttft))
        else:
            gap = now - self._last_token_at[request]
            self._max_gap[request] = gap if math.isnan(self._max_gap[request]) else max(self._max_gap[request], gap)
        self._last_token_at[request] = now
        self._delivered[request] += 1
        if self._delivered[request] >= self._output[request]:
            decode.held -= int(self._blocks[request])
            self._blocks[request] = 0
            self._complete(request, decode)
            self._try_admit()
            if self._draining:
                self._check_drained(decode)
                self._check_drained(source)
            return
        self._state[request] = _JOINING
        decode.joiners.append(request)
        run = decode.run
        if run is None:
            self._start_run(decode)
        elif run.start == now and decode.ids.size < self.max_decode_batch:
            self._start_run(decode)  # no iteration done yet: begin again with the newcomer
        elif decode.ids.size < self.max_decode_batch:
            k = run.first_boundary_from(now, decode.run_end_k)
            if k < decode.run_end_k:
                decode.run_end_k = k
                decode.run_peak = self._member_blocks(decode, k - 1)
                decode.token += 1
                self._schedule(run.boundary(k), _RUN_END, decode, decode.token)
        if self._draining:
            self._check_drained(source)

    # ------------------------------------------------------------------ decode

    def _start_run(self, decode: _Decode) -> None:
        """Begin a run at now: preempted requests come back first (when their blocks fit),
        then joiners fill free slots (FIFO); the batch is fixed. If the batch would run out
        of blocks before its first departure, the run ends at that iteration, where the most
        recently arrived members are preempted (`_preempt`)."""
        room = self.max_decode_batch - decode.ids.size
        delay, decode.delay = decode.delay, 0.0
        newcomers: list[int] = []
        if (decode.resume or decode.joiners) and room > 0:
            free = decode.blocks - decode.held - (self._member_blocks(decode, 0) if decode.resume and decode.ids.size else 0)
            while decode.resume and room > 0:
                request = decode.resume[0]
                context = int(self._input[request] + self._delivered[request])
                need = -(-context // self.block_tokens)
                if need > decode.blocks:
                    # a sequence longer than the whole cache cannot go on (vLLM refuses a
                    # sequence beyond its cache): it stays unfinished
                    decode.resume.popleft()
                    self._state[request] = _PARKED
                    self._decode_of.pop(request, None)
                    if self._swapped[request]:
                        decode.swapped -= need
                        self._swapped[request] = False
                    continue
                if need > free:
                    break
                decode.resume.popleft()
                free -= need
                room -= 1
                newcomers.append(request)
                if self._swapped[request]:  # swap in: host memory -> HBM over PCIe
                    decode.swapped -= need
                    self._swapped[request] = False
                    delay += self._swap_seconds(decode, context)
                else:  # recompute the lost KV: a prefill of the prompt and the tokens so far
                    delay += roofline.prefill_seconds(self.model, self.gpu, self._layout(decode.info.gpus), context)
            while decode.joiners and room > 0:
                request = decode.joiners.popleft()
                decode.held -= int(self._blocks[request])
                self._blocks[request] = 0
                room -= 1
                newcomers.append(request)
        if newcomers:
            ids = np.asarray(newcomers, dtype=np.int64)
            self._state[ids] = _DECODING
            decode.ids = np.concatenate([decode.ids, ids])
            delivered = self._delivered[ids]
            decode.remaining = np.concatenate([decode.remaining, self._output[ids] - delivered])
            decode.context = np.concatenate([decode.context, self._input[ids] + delivered])
        available = decode.blocks - decode.held
        preempted = False
        end_need = -1
        first_departure = 0  # iterations until the first member finishes
        if decode.ids.size:
            first_departure = int(decode.remaining.min())
            end_need = self._member_blocks(decode, first_departure - 1)
            if end_need > available:  # else every iteration of the run fits (the need only grows)
                end_need = -1
                while decode.ids.size and self._member_blocks(decode, 0) > available:
                    delay += self._preempt(decode)
                    preempted = True
        if decode.ids.size == 0:
            decode.run = None
            decode.run_peak = 0
            if preempted and decode.resume and decode.held == 0:
                self._start_run(decode)  # all preempted with nothing else holding blocks: retry alone (or park)
            return
        batch = int(decode.ids.size)
        context = int(decode.context.sum())
        key = (decode.info.gpus, batch)
        if key not in self._decode_parts:
            self._decode_parts[key] = roofline.decode_step_parts(self.model, self.gpu, self._layout(decode.info.gpus), batch)
        fixed, per_token = self._decode_parts[key]  # an iteration takes fixed + per_token x context
        decode.run = BatchRun(
            start=self.now + delay,
            batch=batch,
            context=context,
            base=fixed + per_token * context,
            slope=per_token * batch,
            floor=0.0,
        )
        if preempted:
            first_departure = int(decode.remaining.min())  # the batch changed
        end_k = first_departure
        if end_need < 0 and self._member_blocks(decode, end_k - 1) > available:
            # the first iteration that would need more blocks than there are ends the run
            low, high = 0, end_k - 1  # fits at low, not at high
            while high - low > 1:
                middle = (low + high) // 2
                if self._member_blocks(decode, middle) > available:
                    high = middle
                else:
                    low = middle
            end_k = high
        decode.run_end_k = end_k
        decode.run_departure = first_departure
        decode.run_peak = end_need if end_need >= 0 else self._member_blocks(decode, end_k - 1)
        decode.token += 1
        self._schedule(decode.run.boundary(decode.run_end_k), _RUN_END, decode, decode.token)

    def _run_end(self, decode: _Decode, token: int) -> None:
        if token != decode.token or not math.isnan(decode.left_at):
            return
        # the run's last iteration held the most blocks: held + run_peak (exactly, at this boundary)
        decode.peak_blocks = max(decode.peak_blocks, decode.held + decode.run_peak)
        finished = self._iterate(decode, decode.run_end_k)
        for request in finished:
            self._complete(int(request), decode)
        self._start_run(decode)
        if len(finished):
            self._try_admit()
        if self._draining:
            self._check_drained(decode)

    def _preempt(self, decode: _Decode) -> float:
        """Preempt the most recently arrived member (vLLM's FCFS victim): its blocks are
        freed (recompute) or copied to host memory (swap, when the swap space holds them;
        else recompute). It waits at the front of the replica's queue. Returns the engine
        seconds the preemption costs now (a swap-out)."""
        position = int(np.argmax(decode.ids))
        request = int(decode.ids[position])
        keep = np.ones(decode.ids.size, bool)
        keep[position] = False
        decode.ids = decode.ids[keep]
        decode.remaining = decode.remaining[keep]
        decode.context = decode.context[keep]
        self._preemptions[request] += 1
        self._state[request] = _PREEMPTED
        decode.resume.appendleft(request)
        context = int(self._input[request] + self._delivered[request])
        blocks = -(-context // self.block_tokens)
        if self.preemption == "swap" and decode.swapped + blocks <= decode.swap_blocks:
            decode.swapped += blocks
            self._swapped[request] = True
            return self._swap_seconds(decode, context)
        return 0.0

    def _swap_seconds(self, decode: _Decode, tokens: int) -> float:
        """Copying `tokens` of KV between HBM and host memory, each GPU its shard over its own PCIe link."""
        return tokens * self._kv_bytes / (decode.info.gpus * self.swap_gbps * 1e9)

    def _iterate(self, decode: _Decode, k: int) -> np.ndarray:
        """Apply k iterations of the current run: deliver tokens, return (and drop) finished requests."""
        run = decode.run
        assert run is not None
        end = run.boundary(k)
        decode.runs.append((run, k))
        decode.ends.append(end)
        decode.total_tokens += run.batch * k
        if k == 0:
            return np.zeros(0, np.int64)
        ids = decode.ids
        first_gap = run.start + run.step(0) - self._last_token_at[ids]
        gaps = np.maximum(first_gap, run.step(k - 1)) if k >= 2 else first_gap
        self._max_gap[ids] = np.fmax(self._max_gap[ids], gaps)
        self._last_token_at[ids] = end
        self._delivered[ids] += k
        decode.remaining -= k
        decode.context += k
        if k < decode.run_departure:  # no member's last iteration yet (saves a scan of the batch)
            return np.zeros(0, np.int64)
        done = decode.remaining == 0
        keep = ~done
        finished = ids[done]
        decode.ids = ids[keep]
        decode.remaining = decode.remaining[keep]
        decode.context = decode.context[keep]
        return finished

    def _complete(self, request: int, decode: _Decode) -> None:
        now = self.now
        self._state[request] = _DONE
        self._decode_of.pop(request, None)
        e2e = now - self._arrival[request]
        self._e2e[request] = e2e
        outputs = int(self._output[request])
        if outputs > 1:
            itl = (e2e - self._ttft[request]) / (outputs - 1)
            self._itl[request] = itl
            self._done_at.append(now)
            self._done_itl.append(float(itl))

    # ------------------------------------------------------------------ replicas joining and leaving

    def _join(self, info: ReplicaInfo) -> None:
        index = len(self._replicas)
        if info.kind == "prefill":
            capacity = roofline.kv_capacity_tokens(self.model, self.gpu, info.gpus)  # the weights must fit
            prefill = _Prefill(info=info, index=index, joined_at=self.now, cache_blocks=capacity // self.prefix_block_tokens)
            self._prefills[info.id] = prefill
            self._replicas.append(prefill)
            return
        gpus = info.gpus
        capacity = roofline.kv_capacity_tokens(self.model, self.gpu, gpus)
        decode = _Decode(
            info=info,
            index=index,
            joined_at=self.now,
            capacity=capacity,
            blocks=capacity // self.block_tokens,
            swap_blocks=int(self.swap_space_gib * 2**30 * gpus / self._kv_bytes) // self.block_tokens,
        )
        self._decodes[info.id] = decode
        self._replicas.append(decode)

    def _restart(self, request: int) -> None:
        """The request lost work: it goes back to the router and is prefilled again."""
        self._restarts[request] += 1
        self._generation[request] += 1
        self._state[request] = _ROUTER
        source = self._prefill_of.pop(request, None)
        if source is not None:
            source.holding.discard(request)
        target = self._decode_of.pop(request, None)
        self._in_flight.pop(request, None)
        if target is not None:
            target.held -= int(self._blocks[request])
            target.transferring.discard(request)
        self._blocks[request] = 0
        self._progress[request] = 0
        self._hit[request] = 0
        self._swapped[request] = False

    def _leave_prefill(self, replica: _Prefill) -> list[int]:
        replica.left_at = self.now
        replica.token += 1
        back = []
        for request in replica.queue:
            if self._progress[request] > self._hit[request]:  # a chunk of it was computed here: lost
                self._restart(request)
            self._progress[request] = self._hit[request] = 0
            back.append(request)
        if replica.busy:
            # the part of the batch done so far counts as work done, for throughput and busy time
            replica.starts.append(replica.batch_start)
            replica.ends.append(self.now)
            done = self.now - replica.batch_start
            span = replica.batch_end - replica.batch_start
            partial = int(round(replica.batch_tokens * done / span)) if span > 0 else 0
            replica.tokens.append(partial)
            replica.total_tokens += partial
        running = replica.batch + ([replica.partial] if replica.partial >= 0 else [])
        for request in running:
            self._restart(request)
            back.append(request)
        for request in sorted(replica.holding):
            self._restart(request)
            back.append(request)
        for request in back:
            self._state[request] = _ROUTER
        replica.queue.clear()
        replica.busy = False
        replica.batch = []
        replica.partial = -1
        replica.outstanding = 0
        return back

    def _leave_decode(self, decode: _Decode) -> list[int]:
        decode.left_at = self.now
        decode.token += 1
        run = decode.run
        if run is not None:
            done = run.done_by(self.now, decode.run_end_k - 1)
            self._iterate(decode, done)  # tokens delivered before it went; none finishes here
            decode.ends[-1] = self.now  # busy until now, in an iteration whose tokens are lost
            decode.run = None
        lost = sorted(set(decode.ids.tolist()) | set(decode.joiners) | decode.transferring | set(decode.resume))
        for request in lost:
            self._restart(request)
        decode.ids = np.zeros(0, np.int64)
        decode.remaining = np.zeros(0, np.int64)
        decode.context = np.zeros(0, np.int64)
        decode.joiners.clear()
        decode.resume.clear()
        decode.held = decode.run_peak = decode.swapped = 0
        return lost

    def _idle(self, replica: _Prefill | _Decode) -> bool:
        if isinstance(replica, _Prefill):
            return not (replica.busy or replica.queue or replica.holding or replica.starting)
        return not (replica.ids.size or replica.joiners or replica.transferring or replica.resume)

    def _check_drained(self, replica: _Prefill | _Decode) -> None:
        """A draining replica with nothing left leaves."""
        if self._draining.get(replica.info.id) is replica and self._idle(replica):
            del self._draining[replica.info.id]
            if isinstance(replica, _Prefill):
                self._leave_prefill(replica)
            else:
                self._leave_decode(replica)

    def _end_drain(self, replica: _Prefill | _Decode) -> list[int]:
        """A draining replica's grace period is over: it goes, and what it still held goes
        back to the router (counted in `drain_requeued`)."""
        del self._draining[replica.info.id]
        back = self._leave_prefill(replica) if isinstance(replica, _Prefill) else self._leave_decode(replica)
        for request in back:
            self._drain_requeued[request] += 1
        return back

    def _drain_end(self, replica: _Prefill | _Decode, token: int) -> None:
        if self._draining.get(replica.info.id) is not replica or token != replica.drain_token:
            return
        self._sample()
        back = self._end_drain(replica)
        self._router.extendleft(reversed(sorted(back)))
        self._rebuild_pools()
        self._dispatch_router()
        self._try_admit()

    # ------------------------------------------------------------------ measurements

    def signals(self, now: float, window_s: float) -> Signals:
        """Load figures over (now - window_s, now], roles keyed "prefill" and "decode"."""
        if not window_s > 0:
            raise ValueError(f"window_s must be > 0, got {window_s}")
        self.advance(now)
        start = now - window_s
        prefills = list(self._prefills.values())
        decodes = list(self._decodes.values())
        tokens = {"prefill": 0.0, "decode": 0.0}
        busy: dict[str, list[float]] = {"prefill": [], "decode": []}
        for replica in self._replicas:
            if not (replica.left_at <= start):  # NaN (present) or left within the window
                seconds, count = replica.work(start, now)
                tokens[replica.info.kind] += count
                if math.isnan(replica.left_at) and replica.info.id not in self._draining:
                    begin = max(start, replica.joined_at)
                    busy[replica.info.kind].append(min(1.0, seconds / (now - begin)) if now > begin else 0.0)
        roles = {
            "prefill": RoleSignals(
                replicas=len(prefills),
                queue_depth=float(len(self._router) + sum(len(r.queue) for r in prefills)),
                busy_fraction=_mean(busy["prefill"]),
                kv_utilization=math.nan,
                tokens_per_s=tokens["prefill"] / window_s,
            ),
            "decode": RoleSignals(
                replicas=len(decodes),
                queue_depth=float(
                    sum(len(pool) for pool in self._pools.values())
                    + len(self._parked)
                    + sum(len(d.joiners) + len(d.resume) for d in decodes)
                ),
                busy_fraction=_mean(busy["decode"]),
                kv_utilization=_mean([self.allocated_blocks(d) / d.blocks for d in decodes]),
                tokens_per_s=tokens["decode"] / window_s,
            ),
        }
        low = int(np.searchsorted(self._arrival, start, side="right"))
        high = int(np.searchsorted(self._arrival, now, side="right"))
        signals = Signals(
            at=now,
            window_s=window_s,
            roles=roles,
            arrival_rate=(high - low) / window_s,
            input_tokens_per_s=float(self._input[low:high].sum()) / window_s,
            output_tokens_per_s=float(self._output[low:high].sum()) / window_s,
            ttft_p90_s=_p90_since(self._ttft_at, self._ttft_values, start),
            itl_p90_s=_p90_since(self._done_at, self._done_itl, start),
        )
        self._sample()
        return signals

    def sample(self, now: float) -> None:
        """Record each Ready replica's figures over the interval since the last sample."""
        self.advance(now)
        self._sample()

    def _sample(self) -> None:
        now = self.now
        start = self._last_sample_at
        span = now - start
        columns = self._samples
        present = list(self._prefills.values()) + list(self._decodes.values()) + list(self._draining.values())
        for replica in sorted(present, key=lambda r: r.index):
            busy, tokens = replica.work(start, now)
            if isinstance(replica, _Prefill):
                queue, kv = len(replica.queue), math.nan
            else:
                assert isinstance(replica, _Decode)
                queue, kv = len(replica.joiners) + len(replica.resume), self.allocated_blocks(replica) / replica.blocks
            begin = max(start, replica.joined_at)
            columns["at"].append(now)
            columns["replica"].append(replica.index)
            columns["queue"].append(queue)
            columns["kv"].append(kv)
            columns["tokens_per_s"].append(tokens / span if span > 0 else math.nan)
            columns["busy"].append(min(1.0, busy / (now - begin)) if now > begin else math.nan)
        self._last_sample_at = now

    def results(self) -> ServingResults:
        """Everything measured so far; requests not finished have NaN e2e/ITL and completed False."""
        replicas = self._replicas
        completed = self._state == _DONE
        columns = self._samples
        return ServingResults(
            arrival_s=self._arrival.copy(),
            input_tokens=self._input.copy(),
            output_tokens=self._output.copy(),
            ttft_s=self._ttft.copy(),
            itl_s=np.where(completed, self._itl, math.nan),
            max_itl_s=np.where(completed, self._max_gap, math.nan),
            e2e_s=np.where(completed, self._e2e, math.nan),
            kv_transfer_s=self._transfer_s.copy(),
            prefill_s=self._prefill_s.copy(),
            prefill_replica=self._prefill_replica.copy(),
            decode_replica=self._decode_replica.copy(),
            restarts=self._restarts.copy(),
            completed=completed,
            preemptions=self._preemptions.copy(),
            cached_tokens=self._cached.copy(),
            prefilled_tokens=self._queried.copy(),
            drain_requeued=self._drain_requeued.copy(),
            replica_ids=tuple(r.info.id for r in replicas),
            replica_kinds=tuple(r.info.kind for r in replicas),
            replica_units=np.array([r.info.unit for r in replicas], dtype=np.int64),
            replica_gpus=np.array([r.info.gpus for r in replicas], dtype=np.int64),
            replica_joined_s=np.array([r.joined_at for r in replicas], dtype=float),
            replica_left_s=np.array([r.left_at for r in replicas], dtype=float),
            replica_drain_s=np.array([r.drain_at for r in replicas], dtype=float),
            replica_kv_capacity_tokens=np.array([r.capacity if isinstance(r, _Decode) else 0 for r in replicas], dtype=np.int64),
            replica_peak_kv_utilization=np.array(
                [r.peak_blocks / r.blocks if isinstance(r, _Decode) else math.nan for r in replicas], dtype=float
            ),
            replica_tokens=np.array([r.total_tokens for r in replicas], dtype=float),
            samples=ReplicaSamples(
                at_s=np.array(columns["at"], dtype=float),
                replica=np.array(columns["replica"], dtype=np.int64),
                queue_depth=np.array(columns["queue"], dtype=np.int64),
                kv_utilization=np.array(columns["kv"], dtype=float),
                tokens_per_s=np.array(columns["tokens_per_s"], dtype=float),
                busy_fraction=np.array(columns["busy"], dtype=float),
            ),
            ttft_slo_s=self.ttft_slo_s,
            itl_slo_s=self.itl_slo_s,
        )


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def _p90_since(times: list[float], values: list[float], start: float) -> float:
    """p90 of the values logged after `start` (the logs are in time order)."""
    first = bisect.bisect_right(times, start)
    if first >= len(values):
        return math.nan
    return float(np.percentile(values[first:], 90))
