"""The HTTP world is the campaign's own: no process outside it reaches its API server, and
a write from one would be reported (HTTP seeds 4 and 22 failed only in runs that shared the
machine: a wall-clock `tandem operator` of another test, retrying 127.0.0.1:<port> after its
own server had gone, reconciled a world whose server had taken that port)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from support.faults.http import FOREIGN_CLOCK_S, HttpWorld, foreign_stamps
from support.faults.schedule import EPOCH, generate
from tandem.api.timestamps import rfc3339


def test_a_worlds_api_server_listens_on_a_loopback_address_of_its_own():
    world = HttpWorld(generate(0, world="http"))
    try:
        host = urlsplit(world.server.url).hostname
        assert host is not None and ipaddress.ip_address(host).is_loopback, "loopback only"
        assert host != "127.0.0.1", "not where every other local API server and its clients are"
    finally:
        world.close()


def group(status: dict) -> dict:
    return {"metadata": {"name": "g0", "namespace": "serving"}, "status": status}


def test_a_time_on_another_clock_in_a_groups_status_is_a_foreign_writers():
    now = EPOCH + 120.0
    ours = group({"units": [{"index": 0, "retryAfter": rfc3339(now + 600), "coordination": {"stepStarted": rfc3339(now - 60)}}],
                  "conditions": [{"type": "Ready", "lastTransitionTime": rfc3339(now - 100), "reason": "Unschedulable"}]})
    assert foreign_stamps([ours], now) == []
    wall = now + 368 * 86_400.0  # a pass on the wall clock, a year on
    theirs = group({"units": [{"index": 0, "reason": "retrying the step", "coordination": {"retryAfter": rfc3339(wall)}}]})
    assert foreign_stamps([theirs], now) == [("g0", "status.units[0].coordination.retryAfter", rfc3339(wall))]
    assert wall - now > FOREIGN_CLOCK_S
