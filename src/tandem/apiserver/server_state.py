"""What every request and the simulated kubelet share: the store, the kinds it serves, one lock.

The HTTP server runs a thread per connection, and the store is not thread-safe: every
read and write holds `lock` (a Condition), and every write ends with `changed()`, which
wakes the watches (and the kubelet) waiting on it. Admission webhooks are called with the
lock released (`verbs.write`): a webhook may take seconds, and may read this server. Wall-clock time enters only through
`clock` (seconds), which the store writes into objects as RFC 3339 text.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from typing import Any, Callable

from tandem.apiserver.evictions import DEFAULT_TOLERATION_SECONDS
from tandem.apiserver.kinds import Registry
from tandem.cluster.memory import HISTORY, MemoryStore

PAGES_KEPT = 64  # continue tokens remembered (older ones answer 410 Expired)
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # as the real server's generateName suffixes


class State:
    def __init__(self, clock: Callable[[], float] = time.time, history: int = HISTORY, store: MemoryStore | None = None):
        """`store`: serve this store (empty; a test's own subclass) instead of a new one."""
        self.clock = clock
        self.store = store if store is not None else MemoryStore(clock=clock, history=history)
        self.registry = Registry(self.store)
        self.lock = threading.Condition(threading.RLock())
        self.stopping = False
        self.faults: Any = None  # a test's fault-injection hook (`faults.Faults`), installed by the server; None: none
        self.pages: OrderedDict[str, tuple[list[dict[str, Any]], str]] = OrderedDict()
        self._counters: dict[str, int] = {}
        # What the DefaultTolerationSeconds admission plugin gives a pod for not-ready and
        # unreachable nodes (`tandem apiserver --default-toleration-seconds`).
        self.default_toleration_seconds = DEFAULT_TOLERATION_SECONDS
        # Uids of the pods that run an engine stand-in (the kubelet keeps it): a DELETE of one
        # is graceful (`verbs`), the kubelet stops its engine and then removes it.
        self.graceful_pods: set[str] = set()

    def changed(self) -> None:
        """After a write (with `lock` held): wake every watch and the kubelet."""
        self.lock.notify_all()

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            self.lock.notify_all()

    def next(self, counter: str) -> int:
        """1, 2, 3, ... per counter name: deterministic service IPs and generated names."""
        self._counters[counter] = self._counters.get(counter, 0) + 1
        return self._counters[counter]

    def generated_name(self, prefix: str) -> str:
        """`prefix` and five characters, different on every call, the same across runs."""
        digest = hashlib.sha256(f"{prefix}\x00{self.next('generateName')}".encode()).digest()
        return prefix + "".join(_NAME_ALPHABET[b % len(_NAME_ALPHABET)] for b in digest[:5])

    def remember_page(self, token: str, rest: list[dict[str, Any]], version: str) -> None:
        self.pages[token] = (rest, version)
        while len(self.pages) > PAGES_KEPT:
            self.pages.popitem(last=False)
