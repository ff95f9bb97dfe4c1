"""The seeded synthetic generator: reproducible, the asked rate, burstier when asked."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from tandem.errors import InputError
from tandem.sim.traces import DEFAULT_INPUT, Lengths, synthetic

SETTINGS = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _cv(values: np.ndarray) -> float:
    return float(values.std() / values.mean())


def test_same_seed_gives_identical_arrays_and_another_seed_does_not():
    first = synthetic(seed=11, duration_s=600, rate=4, arrivals="gamma", burstiness=2.0)
    again = synthetic(seed=11, duration_s=600, rate=4, arrivals="gamma", burstiness=2.0)
    assert first == again
    assert first.arrival_s.tobytes() == again.arrival_s.tobytes()
    other = synthetic(seed=12, duration_s=600, rate=4, arrivals="gamma", burstiness=2.0)
    assert not np.array_equal(first.arrival_s[:10], other.arrival_s[:10])


@pytest.mark.parametrize(("arrivals", "burstiness"), [("poisson", 1.0), ("gamma", 0.5), ("gamma", 3.0)])
def test_mean_rate_over_a_long_run_is_the_asked_rate(arrivals, burstiness):
    trace = synthetic(seed=3, duration_s=20_000, rate=5.0, arrivals=arrivals, burstiness=burstiness)
    assert len(trace) / 20_000 == pytest.approx(5.0, rel=0.03)
    gaps = np.diff(trace.arrival_s)
    assert gaps.mean() == pytest.approx(0.2, rel=0.03)
    assert _cv(gaps) == pytest.approx(burstiness, rel=0.1)


def test_gamma_with_cv_above_one_is_burstier_than_poisson():
    poisson = synthetic(seed=5, duration_s=20_000, rate=5.0)
    bursty = synthetic(seed=5, duration_s=20_000, rate=5.0, arrivals="gamma", burstiness=3.0)
    assert _cv(np.diff(bursty.arrival_s)) > 2 * _cv(np.diff(poisson.arrival_s))
    # Requests per 10 s window: bursts and lulls show as a larger spread at the same mean.
    bins = np.arange(0, 20_001, 10)
    assert _cv(np.histogram(bursty.arrival_s, bins)[0]) > 2 * _cv(np.histogram(poisson.arrival_s, bins)[0])


def test_arrivals_lie_in_the_duration_and_are_sorted():
    trace = synthetic(seed=0, duration_s=123.0, rate=50.0)
    assert trace.arrival_s[0] >= 0 and trace.arrival_s[-1] < 123.0
    assert np.all(np.diff(trace.arrival_s) >= 0)


def test_a_longer_run_extends_a_shorter_one_with_the_same_seed():
    short = synthetic(seed=9, duration_s=1_000, rate=8.0, arrivals="gamma", burstiness=1.5)
    long = synthetic(seed=9, duration_s=3_000, rate=8.0, arrivals="gamma", burstiness=1.5)
    assert np.array_equal(long.arrival_s[: len(short)], short.arrival_s)
    assert long.arrival_s[len(short)] >= 1_000


def test_changing_the_output_lengths_moves_neither_arrivals_nor_input_lengths():
    a = synthetic(seed=2, duration_s=300, rate=3)
    b = synthetic(seed=2, duration_s=300, rate=3, output_lengths=Lengths("lognormal", median=900, sigma=0.2, maximum=2048))
    assert np.array_equal(a.arrival_s, b.arrival_s)
    assert np.array_equal(a.input_tokens, b.input_tokens)
    assert not np.array_equal(a.output_tokens, b.output_tokens)


def test_fixed_lengths_are_constant():
    trace = synthetic(seed=1, duration_s=60, rate=10, input_lengths=Lengths("fixed", median=512), output_lengths=Lengths("fixed", median=1))
    assert set(trace.input_tokens.tolist()) == {512}
    assert set(trace.output_tokens.tolist()) == {1}


def test_lognormal_lengths_have_the_asked_median():
    trace = synthetic(seed=4, duration_s=10_000, rate=5, input_lengths=Lengths("lognormal", median=2000, sigma=0.8, maximum=1_000_000))
    assert np.median(trace.input_tokens) == pytest.approx(2000, rel=0.05)
    assert np.log(trace.input_tokens).std() == pytest.approx(0.8, rel=0.05)


@SETTINGS
@given(
    st.integers(0, 2**32),
    st.floats(1, 20_000),
    st.floats(0.01, 5.0),
    st.integers(1, 50_000),
)
def test_lengths_are_always_clipped_to_one_through_maximum(seed, median, sigma, maximum):
    lengths = Lengths("lognormal", median=median, sigma=sigma, maximum=maximum)
    trace = synthetic(seed=seed, duration_s=50, rate=10, input_lengths=lengths, output_lengths=lengths)
    for column in (trace.input_tokens, trace.output_tokens):
        assert column.min() >= 1 and column.max() <= maximum


def test_defaults_resemble_the_azure_conversation_trace():
    assert DEFAULT_INPUT.median == 1024 and DEFAULT_INPUT.distribution == "lognormal"
    trace = synthetic(seed=0, duration_s=3_600, rate=5.5)
    summary = trace.summary()
    assert summary["input_tokens"]["p50"] == pytest.approx(1024, rel=0.1)
    assert summary["output_tokens"]["p50"] == pytest.approx(128, rel=0.1)


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"duration_s": 0}, "duration_s"),
        ({"rate": 0}, "rate"),
        ({"rate": float("nan")}, "rate"),
        ({"rate": 1e6, "duration_s": 1e6}, "rate"),
        ({"arrivals": "weibull"}, "arrivals"),
        ({"arrivals": "gamma", "burstiness": 0}, "burstiness"),
        ({"burstiness": 2.0}, "burstiness"),
        ({"input_lengths": Lengths("zipf")}, "input_lengths.distribution"),
        ({"input_lengths": Lengths("lognormal", median=0)}, "input_lengths.median"),
        ({"output_lengths": Lengths("lognormal", median=10, sigma=-1)}, "output_lengths.sigma"),
        ({"output_lengths": Lengths("lognormal", maximum=0)}, "output_lengths.maximum"),
        ({"output_lengths": Lengths("fixed", median=2.5)}, "output_lengths.median"),
        ({"output_lengths": Lengths("fixed", median=5000, maximum=4096)}, "output_lengths.median"),
        ({"duration_s": 0.001, "rate": 0.001}, "duration_s"),
    ],
)
def test_bad_parameters_are_input_errors_naming_the_parameter(kwargs, path):
    arguments = {"seed": 0, "duration_s": 10.0, "rate": 1.0} | kwargs
    with pytest.raises(InputError) as excinfo:
        synthetic(**arguments)
    assert excinfo.value.problems[0].path == path
