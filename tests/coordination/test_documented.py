"""The anchors' documented cadences, step for step."""

from __future__ import annotations

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
