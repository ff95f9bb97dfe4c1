"""Kthena parity: any number of roles under one policy, and panic that bypasses the band.

Kthena's PD-aware draft (volcano-sh/kthena PR #948) coordinates any number of targets and
says "panic mode bypasses coordination (treated as Off)"; its merged DisaggregatedTarget
enforces the ratio after each role's stabilisation (pkg/autoscaler/autoscaler/
disaggregated_scaler.go, `EnforceRoleRatio` last). tandem does both: each
managed role (router, encoder, ... beside prefill and decode) is sized by the same policy,
panic sizes each role by its own need, and outside panic the bands are the last guard.

Properties (hypothesis, 2 to 4 roles): counts never leave their bounds; keepTotal's own
split keeps the total it asked for (unless the reason says the bands lowered it); every
decision is inside every band, unless panic bypassed the bands or the reason says no
raise within the maximums could keep them.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from support.autoscaling import SPEC, role
from support.fuzz import examples
import yaml

from tandem.api.autoscaling import AutoscalingSpec
from tandem.api.resources import InferenceGroup
from tandem.api.validation import check_group
from tandem.autoscaling import AutoscalerState, RoleSignals, Signals, scale
from tandem.autoscaling.enforcement import raise_short
from tandem.autoscaling.rounding import reachable_total

NAMES = ("prefill", "decode", "router", "encoder")


def many(policy: str, names: tuple[str, ...], *, bands=None, ratio=None, enforcement="keepTotal", panic=None, **changes) -> AutoscalingSpec:
    """A spec managing `names` (prefill and decode first), queue targets of 1 per replica."""
    targets = {r: {"metric": "queueDepth", "value": 1} for r in names}
    raw = {
        "policy": policy,
        "roles": {r: {"minReplicas": 1, "maxReplicas": 40} for r in names},
        "stabilization": {"scaleUpSeconds": 0, "scaleDownSeconds": 300},
        "panic": panic or {"thresholdPercent": 200, "windowSeconds": 60},
        "ratioEnforcement": enforcement,
        "fixedRatio": {"ratio": ratio or {r: 1 for r in names}, "decodeTokensPerSecondPerReplica": 1000},
        "preferredBand": {"targets": targets, "bands": {r: {"minPercent": lo, "maxPercent": hi} for r, (lo, hi) in (bands or {}).items()}},
        "independent": {"targets": targets},
        **changes,
    }
    return AutoscalingSpec.model_validate(raw)


def load(queues: dict[str, float], at: float = 0.0, decode_tokens: float = 0.0) -> Signals:
    roles = {r: RoleSignals(replicas=1, queue_depth=q, busy_fraction=0.5, kv_utilization=0.5, tokens_per_s=0.0) for r, q in queues.items()}
    if "decode" in roles:
        roles["decode"] = role(1, queue=queues["decode"], tokens=decode_tokens)
    return Signals(at=at, window_s=60.0, roles=roles, arrival_rate=1.0, input_tokens_per_s=0.0, output_tokens_per_s=0.0, ttft_p90_s=0.5, itl_p90_s=0.02)


def in_band(counts, bands) -> bool:
    total = sum(counts.values())
    return all(total * lo <= 100 * counts[r] <= total * hi for r, (lo, hi) in bands.items())


CALM = {"thresholdPercent": 100_000, "windowSeconds": 60}


# ----------------------------------------------------------------------------- any number of roles


def test_preferred_band_sizes_a_router_beside_prefill_and_decode() -> None:
    roles = ("prefill", "decode", "router")
    autoscaling = many("PreferredBand", roles, bands={"router": (10, 20)}, panic=CALM)
    bounds = {r: (1, 40) for r in roles}
    decision = scale(autoscaling, bounds, {r: 1 for r in roles}, {r: 1 for r in roles}, 1, load({"prefill": 6, "decode": 12, "router": 0}), AutoscalerState(), 0.0)
    assert autoscaling.managed_roles == roles
    assert set(decision.desired) == set(roles)
    # total 6 + 12 + 0 = 18; router's blend (cost 1/3, pressure 0) is 1/6 of it, inside its 10-20% band
    assert sum(decision.recommended.values()) == 18
    assert in_band(decision.desired, {"router": (10, 20)}) and decision.desired["router"] == 3


def test_fixed_ratio_gives_every_role_its_share_beside_decode() -> None:
    """decode 9 (9,000 tok/s / 1,000) at prefill:decode:router 1:2:1: total ceil(9 x 4 / 2) = 18."""
    roles = ("prefill", "decode", "router")
    autoscaling = many("FixedRatio", roles, ratio={"prefill": 1, "decode": 2, "router": 1}, panic=CALM)
    found = load({"prefill": 0, "decode": 0, "router": 0}, decode_tokens=9000)
    decision = scale(autoscaling, {r: (1, 40) for r in roles}, {r: 1 for r in roles}, {r: 1 for r in roles}, 1, found, AutoscalerState(), 0.0)
    assert dict(decision.desired) == {"prefill": 5, "decode": 9, "router": 4}
    assert "total 18 at prefill:decode:router 1:2:1" in decision.reason


def test_raise_short_holds_a_third_roles_band_by_raising_it() -> None:
    roles = ("prefill", "decode", "router")
    autoscaling = many("PreferredBand", roles, bands={"router": (20, 100)}, enforcement="raiseShort", panic=CALM)
    found = load({"prefill": 4, "decode": 4, "router": 1})
    decision = scale(autoscaling, {r: (1, 40) for r in roles}, {r: 1 for r in roles}, {r: 1 for r in roles}, 1, found, AutoscalerState(), 0.0)
    assert dict(decision.desired) == {"prefill": 4, "decode": 4, "router": 2}  # 2 of 10 is 20%
    assert "raiseShort: router raised from 1 to 2 to hold the band" in decision.reason


def test_independent_sizes_every_managed_role_on_its_own() -> None:
    roles = ("prefill", "decode", "encoder")
    autoscaling = many("Independent", roles, panic=CALM)
    found = load({"prefill": 3, "decode": 5, "encoder": 2})
    decision = scale(autoscaling, {r: (1, 40) for r in roles}, {r: 1 for r in roles}, {r: 1 for r in roles}, 1, found, AutoscalerState(), 0.0)
    assert dict(decision.desired) == {"prefill": 3, "decode": 5, "encoder": 2}


def test_an_extra_role_without_signals_takes_no_action() -> None:
    roles = ("prefill", "decode", "router")
    decision = scale(many("PreferredBand", roles), {r: (1, 40) for r in roles}, {r: 1 for r in roles}, {r: 2 for r in roles}, 1, load({"prefill": 6, "decode": 6}), AutoscalerState(), 0.0)
    assert not decision.changed and decision.reason.startswith("no action: no signals for role 'router'")


GROUP = """apiVersion: tandem.dev/v1alpha1
kind: InferenceGroup
metadata: {name: llm, namespace: serving}
spec:
  autoscaling:
    policy: %s
    roles: {prefill: {maxReplicas: 8}, decode: {maxReplicas: 8}, %s: {maxReplicas: 2}}
    fixedRatio: {ratio: {prefill: 1, decode: 2, router: 1}, decodeTokensPerSecondPerReplica: 1500}
    slo: {ttftSeconds: 2, itlSeconds: 0.05, prefillTokensPerSecondPerReplica: 20000, decodeTokensPerSecondPerReplica: 1500}
  roles:
    - {name: router, replicas: 1, template: {spec: {containers: [{name: r, image: x}]}}}
    - {name: prefill, replicas: 1, template: {spec: {containers: [{name: e, image: x}]}}}
    - {name: decode, replicas: 1, template: {spec: {containers: [{name: e, image: x}]}}}
