"""A client load through a router: streaming requests sent from threads, each one's time to
first token, mean inter-token latency and outcome recorded.

The router is a real one (SGLang's model gateway) and the engines behind it the local API
server's stand-ins; this side only speaks HTTP to one address on 127.0.0.0/8. Times are
the client's: `time.monotonic()` at send, at the first streamed token, at the last.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Outcome:
    started: float  # monotonic
    ok: bool
    ttft_s: float | None = None
    itl_s: float | None = None  # mean gap between streamed tokens after the first
    tokens: int = 0
    error: str = ""


def generate(url: str, prompt_tokens: int, output_tokens: int, timeout: float = 60.0) -> Outcome:
    """One streaming SGLang `/generate` through `url` (the router): a prompt of
    `prompt_tokens` words, `output_tokens` new tokens, ignoring EOS."""
    body = {
        "text": " ".join(["tandem"] * prompt_tokens),
        "sampling_params": {"max_new_tokens": output_tokens, "ignore_eos": True, "temperature": 0},
        "stream": True,
    }
    parts = urlsplit(url)
    started = time.monotonic()
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.request("POST", "/generate", json.dumps(body), {"Content-Type": "application/json"})
        answer = connection.getresponse()
        if answer.status != 200:
            return Outcome(started, False, error=f"HTTP {answer.status}: {answer.read()[:200]!r}")
        stamps: list[float] = []
        seen = 0
        for raw in answer:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            chunk = json.loads(data)
            if "error" in chunk:
                return Outcome(started, False, error=str(chunk["error"])[:200])
            count = _completion_tokens(chunk)
            now = time.monotonic()
            # a chunk may carry several tokens: each counts at the chunk's arrival
            stamps += [now] * max(count - seen, 0)
            seen = max(seen, count)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return Outcome(started, False, error=f"{type(exc).__name__}: {exc}")
    finally:
        connection.close()
    if len(stamps) < output_tokens:
        return Outcome(started, False, tokens=len(stamps), error=f"{len(stamps)} of {output_tokens} tokens")
    itl = (stamps[-1] - stamps[0]) / (len(stamps) - 1) if len(stamps) > 1 else None
    return Outcome(started, True, stamps[0] - started, itl, len(stamps))


def _completion_tokens(chunk: dict[str, Any]) -> int:
    meta = chunk.get("meta_info") or {}
    if "completion_tokens" in meta:
        return int(meta["completion_tokens"])
    return len(chunk.get("output_ids") or []) or 1


@dataclass
class Load:
    """`workers` threads sending requests one after another until stopped (or each has sent
    `per_worker`, when given)."""

    url: str
    workers: int
    prompt_tokens: int
    output_tokens: int
    per_worker: int | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> "Load":
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(self.workers)]
        for thread in self._threads:
            thread.start()
        return self

    def _run(self) -> None:
        sent = 0
        while not self._stop.is_set() and (self.per_worker is None or sent < self.per_worker):
            outcome = generate(self.url, self.prompt_tokens, self.output_tokens)
            sent += 1
            with self._lock:
                self.outcomes.append(outcome)

    def stop(self, timeout: float = 120.0) -> list[Outcome]:
        self._stop.set()
        return self.join(timeout)

    def join(self, timeout: float = 120.0) -> list[Outcome]:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
        with self._lock:
            return list(self.outcomes)

    def count(self) -> int:
        with self._lock:
            return len(self.outcomes)
