"""Stabilisation windows with the HPA's own documented figures, and through `scale`."""

from __future__ import annotations

from support.autoscaling import change_times, run, spec
from tandem.autoscaling.memory import Recommendation
from tandem.autoscaling.stabilization import prune, stabilize


def history(values: list[int], every: float = 60.0) -> tuple[Recommendation, ...]:
    return tuple(Recommendation(i * every, {"decode": v}) for i, v in enumerate(values))


def test_kep_853_scale_down_example() -> None:
    """KEP-853: a 600 s scale-down window, one recommendation a minute, 10 replicas.

    With [10, 9, 8, 9, 9, 8, 9, 8, 9] gathered and 8 added at the tenth minute the largest
    is 10: nothing changes. At the eleventh minute 7 is added and the first 10 has left
    the window: the largest is 9, so 10 -> 9.
    """
    seen = history([10, 9, 8, 9, 9, 8, 9, 8, 9])
    assert stabilize(seen, "decode", 540.0, current=10, newest=8, up_seconds=0, down_seconds=600) == 10
    seen += (Recommendation(540.0, {"decode": 8}),)
    assert stabilize(seen, "decode", 600.0, current=10, newest=7, up_seconds=0, down_seconds=600) == 9


def test_scale_up_goes_to_the_lowest_recommendation_of_its_window() -> None:
    seen = history([4, 9, 6], every=20.0)  # at 0, 20, 40 s
    assert stabilize(seen, "decode", 60.0, current=3, newest=12, up_seconds=60, down_seconds=300) == 6
    assert stabilize(seen, "decode", 60.0, current=3, newest=12, up_seconds=0, down_seconds=300) == 12


def test_a_count_inside_both_limits_stays() -> None:
    seen = history([2, 9], every=30.0)
    assert stabilize(seen, "decode", 60.0, current=5, newest=4, up_seconds=60, down_seconds=300) == 5


def test_prune_keeps_what_a_window_can_see() -> None:
    # at 0, 60, 120, 180 s; a 120 s window at 180 s sees what is newer than 60 s
    assert [r.at for r in prune(history([1, 2, 3, 4]), now=180.0, seconds=120)] == [120.0, 180.0]


def test_a_new_autoscaler_waits_a_full_window_before_scaling_down() -> None:
    """Like the HPA, the first decision records the current count: 8/16 under no load is
    held for the 300 s window, then scaled down in one step."""
    steps = run(spec("FixedRatio"), lambda t: 0.0, until=900, start={"prefill": 8, "decode": 16})
    assert change_times(steps) == [300.0]
    assert dict(steps[-1].decision.desired) == {"prefill": 1, "decode": 1}
    assert "scale-down held at 8 by the 300 s window" in steps[1].decision.reason


def test_defaults_are_immediate_up_and_five_minutes_down() -> None:
    autoscaling = spec("FixedRatio", stabilization={})
    assert (autoscaling.stabilization.scale_up_seconds, autoscaling.stabilization.scale_down_seconds) == (0, 300)
    # A step up at 600 s is followed at once. The last high recommendation is at 1185 s;
    # the scale-down comes when it leaves the 300 s window, at 1485 s.
    steps = run(autoscaling, lambda t: 10.0 if 600 <= t < 1200 else 1.0, until=2400, start={"prefill": 1, "decode": 1})
    assert change_times(steps) == [600.0, 1485.0]


def test_a_scale_up_window_holds_a_short_spike() -> None:
    autoscaling = spec("FixedRatio", stabilization={"scaleUpSeconds": 60, "scaleDownSeconds": 300}, panic={"thresholdPercent": 1000})
    spike = run(autoscaling, lambda t: 8.0 if 600 <= t < 645 else 4.0, until=1200, start={"prefill": 1, "decode": 2})
    assert change_times(spike) == []
    step = run(autoscaling, lambda t: 8.0 if t >= 600 else 4.0, until=1200, start={"prefill": 1, "decode": 2})
    assert change_times(step) == [645.0]  # the first decision whose 60 s window is all high
