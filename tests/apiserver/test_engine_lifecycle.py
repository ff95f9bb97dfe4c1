"""Engine stand-ins through their lifecycle: every request hears back when an engine stops,
loopback HTTP never goes through a proxy, a stopped stand-in lets go of its connections,
and its timing keeps to the serving model.

Stand-ins built here listen on a pod network block of their own (`pod_network.reserve()`),
so they never collide with another server on the machine."""

from __future__ import annotations

import http.client
import json
import queue
import threading
from typing import Any, Iterator

import pytest

from tandem.apiserver import pod_network
from tandem.apiserver.engines import timing
from tandem.apiserver.engines.core import EngineLoop, Job
from tandem.apiserver.engines.standin import _updates
from tandem.sim.serving.profiles import gpu_profile

FIXED = timing.timing(None, gpu_profile("h100-sxm"), 1)  # 10 ms per prefill iteration, 10 ms per decode step
BACKSTOP = 10.0  # seconds a test waits for an event that must come (a hang fails, it does not block the run)


def _quiet(kind: str, value: float) -> None:
    return None


def _wait_until(condition: Any) -> None:
    """Until `condition()` holds (no timing asserted: a backstop against a hang)."""
    done = threading.Event()
    for _ in range(int(BACKSTOP / 0.005)):
        if condition():
            return
        done.wait(0.005)
    raise AssertionError("never happened")


# ---------------------------------------------------------------------- 1. stopping fails every job


def test_a_job_in_the_prefill_iteration_in_progress_fails_when_the_engine_stops():
    loop = EngineLoop(FIXED, 1000.0, _quiet, "t")  # a prefill iteration of 10 s: the test stops it midway
    job = Job(10, 5, prefill=True, decode=True)
    loop.submit(job)
    _wait_until(lambda: loop.load()[:2] == (0, 1))  # taken out of the queue into the iteration
    loop.close()
    assert job.events.get(timeout=BACKSTOP) == ("error", 0)


def test_a_job_submitted_after_the_engine_stopped_fails_at_once():
    loop = EngineLoop(FIXED, 0.001, _quiet, "t")
    loop.close()
    for late in (Job(10, 5, prefill=True, decode=True), Job(10, 5, prefill=False, decode=True)):  # the second: a decode whose KV came late
        loop.submit(late)
        assert late.events.get_nowait()[0] == "error"
    assert loop.load() == (0, 0, 0)


def test_a_handler_that_hears_nothing_of_its_job_gives_up_as_failed():
    assert list(_updates(Job(10, 5, prefill=True, decode=True), silence=0.01)) == [(0, False, True)]
