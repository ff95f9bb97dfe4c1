"""Routing a prefilled request to a decode replica (admission).

The request needs a decode replica of its prefill replica's unit when that unit has any,
else of any unit. Among those with room for its KV, it takes the least loaded (in steps
of DECODE_LOAD_STEP sequences), then the nearest (highest bandwidth to the prefill
node), then the one with the most free KV blocks, then the lowest id; the blocks are
reserved and the KV transfer starts. Requests without room wait in FIFO pools, one per
unit and one for "any unit"; a request never overtakes an earlier one of its pool. One
that needs more KV than any candidate holds when empty is parked until the replica set
changes.
"""

from __future__ import annotations

from collections import deque

from tandem.sim.serving.replicas import DecodeReplica, Fleet, PrefillReplica
from tandem.sim.serving.requests import Requests, RequestState
from tandem.sim.serving.transfer import KvTransfers

# The router counts a decode replica's load in steps of this many sequences (running,
# waiting for a slot, or being transferred to it) before it looks at distance.
DECODE_LOAD_STEP = 8


class Admission:
    """The admission pools and the choice of decode replica."""

    def __init__(self, requests: Requests, fleet: Fleet, transfers: KvTransfers, *, block_tokens: int) -> None:
        self.requests = requests
        self.fleet = fleet
        self.transfers = transfers
        self.block_tokens = block_tokens
        self.pools: dict[int, deque[int]] = {}  # unit (or ANY_UNIT) -> requests in prefill-end order
        self.parked: list[int] = []  # too large for every candidate

    def waiting(self) -> int:
        """Requests prefilled and not yet sent to a decode replica."""
        return sum(len(pool) for pool in self.pools.values()) + len(self.parked)

    def enqueue(self, request: int, replica: PrefillReplica) -> None:
        """A request prefilled on `replica` waits in its unit's pool."""
        self.pools.setdefault(self.fleet.pool_of(replica), deque()).append(request)

    def regroup(self) -> None:
        """Sort the waiting and parked requests into the pools again (after the replica set changed)."""
        requests = self.requests
        waiting = [r for pool in self.pools.values() for r in pool] + self.parked
        waiting = [r for r in waiting if requests.state[r] in (RequestState.WAITING_KV, RequestState.PARKED)]
        waiting.sort(key=lambda r: (requests.ready_at[r], r))
        self.pools = {}
        self.parked = []
        for request in waiting:
            requests.state[request] = RequestState.WAITING_KV
            self.enqueue(request, requests.prefill_of[request])

    def blocks_needed(self, request: int) -> int:
        """KV blocks a decode replica allocates when the request's KV is sent to it: its
        context once the first token is out (prompt + tokens delivered + 1). Nothing is
        reserved for the answer: blocks are added as tokens are generated."""
        requests = self.requests
        return -(-int(requests.input[request] + requests.delivered[request] + 1) // self.block_tokens)

    def admit(self) -> None:
        """Start transfers for waiting requests (step 4 of the path), oldest head of any unblocked pool first."""
        blocked: set[int] = set()
        pools = self.pools
        ready_at = self.requests.ready_at
        while True:
            chosen = -1
            best_key: tuple[float, int] | None = None
            for key, pool in pools.items():
                if pool and key not in blocked:
                    head = pool[0]
                    order = (ready_at[head], head)
                    if best_key is None or order < best_key:
                        best_key, chosen = order, key
            if best_key is None:
                return
            pool = pools[chosen]
            request = pool[0]
            candidates = self.fleet.decodes_by_unit.get(chosen, [])
            need = self.blocks_needed(request)
            source = self.requests.prefill_of[request]
            target = self.choose_decode(source, candidates, need)
            if target is None:
                if candidates and need > max(decode.blocks for decode in candidates):
                    pool.popleft()
                    self.requests.state[request] = RequestState.PARKED
                    self.parked.append(request)
                else:
                    blocked.add(chosen)
                continue
            pool.popleft()
            self.transfers.start(request, source, target, need)

    def choose_decode(self, source: PrefillReplica, candidates: list[DecodeReplica], need: int) -> DecodeReplica | None:
        """Among the candidates with `need` free blocks: load first, in steps of
        DECODE_LOAD_STEP sequences, then the nearest, then the most room. Near decode wins
        among replicas about as busy, and a far one is used before a near one runs ahead of it."""
        node = source.info.node
        links = self.transfers.links_from(node)  # the bandwidths looked up so far (a hot loop: no call per candidate)
        target: DecodeReplica | None = None
        target_rank: tuple[int, float, int, str] | None = None
        for decode in candidates:
            free = decode.blocks - decode.held - decode.run_peak
            if free >= need:
                # sequences it runs or has taken on: running, waiting for a slot, arriving, preempted
                load = (decode.ids.size + len(decode.joiners) + len(decode.transferring) + len(decode.resume)) // DECODE_LOAD_STEP
                link = links.get(decode.info.node)
                if link is None:
                    link = self.transfers.bandwidth(node, decode.info.node)
                rank = (load, -link, -free, decode.info.id)
                if target_rank is None or rank < target_rank:
                    target, target_rank = decode, rank
        return target
