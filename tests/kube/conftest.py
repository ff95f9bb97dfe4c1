"""Servers for the adapter's tests: kmock (a Kubernetes API mock by kopf's author, for
what goes over the wire and for injected failures) and `fakeapi` (a small stateful API
over the in-memory store, for informers: versions, watches, bookmarks, 410).

kmock is asyncio; the adapter is blocking. kmock runs on its own event loop in a thread,
and reactions are set up on that loop (`KmockThread.on_loop`), so a blocking request from
the test never starves the server.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Iterator

import kmock
import pytest

from kube.fakeapi import FakeApi
from tandem.kube.rest import Rest


class KmockThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._done: asyncio.Future[None] | None = None
        self.handler: kmock.KubernetesEmulator | None = None
        self.url = ""
        self.thread = threading.Thread(target=self._run, name="kmock", daemon=True)
        self.thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("kmock did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._done = self.loop.create_future()
        async with kmock.KubernetesEmulator() as handler, kmock.Server(handler) as server:
            self.handler, self.url = handler, str(server.url).rstrip("/")
            self._ready.set()
            await self._done

    def on_loop(self, fn: Callable[[kmock.KubernetesEmulator], Any]) -> Any:
        """Run `fn(handler)` on kmock's loop (reactions are set up there) and return its result."""

        async def call() -> Any:
            return fn(self.handler)

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(10)

    def requests(self) -> list[Any]:
        return self.on_loop(lambda h: list(h))

    def close(self) -> None:
        assert self._done is not None
        self.loop.call_soon_threadsafe(self._done.set_result, None)
        self.thread.join(10)


@pytest.fixture
def mock() -> Iterator[KmockThread]:
    server = KmockThread()
    yield server
    server.close()


@pytest.fixture
def mock_rest(mock: KmockThread) -> Iterator[Rest]:
    rest = Rest.connect(mock.url, timeout=2.0, trust_env=False)
    yield rest
    rest.close()


@pytest.fixture
def api() -> Iterator[FakeApi]:
    server = FakeApi()
    yield server
    server.close()


@pytest.fixture
def api_rest(api: FakeApi) -> Iterator[Rest]:
    rest = Rest.connect(api.url, timeout=5.0, trust_env=False)
    yield rest
    rest.close()
