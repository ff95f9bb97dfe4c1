"""The anchors' documented cadences, step for step."""

from __future__ import annotations

import math

import pytest

from tandem.coordination.model import RoleSpec, UnitSpec
from tandem.coordination.steps import scaling_step
from tandem.coordination.walkthrough import replicas_of, walk


def _table(rows, columns):
    return [tuple(row.counts.get(column, 0) for column in columns) for row in rows if row.state != "Complete"]


def test_rbg_scaling_cadence_max_skew_25_percent_order_ready():
    """RBG: maxSkew 25%, OrderReady, 0P:0D -> 4P:2D goes {0,0} {1,1} {2,1} {3,2} {4,2}."""
    spec = UnitSpec(
        roles=(RoleSpec("prefill", 4, 0), RoleSpec("decode", 2, 0)),
        revision="r1",
        scaling_max_skew="25%",
        scaling_progression="OrderReady",
    )
    rows = walk(spec, [])
    counts = [(row.counts[("prefill", "r1")], row.counts[("decode", "r1")]) for row in rows]
    assert counts == [(0, 0), (1, 1), (2, 1), (3, 2), (4, 2), (4, 2)]
    assert rows[-1].state == "Complete"


def test_rbg_steady_state_scale_up_steps():
    """RBG's scaler from a steady state (progress counted from zero): 10% moves 5/10 -> 7/14."""
    assert scaling_step({"p": 5, "d": 10}, {"p": 0, "d": 0}, {"p": 20, "d": 40}, "10%") == {"p": 7, "d": 14}
    assert scaling_step({"p": 4, "d": 2}, {"p": 0, "d": 0}, {"p": 8, "d": 4}, "10%") == {"p": 5, "d": 3}


# RBG's own expectations (sgl-project/rbg pkg/coordination/coordinationscaling/scaler_test.go,
# TestCalculateTargetReplicas), progress counted from zero: (maxSkew, {role: (desired,
# current)}, RBG's expected targets, tandem's). Tandem agrees everywhere but in four values of
# three cases, where RBG's figure comes from float64 rounding in `minProgress + maxSkew`
# (see test_rbg_float_figures_are_rounding_error); tandem's arithmetic is exact.
RBG_CASES = [
    ("5%", {"prefill": (300, 0), "decode": (100, 0)}, {"prefill": 15, "decode": 5}, None),
    ("5%", {"prefill": (300, 15), "decode": (100, 0)}, {"prefill": 15, "decode": 5}, None),
    ("5%", {"prefill": (300, 15), "decode": (100, 5)}, {"prefill": 30, "decode": 10}, None),
    ("5%", {"prefill": (300, 285), "decode": (100, 90)}, {"prefill": 286, "decode": 95}, {"prefill": 285, "decode": 95}),
    ("10%", {"prefill": (200, 20), "decode": (100, 0), "router": (50, 5)}, {"prefill": 20, "decode": 10, "router": 5}, None),
    (
        "5%",
        {"prefill": (300, 0), "decode": (100, 0), "router": (10, 0), "worker": (50, 0)},
        {"prefill": 15, "decode": 5, "router": 1, "worker": 3},
        None,
    ),
    (
        "8%",
        {"prefill": (500, 50), "decode": (200, 20), "router": (20, 1), "worker": (100, 8), "monitor": (10, 1)},
        {"prefill": 65, "decode": 26, "router": 3, "worker": 13, "monitor": 2},
        None,
    ),
    (
        "10%",
        {"large": (1000, 100), "medium": (100, 5), "small": (10, 1)},
        {"large": 151, "medium": 16, "small": 2},
        {"large": 150, "medium": 15, "small": 2},
    ),
    ("5%", {"prefill": (0, 0), "decode": (100, 50)}, {"prefill": 0, "decode": 56}, {"prefill": 0, "decode": 55}),
    ("10%", {"prefill": (0, 5), "decode": (100, 10)}, {"prefill": 0, "decode": 20}, None),
]


@pytest.mark.parametrize("skew, roles, rbg, exact", RBG_CASES)
def test_rbg_scaler_cases(skew, roles, rbg, exact):
    current = {role: have for role, (_, have) in roles.items()}
    targets = {role: desired for role, (desired, _) in roles.items()}
    assert scaling_step(current, {role: 0 for role in roles}, targets, skew) == (exact or rbg)


