"""A tandem process (`tandem.operator.process.run`, `tandem.topology_controller.process.run`)
run in a thread of the test over an in-memory cluster, and a free loopback port for it."""

from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running(run: Callable[..., int], config: Any, cluster: Any) -> Iterator[list[int]]:
    """`run(config, connect, stop)` in a thread, connected to `cluster`; on the way out it is
    stopped (its `stop` event, as SIGTERM would) and joined. Yields the list its exit status
    is appended to when it returns."""
    stop = threading.Event()
    status: list[int] = []
    thread = threading.Thread(target=lambda: status.append(run(config, lambda cfg, changed: cluster, stop)))
    thread.start()
    try:
        yield status
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive(), "the process stopped when asked"
