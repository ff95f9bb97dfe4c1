"""Replay: window first (in the trace's own clock), then relative to the window start,
then `rate` times as fast, then the first `limit`; lengths untouched."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from tandem.errors import InputError
from tandem.sim.traces import Trace, replay

SETTINGS = settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def traces(draw: st.DrawFn) -> Trace:
    # Gaps in whole microseconds, as real traces have (ms in Mooncake, 100 ns in Azure).
    gaps = draw(st.lists(st.integers(0, 50_000_000), min_size=0, max_size=60))
    count = len(gaps) + 1
    arrival = np.concatenate([[0.0], np.cumsum(gaps) * 1e-6])
    inputs = draw(st.lists(st.integers(1, 100_000), min_size=count, max_size=count))
    outputs = draw(st.lists(st.integers(1, 4_000), min_size=count, max_size=count))
    return Trace("drawn", arrival, inputs, outputs)


rates = st.floats(0.01, 100, allow_nan=False)


def _fixed() -> Trace:
    return Trace("fixed", [0.0, 1.0, 2.0, 5.0, 9.0], [10, 20, 30, 40, 50], [1, 2, 3, 4, 5])


def test_a_window_is_cut_in_the_original_clock_then_compressed():
    out = replay(_fixed(), rate=2, start_s=1.0, end_s=9.0)
    assert out.arrival_s.tolist() == [0.0, 0.5, 2.0]  # originals 1, 2, 5 -> minus 1 -> halved
    assert out.input_tokens.tolist() == [20, 30, 40]
    assert out.output_tokens.tolist() == [2, 3, 4]
    assert out.name == "fixed"


def test_limit_keeps_the_first_requests_of_the_window():
    out = replay(_fixed(), start_s=0.5, limit=2)
    assert out.arrival_s.tolist() == [0.5, 1.5]
    assert out.input_tokens.tolist() == [20, 30]


def test_times_stay_relative_to_the_window_start_not_the_first_request_in_it():
    out = replay(_fixed(), start_s=3.0)
    assert out.arrival_s.tolist() == [2.0, 6.0]


@SETTINGS
@given(traces(), rates)
def test_rate_n_divides_every_time_and_keeps_every_request(trace, rate):
    out = replay(trace, rate=rate)
    assert len(out) == len(trace)
    np.testing.assert_allclose(out.arrival_s, trace.arrival_s / rate, rtol=1e-12)
    assert np.array_equal(out.input_tokens, trace.input_tokens)
    assert np.array_equal(out.output_tokens, trace.output_tokens)
    if trace.duration_s > 0:
        assert out.summary()["rate_per_s"] == pytest.approx(trace.summary()["rate_per_s"] * rate, rel=1e-9)


@SETTINGS
@given(traces(), rates, st.floats(0, 1), st.floats(0, 1), st.one_of(st.none(), st.integers(1, 80)))
def test_window_and_limit_select_exactly_the_requests_in_the_window(trace, rate, a, b, limit):
    start = a * trace.duration_s
    end = start + b * trace.duration_s + 1e-3
    inside = np.flatnonzero((trace.arrival_s >= start) & (trace.arrival_s < end))
    if limit is not None:
        inside = inside[:limit]
    if inside.size == 0:
        with pytest.raises(InputError):
            replay(trace, rate=rate, start_s=start, end_s=end, limit=limit)
        return
    out = replay(trace, rate=rate, start_s=start, end_s=end, limit=limit)
    assert len(out) == inside.size
    assert np.all(out.arrival_s >= 0) and np.all(out.arrival_s < (end - start) / rate * (1 + 1e-12))
    assert np.all(np.diff(out.arrival_s) >= 0)
    np.testing.assert_allclose(out.arrival_s * rate + start, trace.arrival_s[inside], rtol=1e-9, atol=1e-9)
    assert np.array_equal(out.input_tokens, trace.input_tokens[inside])
    assert np.array_equal(out.output_tokens, trace.output_tokens[inside])


@SETTINGS
@given(traces(), rates, st.integers(1, 80))
def test_limit_is_a_prefix_of_the_unlimited_replay(trace, rate, limit):
    full = replay(trace, rate=rate)
    cut = replay(trace, rate=rate, limit=limit)
    assert len(cut) == min(limit, len(trace))
    assert np.array_equal(cut.arrival_s, full.arrival_s[: len(cut)])


def test_replay_leaves_no_failure_count_behind():
    trace = Trace("t", [0.0, 1.0], [1, 1], [1, 1], failed_dropped=7)
    assert replay(trace).failed_dropped == 0


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"rate": 0}, "rate"),
        ({"rate": -2}, "rate"),
        ({"rate": float("inf")}, "rate"),
        ({"start_s": -1}, "start_s"),
        ({"start_s": 4, "end_s": 4}, "end_s"),
        ({"limit": 0}, "limit"),
        ({"limit": 1.5}, "limit"),
        ({"start_s": 9.5}, "start_s"),
        ({"start_s": 2.5, "end_s": 4.0}, "start_s"),
    ],
)
def test_bad_replay_arguments_are_input_errors_naming_the_argument(kwargs, path):
    with pytest.raises(InputError) as excinfo:
        replay(_fixed(), **kwargs)
    assert excinfo.value.problems[0].path == path


def test_an_empty_window_says_what_the_trace_spans():
    with pytest.raises(InputError) as excinfo:
        replay(_fixed(), start_s=9.5)
    assert str(excinfo.value) == "start_s: no request of fixed arrives in [9.5, end) s (it spans 0 to 9 s)"
