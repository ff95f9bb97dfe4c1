"""Replaying a trace faster or slower, or only a slice of it.

The order of operations is fixed so that a window is always stated in the trace's own
clock: cut the window [start_s, end_s) out of the original arrival times, make the times
relative to the window start, then divide them by `rate` (rate 2 = twice as many requests
per second), then keep the first `limit` requests. Token lengths are never changed.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from tandem.errors import InputError, Problem
from tandem.sim.traces.trace import Trace


def replay(
    trace: Trace,
    rate: float = 1.0,
    start_s: float = 0.0,
    end_s: float | None = None,
    limit: int | None = None,
) -> Trace:
    """The requests of `trace` in [start_s, end_s), arriving `rate` times as fast."""
    if not (isinstance(rate, Real) and math.isfinite(rate) and rate > 0):
        raise InputError(Problem("rate", f"must be a finite number > 0, got {rate!r}"))
    if not (isinstance(start_s, Real) and math.isfinite(start_s) and start_s >= 0):
        raise InputError(Problem("start_s", f"must be a finite number >= 0, got {start_s!r}"))
    if end_s is not None and not (isinstance(end_s, Real) and end_s > start_s):
        raise InputError(Problem("end_s", f"must be greater than start_s ({start_s:g}), got {end_s!r}"))
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, Integral) or limit < 1):
        raise InputError(Problem("limit", f"must be a whole number >= 1, got {limit!r}"))

    arrival = trace.arrival_s
    first = int(np.searchsorted(arrival, start_s, side="left"))
    last = len(trace) if end_s is None else int(np.searchsorted(arrival, end_s, side="left"))
    if limit is not None:
        last = min(last, first + limit)
    if last <= first:
        window = f"[{start_s:g}, {'end' if end_s is None else f'{end_s:g}'})"
        raise InputError(
            Problem("start_s", f"no request of {trace.name} arrives in {window} s (it spans 0 to {trace.duration_s:g} s)")
        )
    return trace.take(np.arange(first, last), (arrival[first:last] - start_s) / rate)