"""


@pytest.mark.parametrize(
    ("policy", "extra", "where", "message"),
    [
        ("FixedRatio", "router", None, None),
        ("FixedRatio", "encoder", "spec.autoscaling.roles.encoder", "names no role of this group: 'encoder'"),
        ("SLO", "router", "spec.autoscaling.roles.router", "policy SLO sizes only prefillRole and decodeRole"),
    ],
)
def test_validation_accepts_a_group_role_as_a_managed_role(policy: str, extra: str, where: str | None, message: str | None) -> None:
    problems = check_group(InferenceGroup.model_validate(yaml.safe_load(GROUP % (policy, extra))), None)
    found = [(p.path, p.message) for p in problems]
    if where is None:
        assert found == []
    else:
        assert any(path == where and message in text for path, text in found), found


# ----------------------------------------------------------------------------- panic bypasses the band


def test_panic_bypasses_the_band_and_the_band_returns_when_panic_ends() -> None:
    """6 prefill / 2 decode asked from 1/1 at a 50/50 band: outside panic keepTotal gives
    4/4. The burst (800%) panics, and no band may cap a role while panicking: each role
    gets the larger of its banded count and its count in the split without the band (the
    blend alone, 62.5% / 37.5% of 8: 5/3), so 5/4. raiseShort only ever raises for the
    band (6/6), so there is nothing to bypass. Once panic ends the scale-down window holds
    prefill, and the band returns by raising decode, never by lowering the role that burst."""
    roles = ("prefill", "decode")
    bands = {"prefill": (50, 50), "decode": (50, 50)}
    expected = {"keepTotal": ((4, 4), (5, 4), (5, 5)), "raiseShort": ((6, 6), (6, 6), (6, 6))}
    for mode, (banded, burst_counts, calm_counts) in expected.items():
        autoscaling = many("PreferredBand", roles, bands=bands, enforcement=mode)
        bounds = {r: (1, 40) for r in roles}
        burst = scale(autoscaling, bounds, {r: 1 for r in roles}, {"prefill": 1, "decode": 1}, 1, load({"prefill": 6, "decode": 2}), AutoscalerState(), 0.0)
        assert burst.panic and ("panic bypasses the bands" in burst.reason) == (mode == "keepTotal"), mode
        assert (burst.desired["prefill"], burst.desired["decode"]) == burst_counts, mode
        assert (burst.recommended["prefill"], burst.recommended["decode"]) == banded, mode
        calm = scale(autoscaling, bounds, {r: 1 for r in roles}, dict(burst.desired), 1, load({"prefill": 6, "decode": 2}, at=75.0), burst.state, 75.0)
        assert not calm.panic and (calm.desired["prefill"], calm.desired["decode"]) == calm_counts, mode
        assert "panic bypasses" not in calm.reason
    assert "prefill scale-down held at 5 by the 300 s window; bands kept after the windows: decode 4 -> 5" in calm_reason(bands)
    # no band, nothing to bypass: FixedRatio's ratio and SLO's split (and budget) stand in panic
    found = Signals(0.0, 60.0, {"prefill": role(1), "decode": role(6, tokens=12_400)}, 10.0, 100_000.0, 9_000.0, 0.5, 0.02)
    for policy in ("FixedRatio", "SLO"):
        decision = scale(AutoscalingSpec.model_validate({**SPEC, "policy": policy}), {"prefill": (1, 8), "decode": (1, 16)},
                         {"prefill": 8, "decode": 8}, {"prefill": 1, "decode": 1}, 1, found, AutoscalerState(), 0.0)
        assert decision.panic and "panic bypasses" not in decision.reason and dict(decision.desired) == dict(decision.recommended), policy


def calm_reason(bands) -> str:
    roles = ("prefill", "decode")
    autoscaling = many("PreferredBand", roles, bands=bands)
    bounds = {r: (1, 40) for r in roles}
    burst = scale(autoscaling, bounds, {r: 1 for r in roles}, {"prefill": 1, "decode": 1}, 1, load({"prefill": 6, "decode": 2}), AutoscalerState(), 0.0)
    return scale(autoscaling, bounds, {r: 1 for r in roles}, dict(burst.desired), 1, load({"prefill": 6, "decode": 2}, at=75.0), burst.state, 75.0).reason


# ----------------------------------------------------------------------------- properties


FAST = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def banded_roles(draw):
    """2 to 4 roles with bounds, and bands whose minimums sum to at most 100 and maximums to at least 100."""
    count = draw(st.integers(2, 4))
    roles = NAMES[:count]
    lows = {r: draw(st.integers(0, 8)) for r in roles}
    bounds = {r: (lows[r], lows[r] + draw(st.integers(0, 30))) for r in roles}
    bands = {}
    for r in roles:
        if draw(st.booleans()):
            lo = draw(st.integers(0, 60))
            bands[r] = (lo, draw(st.integers(lo, 100)))
    if sum(lo for lo, _ in bands.values()) > 100 or sum(bands.get(r, (0, 100))[1] for r in roles) < 100:
        bands = {}
    return roles, bounds, bands


@FAST
@given(
    setup=banded_roles(),
    policy=st.sampled_from(["PreferredBand", "FixedRatio", "Independent"]),
    enforcement=st.sampled_from(["keepTotal", "raiseShort"]),
    levels=st.lists(st.dictionaries(st.sampled_from(NAMES), st.floats(0, 60), min_size=4, max_size=4), min_size=1, max_size=8),
    threshold=st.sampled_from([150, 200, 100_000]),
    down=st.sampled_from([0, 30, 300]),
)
def test_bounds_total_and_bands_hold_for_any_number_of_roles(setup, policy, enforcement, levels, threshold, down) -> None:
    roles, bounds, bands = setup
    ratio = {r: 1 + i for i, r in enumerate(roles)}
    autoscaling = many(
        policy,
        roles,
        bands=bands,
        ratio=ratio,
        enforcement=enforcement,
        panic={"thresholdPercent": threshold, "windowSeconds": 60},
        roles={r: {"minReplicas": lo, "maxReplicas": max(hi, 1)} for r, (lo, hi) in bounds.items()},
        stabilization={"scaleUpSeconds": 0, "scaleDownSeconds": down},
    )
    bounds = {r: (lo, max(hi, 1)) for r, (lo, hi) in bounds.items()}
    current = {r: bounds[r][0] for r in roles}
    state = AutoscalerState()
    for step, level in enumerate(levels):
        now = 15.0 * step
        decision = scale(autoscaling, bounds, {r: 1 for r in roles}, current, 1, load({r: level[r] for r in roles}, now, decode_tokens=level["decode"] * 1000), state, now)
        assert all(bounds[r][0] <= decision.desired[r] <= bounds[r][1] for r in roles), decision.reason
        if policy == "PreferredBand" and enforcement == "keepTotal" and "total lowered" not in decision.reason:
            asked = math.ceil(sum(level[r] for r in roles) - 1e-9)
            assert sum(decision.recommended.values()) == reachable_total(asked, bounds), decision.reason
        if policy == "PreferredBand" and bands and "panic bypasses" not in decision.reason:
            assert in_band(decision.desired, bands) or "band not kept" in decision.reason, decision.reason
        current, state = dict(decision.desired), decision.state


def holdable(floors: dict[str, int], bands, highs: dict[str, int], limit: int) -> bool:
    """Brute force: is there a total T <= limit and counts floor_r <= c_r <= high_r, summing to
    T, inside every band? For each T the counts form a box, so its range of sums decides."""
    for total in range(sum(floors.values()), limit + 1):
        box = {r: (max(floors[r], -(-total * bands.get(r, (0, 100))[0] // 100)), min(highs[r], total * bands.get(r, (0, 100))[1] // 100)) for r in floors}
        if all(lo <= hi for lo, hi in box.values()) and sum(lo for lo, _ in box.values()) <= total <= sum(hi for _, hi in box.values()):
            return True
    return False


@FAST
@given(setup=banded_roles(), asks=st.lists(st.integers(0, 40), min_size=4, max_size=4), roomy=st.booleans())
def test_raise_short_for_many_roles_only_raises_and_keeps_the_bands_whenever_some_raise_can(setup, asks, roomy) -> None:
    roles, bounds, bands = setup
    if roomy:  # maximums that rarely bind
        bounds = {r: (lo, 400) for r, (lo, _) in bounds.items()}
    needs = dict(zip(roles, asks))
    counts, notes = raise_short(needs, bands, bounds)
    floors = {r: min(max(needs[r], bounds[r][0]), bounds[r][1]) for r in roles}
    for r in roles:
        assert bounds[r][0] <= floors[r] <= counts[r] <= bounds[r][1]
    kept = not any("band not kept" in note for note in notes)
    assert kept == in_band(counts, bands), (counts, notes)
    if len(roles) > 2:  # the many-role rule is exact: it fails only when no raise within the maximums holds the bands
        assert kept == holdable(floors, bands, {r: bounds[r][1] for r in roles}, sum(hi for _, hi in bounds.values())), (counts, notes)
