"""The ports' contract (tests/contract/test_ports.py), run once more through `worlds.py`:
`kube_over_http` against this directory's fake API, so the read-your-writes helper the
contract suite will use against `tandem apiserver` is itself known to pass it."""

from __future__ import annotations

import pytest

from contract import test_ports
from kube.worlds import kube_over_http

globals().update({name: getattr(test_ports, name) for name in dir(test_ports) if name.startswith("test_")})


@pytest.fixture
def world(api):
    cluster = kube_over_http(api.url, watch_timeout=5.0)
    yield cluster
    cluster.stop()