def test_rbg_float_figures_are_rounding_error():
    """Where tandem and RBG differ, float64 is the cause: RBG's Go code, in Python floats."""
    # "near completion": decode 90/100 is the slowest; 0.9 + 0.05 = 0.9500000000000001, so
    # prefill at 285/300 = 0.95 is taken as behind and gets "at least one more": 286.
    # Exactly, 19/20 is not behind 19/20: prefill stays at 285.
    assert 285 / 300 < 0.9 + 0.05 and math.ceil((0.9 + 0.05) * 300) + 1 == 286
    # "three roles - uneven desired replicas": 0.05 + 0.1 = 0.15000000000000002, so
    # ceil(150.00000000000003) = 151 and ceil(15.000000000000002) = 16; exactly 150 and 15.
    assert math.ceil((0.05 + 0.1) * 1000) == 151 and math.ceil((0.05 + 0.1) * 100) == 16
    # "scale down to zero - already at zero": 0.55 * 100 = 55.00000000000001, so 56; exactly 55.
    assert math.ceil((0.5 + 0.05) * 100) == 56


def test_rollout_in_ratio_steps_minimums_first():
    """RBG KEP-75 rollingDeploy steps {prefill: 2, decode: 1}: minimums, then +2P/+1D per step."""
    spec = UnitSpec(
        roles=(RoleSpec("prefill", 4, 1), RoleSpec("decode", 2, 1)),
        revision="r1",
        rollout_steps={"prefill": 2, "decode": 1},
    )
    rows = walk(spec, [])
    counts = [(row.counts[("prefill", "r1")], row.counts[("decode", "r1")]) for row in rows]
    assert counts == [(0, 0), (1, 1), (3, 2), (4, 2), (4, 2)]


def test_lws_kep_766_example_1():
    """LWS DisaggregatedSet KEP-766, Example 1: 5P:2D -> new revision, maxSurge 2, maxUnavailable 1."""
    spec = UnitSpec(
        roles=(RoleSpec("prefill", 5, 1), RoleSpec("decode", 2, 1)),
        revision="new",
        max_surge=2,
        max_unavailable=1,
    )
    rows = walk(spec, replicas_of({("prefill", "old"): 5, ("decode", "old"): 2}))
    columns = [("decode", "old"), ("prefill", "old"), ("decode", "new"), ("prefill", "new")]
    assert _table(rows, columns) == [
        (2, 5, 0, 0),  # initial
        (2, 5, 1, 2),  # new decode +1, new prefill +2
        (2, 4, 1, 2),  # old prefill -1
        (2, 3, 1, 2),  # old prefill -1
        (2, 3, 2, 4),  # new decode +1, new prefill +2
        (1, 2, 2, 4),  # old decode -1, old prefill -1
        (1, 2, 2, 5),  # new prefill +1
        (0, 0, 2, 5),  # old decode -1, old prefill -2
    ]
    assert rows[-1].state == "Complete"


def test_lws_12_6_surge_2_drains_a_batch_a_step():
    """LWS planner_test `large_12_6_surge2`: 12P:6D -> new revision, maxSurge 2, maxUnavailable 0.

    LWS's batch is maxSurge (2) and B = max(ceil(12/2), ceil(6/2)) = 6 batches. Each batch is
    one up step (new +2P +1D, old + new = 14P, 7D = target + maxSurge) and one down step
    (old -2P -1D, back to 12P, 6D Ready = target - maxUnavailable): 6 x 2 = 12 steps. Tandem
    used to drain max(1, maxUnavailable) = 1 grid step (1P, half a D) at a time: 17 steps.
    """
    spec = UnitSpec(roles=(RoleSpec("prefill", 12, 1), RoleSpec("decode", 6, 1)), revision="new", max_surge=2, max_unavailable=0)
    rows = walk(spec, replicas_of({("prefill", "old"): 12, ("decode", "old"): 6}))
    columns = [("prefill", "old"), ("decode", "old"), ("prefill", "new"), ("decode", "new")]
    assert _table(rows, columns) == [
        (12, 6, 0, 0),
        (12, 6, 2, 1),
        (10, 5, 2, 1),
        (10, 5, 4, 2),
        (8, 4, 4, 2),
        (8, 4, 6, 3),
        (6, 3, 6, 3),
        (6, 3, 8, 4),
        (4, 2, 8, 4),
        (4, 2, 10, 5),
        (2, 1, 10, 5),
        (2, 1, 12, 6),
        (0, 0, 12, 6),
    ]
    assert len([row for row in rows if row.state == "Progressing"]) == 12
    assert rows[-1].state == "Complete"
