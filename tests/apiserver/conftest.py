"""The local API server in-process, on a free port, with tandem's CRDs and a small cluster."""

from __future__ import annotations

from typing import Iterator

import pytest

from apiserver.helpers import Client, small_cluster
from tandem.apiserver.server import ApiServer


@pytest.fixture
def server() -> Iterator[ApiServer]:
    """tandem's CRDs, a 2x2 cluster, no kubelet (tests that want one start their own)."""
    with ApiServer(objects=small_cluster(), kubelet=False, bookmark_every=0.2) as api:
        yield api


@pytest.fixture
def client(server: ApiServer) -> Client:
    return Client(server.url)
