"""Fault injection for tests: a hook object a test installs in-process, never on by default.

`tandem apiserver` (the command) never installs one, and nothing outside a Python process
that builds its own `ApiServer` can: there is no flag, no environment variable, no
endpoint. The fault campaign (tests/support/faults/http.py) and the server's own tests
use it to give the local API server the failures a real one has:

    faults = Faults()
    with ApiServer(objects=..., faults=faults) as server:
        faults.cut_watches()      # every open watch ends (clients watch again from their version)
        faults.compact()          # history before now is gone: a watch from older meets 410
        faults.gone_as_status = True   # ... as the watch request's HTTP status, not an ERROR event

`Faults.decide(request)` is asked about every request on a resource path before anything
is done (health, discovery and OpenAPI paths are never asked); it returns None (serve it)
or an `Injected` error: answered at once, or, with `applied=True`, after the request was
served and its effect committed, in place of its answer (a write applied whose answer was
lost: the client cannot know). `lost` is told of every answer so swallowed. Subclass it,
or set `decide` to a function.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

REASONS = {409: "Conflict", 410: "Expired", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


@dataclass(frozen=True)
class Request:
    """What a fault is decided on: the method, the path, the query, and whether it is a watch."""

    method: str
    path: str
    params: dict[str, str]
    watch: bool
    kind: str  # the resource's kind (`Pod`, `Lease`, `InferenceGroup`, ...)
    subresource: str | None = None


@dataclass(frozen=True)
class Injected:
    """The error to answer with; `applied`: serve the request first, then answer this instead."""

    code: int
    message: str = ""
    reason: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    applied: bool = False

    @property
    def status_reason(self) -> str:
        return self.reason or REASONS.get(self.code, "InternalError")

    @property
    def status_message(self) -> str:
        return self.message or f"injected {self.code}"


class Faults:
    """The hook (see the module docstring). Thread-safe: requests come from many threads."""

    def __init__(self, decide: Callable[[Request], Injected | None] | None = None):
        self._decide = decide
        self._guard = threading.Lock()
        self._notify: Callable[[], None] = lambda: None
        self.epoch = 0  # cut_watches() bumps it: a watch begun in another epoch ends
        self.compacted = 0  # watches from a resourceVersion below this meet 410 Gone
        self.gone_as_status = False  # 410 as the watch request's answer, not an ERROR event
        self.version: Callable[[], int] = lambda: 0  # the server's current resourceVersion (installed by the server)
        self.lost_answers: list[tuple[Request, int, Any]] = []  # (request, code it had, body) of answers swallowed

    def install(self, version: Callable[[], int], notify: Callable[[], None]) -> None:
        """Called by the server that serves with this hook: how to read its version and wake its watches."""
        self.version, self._notify = version, notify

    # ------------------------------------------------------------------ decided per request

    def decide(self, request: Request) -> Injected | None:
        return self._decide(request) if self._decide is not None else None

    def lost(self, request: Request, code: int, body: Any) -> None:
        """An answer swallowed by an `applied` fault (the write is committed)."""
        with self._guard:
            self.lost_answers.append((request, code, body))

    # ------------------------------------------------------------------ controls

    def cut_watches(self) -> None:
        """End every open watch (as a load balancer or the server restarting does)."""
        with self._guard:
            self.epoch += 1
        self._notify()

    def compact(self) -> None:
        """Forget the history before the current resourceVersion (etcd compaction): a watch
        from an older version gets 410 Gone. Open watches are not ended (`cut_watches`)."""
        with self._guard:
            self.compacted = self.version()
        self._notify()

    def too_old(self, version: str) -> bool:
        return bool(version) and version.isdigit() and int(version) < self.compacted
