"""`scale` as the controller uses it: panic, missing figures, bounds, state, determinism,
and square-wave load over simulated time."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from support.autoscaling import BOUNDS, GPUS, NAN, POLICIES, change_times, role, run, signals, spec, with_figure, world
from tandem.autoscaling import AutoscalerState, Recommendation, scale

FAST = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def square(low: float, high: float, half_period: float):
    return lambda t: high if int(t // half_period) % 2 else low


# ----------------------------------------------------------------------------- panic


def test_panic_skips_the_scale_up_window_and_then_forbids_scaling_down() -> None:
    """Knative: a burst at 200% of the current count scales up at once; while panicking
    (60 s after the last panic-level reading) nothing scales down."""
    windows = {"scaleUpSeconds": 60, "scaleDownSeconds": 0}
    burst = square(2.0, 2.0, 1e9)

    def levels(t: float) -> float:
        return 20.0 if 600 <= t < 630 else burst(t)

    steps = run(spec("FixedRatio", stabilization=windows), levels, until=900, start={"prefill": 1, "decode": 1})
    assert change_times(steps) == [600.0, 660.0]
    at_600 = next(s.decision for s in steps if s.at == 600.0)
    assert at_600.panic and dict(at_600.desired) == {"prefill": 3, "decode": 6}
    assert "panic: total 9 >= 200% of 2" in at_600.reason
    at_630 = next(s.decision for s in steps if s.at == 630.0)
    assert at_630.panic and not at_630.changed and "no scale-down until t=660 (panic)" in at_630.reason
    # without panic the 60 s scale-up window holds the 30 s burst entirely
    calm = run(spec("FixedRatio", stabilization=windows, panic={"thresholdPercent": 10_000}), levels, until=900, start={"prefill": 1, "decode": 1})
    assert change_times(calm) == []


def test_a_rise_below_the_panic_threshold_waits_for_the_scale_up_window() -> None:
    windows = {"scaleUpSeconds": 60, "scaleDownSeconds": 300}
    steps = run(spec("FixedRatio", stabilization=windows), lambda t: 6.0 if t >= 600 else 2.0, until=900, start={"prefill": 1, "decode": 1})
    assert change_times(steps) == [645.0]  # total 2 -> 3 is 150%: no panic
    assert not any(s.decision.panic for s in steps)


def test_independent_panics_per_role() -> None:
    found = signals(prefill=role(2, queue=8), decode=role(2, kv=2.0))  # prefill 2 -> 2, decode 2 -> 6
    decision = scale(spec("Independent"), BOUNDS, GPUS, {"prefill": 2, "decode": 2}, 1, found, AutoscalerState(), 0.0)
    assert decision.panic and dict(decision.desired) == {"prefill": 2, "decode": 6}
    assert set(decision.state.panic_until) == {"decode"}


# ----------------------------------------------------------------------------- no action


def busy_state() -> AutoscalerState:
    """A state with history and a live panic, as a running autoscaler has."""
    return AutoscalerState(
        history=(Recommendation(90.0, {"prefill": 3, "decode": 6}), Recommendation(105.0, {"prefill": 2, "decode": 5})),
        panic_until={"total": 150.0},
        last_change_at=90.0,
    )


CURRENT = {"prefill": 2, "decode": 5}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(
    ("found", "expected"),
    [
        (None, "no signals"),
        (world(4.0, CURRENT, 1, 120.0 - 61), "signals are 61 s old (metricMaxAgeSeconds 60)"),
        (replace(world(4.0, CURRENT, 1, 120.0), roles={}), "no signals for role"),
    ],
    ids=["none", "stale", "no-roles"],
)
def test_missing_or_stale_signals_change_nothing(policy: str, found, expected: str) -> None:
    if policy == "SLO" and expected == "no signals for role":
        pytest.skip("SLO reads only the group's figures, no role's")
    state = busy_state()
    decision = scale(spec(policy), BOUNDS, GPUS, CURRENT, 1, found, state, 120.0)
    assert not decision.changed and dict(decision.desired) == CURRENT
    assert decision.state is state
    assert decision.reason.startswith("no action: ") and expected in decision.reason
    assert decision.panic  # the panic of the state is still running at 120 s


NEEDED = {
    "FixedRatio": [("decode", "tokens_per_s", "decode tokensPerSecond")],
    "PreferredBand": [("prefill", "queue_depth", "prefill queueDepth"), ("decode", "kv_utilization", "decode kvUtilization")],
    "Independent": [("prefill", "queue_depth", "prefill queueDepth"), ("decode", "kv_utilization", "decode kvUtilization")],
    "SLO": [
        (None, "input_tokens_per_s", "input tokens/s"),
        (None, "output_tokens_per_s", "output tokens/s"),
        (None, "arrival_rate", "arrival rate"),
        (None, "ttft_p90_s", "TTFT p90"),
        (None, "itl_p90_s", "ITL p90"),
    ],
}


@FAST
@given(
    policy=st.sampled_from(POLICIES),
    pick=st.integers(0, 10),
    bad=st.sampled_from([NAN, math.inf, -1.0]),
    level=st.floats(0.5, 40),
    history_levels=st.lists(st.floats(0, 40), max_size=6),
    prefill=st.integers(1, 8),
    decode=st.integers(1, 16),
)
def test_a_missing_figure_changes_nothing(policy, pick, bad, level, history_levels, prefill, decode) -> None:
    autoscaling = spec(policy)
    current = {"prefill": prefill, "decode": decode}
    state = AutoscalerState()
    for i, past in enumerate(history_levels):  # some memory, without moving `current`
        state = scale(autoscaling, BOUNDS, GPUS, current, 1, world(past, current, 1, 15.0 * i), state, 15.0 * i).state
    now = 15.0 * len(history_levels)
    role_name, field, name = NEEDED[policy][pick % len(NEEDED[policy])]
    found = with_figure(world(level, current, 1, now), role_name, **{field: bad})
    decision = scale(autoscaling, BOUNDS, GPUS, current, 1, found, state, now)
    assert not decision.changed and dict(decision.desired) == current
    assert decision.state is state
    assert decision.reason.startswith(f"no action: {name}")


def test_counts_outside_the_bounds_are_corrected_even_without_signals() -> None:
    decision = scale(spec("FixedRatio"), BOUNDS, GPUS, {"prefill": 0, "decode": 20}, 1, None, AutoscalerState(), 5.0)
    assert decision.changed and dict(decision.desired) == {"prefill": 1, "decode": 16}
    assert decision.reason == "no action: no signals; prefill 0 outside 1..8; decode 20 outside 1..16 -> prefill 1, decode 16"
    assert decision.state.last_change_at == 5.0


def test_a_group_without_units_is_left_alone() -> None:
    decision = scale(spec("SLO"), BOUNDS, GPUS, CURRENT, 0, world(4, CURRENT, 0, 0.0), AutoscalerState(), 0.0)
    assert not decision.changed and "no action: the group has no units" in decision.reason


# ----------------------------------------------------------------------------- bounds, state, determinism


@FAST
@given(
    policy=st.sampled_from(POLICIES),
    lows=st.tuples(st.integers(0, 4), st.integers(0, 4)),
    spans=st.tuples(st.integers(0, 12), st.integers(0, 12)),
    start=st.tuples(st.integers(0, 30), st.integers(0, 30)),
    levels=st.lists(st.one_of(st.floats(0, 200), st.just(NAN)), min_size=1, max_size=30),
    units=st.integers(1, 3),
    budget=st.one_of(st.none(), st.integers(1, 400)),
    enforcement=st.sampled_from(("keepTotal", "raiseShort")),
)
def test_never_below_the_minimum_nor_above_the_maximum(policy, lows, spans, start, levels, units, budget, enforcement) -> None:
    bounds = {"prefill": (max(lows[0], 1), max(lows[0], 1) + spans[0]), "decode": (max(lows[1], 1), max(lows[1], 1) + spans[1])}
    raw = spec(policy).model_dump(by_alias=True)
    autoscaling = spec(policy, slo={**raw["slo"], "gpuBudget": budget}, ratioEnforcement=enforcement)

    def make(level, current, count, at):
        found = world(0 if math.isnan(level) else level, current, count, at)
        return with_figure(found, None, input_tokens_per_s=NAN) if math.isnan(level) else found

    steps = run(autoscaling, lambda t: levels[min(int(t // 15), len(levels) - 1)], until=15 * (len(levels) - 1),
                start={"prefill": start[0], "decode": start[1]}, units=units, bounds=bounds, make=make)
    for step in steps:
        for name, count in step.decision.desired.items():
            assert bounds[name][0] <= count <= bounds[name][1], step.decision.reason
        assert "\n" not in step.decision.reason


def test_state_survives_the_status_round_trip_and_decisions_repeat_exactly() -> None:
    """The controller keeps the state as JSON in status.autoscaling between decisions."""
    levels = square(1.0, 9.0, 150.0)
    for policy in POLICIES:
        autoscaling = spec(policy)
        direct = run(autoscaling, levels, until=1800, start={"prefill": 1, "decode": 1})
        current, state, replayed = {"prefill": 1, "decode": 1}, AutoscalerState(), []
        for step in direct:
            stored = json.loads(json.dumps(state.to_dict()))
            decision = scale(autoscaling, BOUNDS, GPUS, current, 1, world(levels(step.at), current, 1, step.at),
                              AutoscalerState.from_dict(stored), step.at)
            replayed.append(decision)
            current, state = dict(decision.desired), decision.state
        assert [(d.desired, d.reason) for d in replayed] == [(s.decision.desired, s.decision.reason) for s in direct]
        assert json.dumps(replayed[-1].state.to_dict()) == json.dumps(direct[-1].decision.state.to_dict())


def test_state_dict_is_json_with_a_fixed_key_order() -> None:
    state = AutoscalerState((Recommendation(15.0, {"prefill": 2, "decode": 4}),), {"total": 75.0}, 15.0)
    assert json.dumps(state.to_dict()) == (
        '{"history": [{"at": 15.0, "values": {"decode": 4, "prefill": 2}}], "panicUntil": {"total": 75.0}, "lastChangeAt": 15.0}'
    )
    assert AutoscalerState.from_dict(state.to_dict()) == state
    assert AutoscalerState.from_dict(None) == AutoscalerState() == AutoscalerState.from_dict({})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"history": [{"at": "soon", "values": {}}]}, "history[0].at must be a finite number"),
        ({"history": [{"at": 1.0, "values": {"decode": -1}}]}, "must be a count"),
        ({"panicUntil": [1]}, "panicUntil must be a mapping"),
        ({"lastSeen": 3}, "unknown keys: lastSeen"),
    ],
)
def test_a_damaged_state_is_reported(data, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        AutoscalerState.from_dict(data)


# ----------------------------------------------------------------------------- square waves


def test_square_wave_with_the_default_windows_scales_once() -> None:
    """Load alternating every 2 minutes between 2 and 10 requests/s, for an hour: the
    autoscaler goes up at the first high phase and stays (each low phase is shorter than
    the 300 s scale-down window)."""
    for policy in POLICIES:
        steps = run(spec(policy), square(2.0, 10.0, 120.0), until=3600, start={"prefill": 1, "decode": 1})
        assert len(change_times(steps)) == 1, (policy, [s.decision.reason for s in steps if s.decision.changed])


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=st.sampled_from(POLICIES),
    low=st.floats(0.2, 8),
    factor=st.floats(1.1, 8),
    down=st.integers(60, 600),
    half=st.floats(0.1, 0.95),
    up=st.sampled_from([0, 15, 45]),
    interval=st.sampled_from([5, 15, 30]),
    threshold=st.sampled_from([200, 400, 10_000]),
    units=st.integers(1, 2),
)
def test_square_wave_makes_at_most_one_change_per_window(policy, low, factor, down, half, up, interval, threshold, units) -> None:
    """Load switching faster than the scale-down window: once the first period has been
    seen, no span of scaleDownSeconds holds more than one change.

    The autoscaler sees the load only at its decisions, so a phase counts as shorter than
    the window when it is shorter by at least one interval (a 56 s phase sampled every 5 s
    looks like 60 s of one level to a 60 s window, and rightly scales)."""
    half_period = min(max(half * down, interval), down - interval)
    autoscaling = spec(policy, stabilization={"scaleUpSeconds": up, "scaleDownSeconds": down}, panic={"thresholdPercent": threshold})
    steps = run(autoscaling, square(low, low * factor, half_period), until=2 * half_period + up + 4 * down,
                start={"prefill": 1, "decode": 1}, units=units, interval=interval)
    changes = [t for t in change_times(steps) if t >= 2 * half_period + up]
    for t in changes:
        assert len([c for c in changes if t <= c < t + down]) <= 1, [
            (s.at, s.decision.reason) for s in steps if s.decision.changed
        ]


def test_a_spec_that_skipped_validation_takes_no_action_instead_of_failing() -> None:
    """The controller may only parse a stored group; what validation rejects is then reported."""
    found = world(4.0, CURRENT, 1, 0.0)
    no_block = spec("SLO").model_copy(update={"slo": None})
    decision = scale(no_block, BOUNDS, GPUS, CURRENT, 1, found, AutoscalerState(), 0.0)
    assert not decision.changed and decision.reason.startswith("no action: spec.autoscaling.slo is missing")
    independent = spec("Independent")
    partial = independent.model_copy(update={"independent": independent.independent.model_copy(update={"targets": {}})})
    decision = scale(partial, BOUNDS, GPUS, CURRENT, 1, found, AutoscalerState(), 0.0)
    assert decision.reason.startswith("no action: spec.autoscaling.independent.targets has no entry for prefill")
