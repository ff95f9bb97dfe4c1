"""Figures in words for the report: milliseconds, percent that tells 99.96% from 99.97%,
and a reason wherever a figure is missing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tandem.sim.report_text import latency_triple, milliseconds, percent, placement_cell


def test_latencies_are_milliseconds_with_three_figures():
    assert [milliseconds(s) for s in (1.0, 0.4576, 0.01112, 0.00442)] == ["1,000", "458", "11.1", "4.42"]


def test_shares_are_percent_with_the_decimals_that_tell_them_apart():
    assert [percent(f) for f in (0.9996, 0.9997, 0.99999, 1.0, 0.0004, 0.0, 0.4066)] == [
        "99.96%", "99.97%", "99.999%", "100.0%", "0.04%", "0.0%", "40.7%",
    ]


@given(st.floats(min_value=1e-6, max_value=1 - 1e-6))
def test_a_share_strictly_between_0_and_1_never_reads_as_0_or_100_percent(fraction):
    shown = float(percent(fraction).rstrip("%"))
    assert 0 < shown < 100


def test_a_missing_figure_says_not_reached_and_why():
    assert latency_triple({"p50": None, "p90": None, "p99": None}) == ("not reached", "no request completed")
    assert latency_triple({"p50": 0.0465, "p90": 0.155, "p99": 0.458}) == ("46.5 / 155 / 458", None)
    assert placement_cell("time_to_target_s", None, "at the end, Ready/desired replicas: decode 7/28") == ("not reached", "at the end, Ready/desired replicas: decode 7/28")
    assert placement_cell("affinity_satisfied_fraction", None, "no affinity rule") == ("n/a", "no affinity rule")
    assert placement_cell("available_fraction", 0.9676, "") == ("96.8%", None)
    assert placement_cell("max_ratio_deviation", 0.3125, "") == ("31", None)
    assert placement_cell("time_to_first_functional_s", 113.586, "") == ("114 s", None)
