"""The engine loop of a stand-in: continuous batching of prefill and decode, timed by `timing`.

One thread per engine runs iterations as SGLang's and vLLM's schedulers do, approximately:
waiting prompts first (a prefill iteration takes whole prompts up to the token budget),
else one decode step for every running request (each gets one token). Each iteration
ends the serving model's time for it (times the scale) after the previous one ended, so
the loop's own overhead does not add up over the steps; an idle loop starts afresh. Handlers submit a `Job` and read
its `events` queue: ("token", n) as tokens come, then ("done", n) — n the tokens so far —
or ("error", n) when the engine stopped first: every job submitted, before or after
`close()`, hears back.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from tandem.apiserver.engines import timing
from tandem.apiserver.engines.timing import Timing


@dataclass
class Job:
    prompt: int
    max_new: int
    prefill: bool  # this engine prefills it
    decode: bool  # this engine decodes it (else it ends after its prefill)
    arrived: float = field(default_factory=time.monotonic)
    generated: int = 0
    last_token_at: float = 0.0
    events: "queue.Queue[tuple[str, int]]" = field(default_factory=queue.Queue)

    @property
    def context(self) -> int:
        return self.prompt + self.generated


class EngineLoop:
    def __init__(self, cost: Timing, scale: float, observe: Callable[[str, float], None], name: str,
                 monotonic: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        """`observe(kind, value)`: "prompt_tokens", "generation_tokens" (counts), "ttft",
        "itl" (seconds as measured, scaled); `monotonic` and `sleep` are the loop's clock."""
        self.cost = cost
        self._monotonic, self._sleep = monotonic, sleep
        self.scale = scale
        self.capacity = timing.kv_capacity_tokens(cost)
        self._observe = observe
        self._lock = threading.Condition()
        self._waiting: deque[Job] = deque()
        self._running: list[Job] = []
        self._batch: list[Job] = []  # the prefill iteration in progress (out of `_waiting`, not yet running)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"tandem-engine-{name}", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> None:
        with self._lock:
            if self._closed:  # a stopped engine runs nothing: the job fails at once
                job.events.put(("error", job.generated))
                return
            if job.prefill:
                self._waiting.append(job)
            else:  # its KV came from a prefill engine, with its first token
                self._first_token(job, self._monotonic())
                if job.generated >= job.max_new:
                    job.events.put(("done", job.generated))
                else:
                    self._running.append(job)
            self._lock.notify_all()

    def load(self) -> tuple[int, int, int]:
        """(waiting, running, KV tokens held) now."""
        with self._lock:
            return len(self._waiting), len(self._running) + len(self._batch), sum(j.context for j in self._running)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for job in [*self._waiting, *self._batch, *self._running]:
                job.events.put(("error", job.generated))
            self._waiting.clear()
            self._batch = []
            self._running.clear()
            self._lock.notify_all()

    def _run(self) -> None:
        deadline: float | None = None  # when the last iteration was due to end
        while True:
            with self._lock:
                if not self._closed and not self._waiting and not self._running:
                    deadline = None  # idle: the next iteration starts when work comes
                while not self._closed and not self._waiting and not self._running:
                    self._lock.wait()
                if self._closed:
                    return
                if self._waiting:
                    count = timing.prefill_batch([j.prompt for j in self._waiting])
                    batch = self._batch = [self._waiting.popleft() for _ in range(count)]
                    seconds = timing.prefill_seconds(self.cost, [j.prompt for j in batch])
                    decoding: list[Job] = []
                else:
                    batch, decoding = [], list(self._running)
                    seconds = timing.decode_step_seconds(self.cost, len(decoding), sum(j.context for j in decoding))
            step, now = seconds * self.scale, self._monotonic()
            deadline = next_deadline(deadline, now, step)
            self._sleep(max(deadline - now, 0.0))
            now = self._monotonic()
            with self._lock:
                if self._closed:  # close() failed the batch and everything else
                    return
                self._batch = []
                for job in batch:
                    self._observe("prompt_tokens", job.prompt)
                    self._first_token(job, now)
                    if job.decode and job.generated < job.max_new:
                        self._running.append(job)
                    else:
                        job.events.put(("done", job.generated))
                for job in decoding:
                    job.generated += 1
                    self._observe("generation_tokens", 1)
                    self._observe("itl", now - job.last_token_at)
                    job.last_token_at = now
                    job.events.put(("token", job.generated))
                    if job.generated >= job.max_new:
                        self._running.remove(job)
                        job.events.put(("done", job.generated))

    def _first_token(self, job: Job, now: float) -> None:
        job.generated = 1
        job.last_token_at = now
        if job.decode:
            self._observe("generation_tokens", 1)
        self._observe("ttft", now - job.arrived)
        job.events.put(("token", 1))


def next_deadline(previous: float | None, now: float, step: float) -> float:
    """When an iteration of `step` seconds starting `now` is due to end: `step` after the
    previous one's deadline, so time the loop spends between iterations does not add up;
    from `now` after an idle spell (`previous` None) or when it fell more than a step behind."""
    start = previous if previous is not None and previous >= now - step else now
    return start + step
