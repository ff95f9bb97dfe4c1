"""The thread a simulated cluster component runs in (the kubelets, the provisioner).

It sleeps on the server's lock until the store changes or the component's next thing is
due, then calls `step()` with the lock held. `step` returns the seconds until its next
thing is due (None: nothing is). Whether the component's own writes wake it again is its
choice: the provisioner's do (accepting a request is what makes it due for nodes), the
kubelets' do not (a bind or a start they wrote needs nothing more from them).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, ClassVar, Self

from tandem.apiserver.server_state import State

IDLE_WAKE_S = 1.0  # look again at least this often, even when nothing changes


class StepThread:
    def __init__(self, state: State, step: Callable[[], float | None], name: str, *, own_writes_wake: bool, coalesce_s: float = 0.0):
        self._state = state
        self._step = step
        self._own_writes_wake = own_writes_wake
        self._coalesce_s = coalesce_s  # after a step, let a burst of writes land before the next
        self._seen = ""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        state = self._state
        delay: float | None = None
        while True:
            with state.lock:
                if state.store.resource_version == self._seen and not state.stopping:
                    state.lock.wait(IDLE_WAKE_S if delay is None else min(max(delay, 0.001), IDLE_WAKE_S))
                if state.stopping:
                    return
                if self._own_writes_wake:
                    self._seen = state.store.resource_version
                delay = self._step()
                if not self._own_writes_wake:
                    self._seen = state.store.resource_version
            if self._coalesce_s:
                time.sleep(self._coalesce_s)


class Stepped:
    """`start` and `join` for a component whose `step` runs in a StepThread (a dataclass
    with `state` and `_thread` fields, and the class attributes below)."""

    THREAD_NAME: ClassVar[str]
    OWN_WRITES_WAKE: ClassVar[bool]
    COALESCE_S: ClassVar[float] = 0.0
    state: State
    _thread: StepThread | None

    def step(self) -> float | None:
        raise NotImplementedError

    def start(self) -> Self:
        self._thread = StepThread(self.state, self.step, self.THREAD_NAME, own_writes_wake=self.OWN_WRITES_WAKE, coalesce_s=self.COALESCE_S)
        self._thread.start()
        return self

    def join(self, timeout: float = 5.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
