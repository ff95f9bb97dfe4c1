"""Prefill batching: each prefill replica runs FCFS batches of its queue.

A batch takes whole prompts up to `max_prefill_batch_tokens` (a longer prompt runs alone),
or with chunked prefill exactly that budget, the last prompt cut into a chunk that goes
back to the front of the queue. Tokens the replica's prefix cache holds are not computed.
A batch's requests are finished together when it ends; their KV then waits on the replica
for a decode replica (`admission`).
"""

from __future__ import annotations

import itertools
import math

from tandem.sim.serving.costs import EngineCosts
from tandem.sim.serving.events import Event, EventQueue
from tandem.sim.serving.replicas import PrefillReplica
from tandem.sim.serving.requests import Requests, RequestState


class PrefillStage:
    """Batches on the prefill replicas."""

    def __init__(
        self,
        requests: Requests,
        events: EventQueue,
        costs: EngineCosts,
        *,
        max_batch_tokens: int,
        chunked: bool,
        prefix_caching: bool,
    ) -> None:
        self.requests = requests
        self.events = events
        self.costs = costs
        self.max_batch_tokens = max_batch_tokens
        self.chunked = chunked
        self.prefix_caching = prefix_caching

    def start_batch(self, replica: PrefillReplica) -> None:
        """One prefill iteration, FCFS (step 2 of the path): whole prompts up to the token budget (a
        longer one alone), or with chunked prefill exactly the budget, the last prompt cut
        into a chunk. Tokens served from the prefix cache are not computed and not counted
        in the budget. Schedules the batch's end."""
        replica.starting = False
        queue = replica.queue
        if not queue or replica.busy or not math.isnan(replica.left_at):
            return
        requests = self.requests
        progress = requests.progress
        budget = self.max_batch_tokens
        chunked = self.chunked
        finishing: list[int] = []
        lengths: list[int] = []
        total = prompts = 0
        squares = 0.0
        partial = -1
        while queue:
            request = queue[0]
            prompt = requests.prompt(request)
            done = int(progress[request])
            if done == 0:
                hit = self.cached_prefix(replica, request, prompt)
                requests.hit[request] = hit
                progress[request] = done = hit
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
            progress[request] = done + take
            requests.state[request] = RequestState.PREFILLING
            if done + take < prompt:
                partial = request  # chunked: the budget is spent
                break
            finishing.append(request)
            prompts += prompt
        now = self.events.now
        replica.busy = True
        replica.batch = finishing
        replica.partial = partial
        replica.batch_tokens = total
        replica.batch_prompts = prompts
        replica.batch_start = now
        replica.batch_end = now + self.costs.prefill_batch_seconds(replica.info.gpus, lengths, squares)
        replica.token += 1
        self.events.schedule(replica.batch_end, Event.PREFILL_DONE, replica, replica.token)

    def cached_prefix(self, replica: PrefillReplica, request: int, prompt: int) -> int:
        """Prompt tokens whose KV the replica's prefix cache holds (leading blocks, up to
        the first miss; at least the last token is computed, as vLLM does); the request's
        blocks become the most recently used, the least recently used are evicted."""
        hashes = self.requests.hashes[request]
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
        return min(matched * self.requests.prefix_block_tokens, prompt - 1)

    def finish_batch(self, replica: PrefillReplica) -> list[int]:
        """The batch ended (step 3 of the path): a cut prompt goes back to the front of the queue, the
        finished ones hold their KV here and wait for a decode replica; the next batch
        starts. Returns the finished requests, in batch order."""
        requests = self.requests
        now = self.events.now
        duration = replica.batch_end - replica.batch_start
        if replica.partial >= 0:
            requests.prefill_s[replica.partial] += duration
            requests.state[replica.partial] = RequestState.QUEUED
            replica.queue.appendleft(replica.partial)  # its next chunk goes first
            replica.partial = -1
        finished = replica.batch
        for request in finished:
            requests.prefill_s[request] += duration
            requests.cached[request] += requests.hit[request]
            requests.prefilled[request] += requests.prompt(request)
            requests.progress[request] = 0
            requests.hit[request] = 0
            requests.state[request] = RequestState.WAITING_KV
            requests.ready_at[request] = now
            requests.prefill_of[request] = replica
            requests.prefill_replica[request] = replica.index
            replica.holding.add(request)
        replica.starts.append(replica.batch_start)
        replica.ends.append(replica.batch_end)
        replica.tokens.append(replica.batch_tokens)
        replica.total_tokens += replica.batch_tokens
        replica.outstanding -= replica.batch_prompts
        replica.busy = False
        replica.batch = []
        replica.batch_tokens = replica.batch_prompts = 0
        if replica.queue:
            self.start_batch(replica)
        return finished
