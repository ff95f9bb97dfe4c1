"""The worlds the contract suite runs against: every one serves the controller's ports.

Today the in-memory store (the simulator's); the Kubernetes adapter over HTTP against
the local API server joins here (issue 12), and then every test runs against it too.
"""

from __future__ import annotations

from typing import Callable

import pytest

from tandem.sim.store import MemoryStore


def _memory() -> MemoryStore:
    clock = {"now": 1_764_003_217.0}
    store = MemoryStore(clock=lambda: clock["now"])
    return store


WORLDS: dict[str, Callable[[], object]] = {"memory": _memory}


@pytest.fixture(params=sorted(WORLDS))
def world(request):
    """A fresh, empty world: a `Writer` with `snapshot()` for a `Reader`."""
    return WORLDS[request.param]()
