"""The replicas the serving model runs requests on: what the caller states about each
(`ReplicaInfo`), what the model keeps per prefill and decode replica, and the fleet of
them (present, draining, and every one that ever joined, for the results)."""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from tandem.sim.serving.batching import BatchRun
from tandem.sim.serving.requests import Ints

KINDS = ("prefill", "decode")
ANY_UNIT = -1  # the admission pool of units without a decode replica; in `decodes_by_unit`: all of them


@dataclass(frozen=True)
class ReplicaInfo:
    id: str  # stable identity, e.g. "serving/llama-70b/0/prefill/3"
    kind: str  # "prefill" | "decode"
    unit: int  # the group's unit (copy) it belongs to
    gpus: int  # GPUs of the whole replica (all its pods)
    node: str  # node of the replica's leader pod, for bandwidth


@dataclass(eq=False, slots=True)
class Replica:
    info: ReplicaInfo
    index: int  # into the results' replica arrays
    joined_at: float
    left_at: float = math.nan
    token: int = 0  # bumped to cancel the replica's pending event
    drain_token: int = 0  # matches its pending drain-end event
    drain_at: float = math.nan  # when it began to drain
    total_tokens: int = 0  # prefill: prompt tokens processed; decode: tokens generated


@dataclass(eq=False, slots=True)
class PrefillReplica(Replica):
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
            # min(last, end) - max(begin, start), without two calls per batch of the window
            overlap = (last if last <= end else end) - (begin if begin >= start else start)
            if overlap > 0:
                busy += overlap
                tokens += count * overlap / (last - begin)
        return busy, tokens

    def idle(self) -> bool:
        return not (self.busy or self.queue or self.holding or self.starting)


@dataclass(eq=False, slots=True)
class DecodeReplica(Replica):
    capacity: int = 0  # KV tokens
    blocks: int = 0  # KV blocks (capacity // block size)
    held: int = 0  # blocks of requests not in the running batch (transferring in, waiting for a slot)
    run_peak: int = 0  # blocks the running batch holds in the last iteration of its run
    peak_blocks: int = 0
    swap_blocks: int = 0  # swap space (host memory), in blocks
    swapped: int = 0  # blocks swapped out now
    delay: float = 0.0  # engine time owed before the next run (swap-outs)
    resume: deque[int] = field(default_factory=deque)  # preempted, waiting for blocks (front first)
    # the running batch, one entry per member
    ids: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    remaining: Ints = field(default_factory=lambda: np.zeros(0, np.int64))  # iterations left
    context: Ints = field(default_factory=lambda: np.zeros(0, np.int64))  # KV of its next iteration
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
            overlap = (last if last <= end else end) - (run.start if run.start >= start else start)  # as above
            if overlap > 0:
                busy += overlap
                if start <= run.start and last <= end:
                    tokens += run.batch * k
                else:
                    tokens += run.batch * (run.progress(end, k) - run.progress(start, k))
        return busy, tokens

    def idle(self) -> bool:
        return not (self.ids.size or self.joiners or self.transferring or self.resume)


class Fleet:
    """The replicas: those present (by id), those draining, and every one that ever joined."""

    def __init__(self) -> None:
        self.all: list[PrefillReplica | DecodeReplica] = []  # in join order: the results' replica index
        self.prefills: dict[str, PrefillReplica] = {}  # present, by id
        self.decodes: dict[str, DecodeReplica] = {}
        self.decodes_by_unit: dict[int, list[DecodeReplica]] = {}  # present, sorted by id; ANY_UNIT: all
        self.draining: dict[str, PrefillReplica | DecodeReplica] = {}  # left the Ready set, finishing their work

    def regroup(self) -> None:
        """Index the present decode replicas by unit (after the set changed)."""
        by_unit: dict[int, list[DecodeReplica]] = {ANY_UNIT: [self.decodes[i] for i in sorted(self.decodes)]}
        for decode in by_unit[ANY_UNIT]:
            by_unit.setdefault(decode.info.unit, []).append(decode)
        self.decodes_by_unit = by_unit

    def pool_of(self, replica: PrefillReplica) -> int:
        """The admission pool of a request prefilled on `replica`: its unit when the unit has a
        decode replica, else ANY_UNIT."""
        unit = replica.info.unit
        return unit if unit in self.decodes_by_unit and unit != ANY_UNIT else ANY_UNIT
