"""The request table: one row per request, one named numpy column per figure.

Columns rather than an object per request because the decode stage updates a whole batch
at once (`delivered[ids] += k`) and the results are these arrays. `Requests.state` (a
list of `RequestState`) names the step of the path each request is at (the package
docstring walks through them); `Requests.row` reads one request's figures as a record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Sequence

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from tandem.sim.serving.replicas import DecodeReplica, PrefillReplica

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


class RequestState(IntEnum):
    """Where a request is on its path (`Requests.state`)."""

    PENDING = 0  # not arrived yet
    ROUTER = 1  # arrived, or restarted: waits for a prefill replica
    QUEUED = 2  # in a prefill replica's queue
    PREFILLING = 3  # in a running prefill batch
    WAITING_KV = 4  # prefilled: its KV waits on the prefill replica in an admission pool
    PARKED = 5  # needs more KV than any decode replica holds: waits for the replica set to change
    TRANSFERRING = 6  # its KV is on the way to its decode replica
    JOINING = 7  # on its decode replica: waits for an iteration boundary or a batch slot
    DECODING = 8  # in a decode replica's running batch
    DONE = 9  # every output token delivered
    PREEMPTED = 10  # out of the running batch for want of KV blocks: waits to resume


@dataclass(frozen=True)
class RequestRow:
    """One request's figures, as `Requests.row` reads them."""

    index: int
    state: RequestState
    arrival_s: float
    input_tokens: int
    output_tokens: int
    delivered: int
    ttft_s: float
    e2e_s: float
    restarts: int
    preemptions: int
    prefill_replica: int
    decode_replica: int


class Requests:
    """Every request added so far; a request is its row index. The numpy columns are
    replaced (not grown in place) when requests are added: read them through the table."""

    def __init__(self) -> None:
        # the trace
        self.arrival: Floats = np.zeros(0)
        self.input: Ints = np.zeros(0, np.int64)
        self.output: Ints = np.zeros(0, np.int64)
        self.hashes: list[tuple[int, ...]] = []  # prefix-block ids of the prompt (empty: none known)
        self.prefix_block_tokens = 512  # tokens per prefix block of `hashes`
        # where it is
        self.state: list[RequestState] = []  # a list: it is read and written one request at a time
        self.generation: Ints = np.zeros(0, np.int64)  # bumped on restart: cancels a pending transfer
        self.prefill_of: dict[int, PrefillReplica] = {}  # where its KV is computed or held
        self.decode_of: dict[int, DecodeReplica] = {}  # where its KV goes or is
        # prefill
        self.progress: Ints = np.zeros(0, np.int64)  # prompt tokens whose KV exists (cache hits + chunks done)
        self.hit: Ints = np.zeros(0, np.int64)  # prefix-cache hit of the current prefill attempt
        self.ready_at: Floats = np.zeros(0)  # when prefill finished (admission order)
        # decode
        self.delivered: Ints = np.zeros(0, np.int64)  # output tokens delivered
        self.blocks: Ints = np.zeros(0, np.int64)  # decode KV blocks held outside a running batch
        self.swapped: npt.NDArray[np.bool_] = np.zeros(0, bool)  # preempted by swapping (its KV is in host memory)
        self.last_token_at: Floats = np.zeros(0)
        # measured (the results)
        self.ttft: Floats = np.zeros(0)
        self.e2e: Floats = np.zeros(0)
        self.itl: Floats = np.zeros(0)
        self.max_gap: Floats = np.zeros(0)
        self.transfer_s: Floats = np.zeros(0)
        self.prefill_s: Floats = np.zeros(0)
        self.prefill_replica: Ints = np.zeros(0, np.int64)  # results index of the last prefill replica
        self.decode_replica: Ints = np.zeros(0, np.int64)
        self.restarts: Ints = np.zeros(0, np.int64)
        self.cached: Ints = np.zeros(0, np.int64)  # prompt tokens served from the prefix cache, all attempts
        self.prefilled: Ints = np.zeros(0, np.int64)  # prompt tokens prefilled, all attempts (hits included)
        self.preemptions: Ints = np.zeros(0, np.int64)
        self.drain_requeued: Ints = np.zeros(0, np.int64)  # sent back when a draining replica's grace ran out
        # logs for the signals' p90s, in time order
        self.ttft_at: list[float] = []
        self.ttft_values: list[float] = []
        self.done_at: list[float] = []
        self.done_itl: list[float] = []

    def __len__(self) -> int:
        return int(self.arrival.size)

    def append(
        self,
        arrival: Floats,
        inputs: npt.NDArray[np.integer] | Floats,
        outputs: npt.NDArray[np.integer] | Floats,
        hashes: Sequence[tuple[int, ...]],
    ) -> None:
        """Add rows (checked by the caller), every request pending."""
        n = arrival.size
        self.hashes += hashes
        self.arrival = np.concatenate([self.arrival, arrival])
        self.input = np.concatenate([self.input, inputs.astype(np.int64)])
        self.output = np.concatenate([self.output, outputs.astype(np.int64)])
        self.state += [RequestState.PENDING] * n
        for name, fill, dtype in (
            ("delivered", 0, np.int64),
            ("ttft", math.nan, float),
            ("e2e", math.nan, float),
            ("itl", math.nan, float),
            ("last_token_at", math.nan, float),
            ("max_gap", math.nan, float),
            ("transfer_s", 0.0, float),
            ("prefill_s", 0.0, float),
            ("prefill_replica", -1, np.int64),
            ("decode_replica", -1, np.int64),
            ("restarts", 0, np.int64),
            ("generation", 0, np.int64),
            ("ready_at", math.nan, float),
            ("blocks", 0, np.int64),
            ("progress", 0, np.int64),
            ("hit", 0, np.int64),
            ("cached", 0, np.int64),
            ("prefilled", 0, np.int64),
            ("preemptions", 0, np.int64),
            ("swapped", False, bool),
            ("drain_requeued", 0, np.int64),
        ):
            setattr(self, name, np.concatenate([getattr(self, name), np.full(n, fill, dtype)]))

    def row(self, request: int) -> RequestRow:
        """One request's figures (for a reader or a test; the model itself reads the columns)."""
        return RequestRow(
            index=request,
            state=self.state[request],
            arrival_s=float(self.arrival[request]),
            input_tokens=int(self.input[request]),
            output_tokens=int(self.output[request]),
            delivered=int(self.delivered[request]),
            ttft_s=float(self.ttft[request]),
            e2e_s=float(self.e2e[request]),
            restarts=int(self.restarts[request]),
            preemptions=int(self.preemptions[request]),
            prefill_replica=int(self.prefill_replica[request]),
            decode_replica=int(self.decode_replica[request]),
        )

    def prompt(self, request: int) -> int:
        """Tokens to prefill: the prompt plus whatever was delivered before a restart."""
        return int(self.input[request] + self.delivered[request])

    def complete(self, request: int, now: float) -> None:
        """Its last token is out: end-to-end latency and mean inter-token latency."""
        self.state[request] = RequestState.DONE
        self.decode_of.pop(request, None)
        e2e = now - self.arrival[request]
        self.e2e[request] = e2e
        outputs = int(self.output[request])
        if outputs > 1:
            itl = (e2e - self.ttft[request]) / (outputs - 1)
            self.itl[request] = itl
            self.done_at.append(now)
            self.done_itl.append(float(itl))
