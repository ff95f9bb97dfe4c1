"""One autoscaling decision: signals and memory in, desired replicas per unit out.

The caller (the controller loop) runs this every `intervalSeconds`, keeps the returned
state in the group's `status.autoscaling`, and writes `desired` into
`spec.roles[].replicas`, so the coordination scaling planner carries it out step by step
within `maxSkew`. Precedence, strongest first: the roles' bounds (`spec.autoscaling.roles`),
the GPU budget (SLO), panic and the stabilisation windows, the percent bands
(PreferredBand), the policy's shares.

- Counts outside their bounds are brought inside them whatever the signals say (as the
  HPA does with min/maxReplicas).
- No signals, signals older than `metricMaxAgeSeconds`, no units, or a figure the policy
  needs that is NaN: no action (`changed` is False, `desired` is the current count, the
  state is returned as it came, and the reason names the missing figure).
- Ratio-keeping policies recommend a total, its shares and each role's own need; the total
  is split within the bounds (rounding.py, bands.py, the budget) into each role's
  recommendation (`ratioEnforcement: keepTotal`), or each role keeps its need and the one
  short of the bands is raised (`raiseShort`, enforcement.py).
- Each role's recommendation then goes through the HPA windows on that role's own
  history (stabilization.py). With a fixed ratio this is exactly "stabilise the total,
  then split it" (the split of a total between two roles grows with the total); when a
  policy moves the shares, no role loses replicas sooner than its window allows.
- Panic (Knative): a recommendation at or above `thresholdPercent` of the current count
  (the total for ratio-keeping policies, each role for Independent) starts or extends
  panic for `windowSeconds`; while panicking the scale-up window is skipped and nothing
  it covers scales down. Panic bypasses the bands, as Kthena's PR #948 does: no band
  caps a role while panicking (each role at least its count without the bands).
- Outside panic the bands are the last guard, after the windows (Kthena repairs its
  ratio last too): held counts that leave a band are brought back by raising the short
  role, or the reason says the band was not kept.

Any number of managed roles (prefill, decode, a router, an encoder, ...) go through the
same steps; with two, the policies' recommendations are what they were when only two
were possible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from tandem.api.autoscaling import POLICY_FIELDS, SLO, AutoscalingSpec, FixedRatio
from tandem.autoscaling.bands import Bounds, band_bounds
from tandem.autoscaling.enforcement import raise_short
from tandem.autoscaling.fixed_ratio import fixed_ratio
from tandem.autoscaling.independent import independent
from tandem.autoscaling.memory import AutoscalerState, Recommendation
from tandem.autoscaling.metrics import MissingSignal
from tandem.autoscaling.preferred_band import preferred_band
from tandem.autoscaling.recommendation import PerRole, Split
from tandem.autoscaling.rounding import apportion, reachable_total
from tandem.autoscaling.signals import Signals
from tandem.autoscaling.slo import slo
from tandem.autoscaling.stabilization import prune, stabilize

TOTAL = "total"  # the panic key of the ratio-keeping policies: every managed role together


@dataclass(frozen=True)
class ScaleDecision:
    desired: Mapping[str, int]  # replicas per unit for every managed role (unchanged = current)
    changed: bool
    reason: str  # one line for the event log
    panic: bool
    state: AutoscalerState
    recommended: Mapping[str, int]  # the policy's own counts, before windows and panic


def scale(
    spec: AutoscalingSpec,
    bounds: Bounds,
    gpus_per_replica: Mapping[str, int],
    current: Mapping[str, int],
    units: int,
    signals: Signals | None,
    state: AutoscalerState,
    now: float,
) -> ScaleDecision:
    """The desired replicas per unit of the managed roles (see the module docstring).

    `bounds`, `gpus_per_replica` and `current` are per unit and must name every managed
    role (`group_inputs` reads them from a group); `signals` are totals over all `units`.
    """
    roles = spec.managed_roles
    limits = {role: bounds[role] for role in roles}
    start = {role: current[role] for role in roles}
    inside = {role: _clamp(start[role], limits[role]) for role in roles}
    notes = [f"{r} {start[r]} outside {limits[r][0]}..{limits[r][1]}" for r in roles if start[r] != inside[r]]
    skip = _unusable(spec) or _stale(spec, signals, units, now)
    recommendation: Split | PerRole | None = None
    if skip is None:
        assert signals is not None
        try:
            recommendation = _recommend(spec, signals, units, inside, limits, gpus_per_replica)
        except MissingSignal as missing:
            skip = str(missing)
    if recommendation is None:
        changed = inside != start
        reason = f"no action: {skip}" + "".join(f"; {note}" for note in notes) + _outcome(inside, changed)
        return ScaleDecision(
            inside, changed, reason, _panicking(state.panic_until, now), _touched(state, changed, now), inside
        )
    bands: Mapping[str, tuple[int, int]] = {}
    unbanded: dict[str, int] | None = None
    if isinstance(recommendation, PerRole):
        keys: dict[str, tuple[str, ...]] = {role: (role,) for role in roles}
        raw, fits = dict(recommendation.desired), None
    else:
        fits = _budget(recommendation.gpu_budget, gpus_per_replica, units, roles)
        raise_from = recommendation.asks if spec.ratio_enforcement == "raiseShort" and recommendation.asks else None
        raw, split_notes = _split(
            recommendation.total, recommendation.weights, limits, recommendation.bands, fits, recommendation.gpu_budget, raise_from
        )
        notes += split_notes
        keys = {TOTAL: roles}
        bands = recommendation.bands
        if bands:  # what panic recommends instead: the same split without the bands
            unbanded, _ = _split(recommendation.total, recommendation.weights, limits, {}, fits, recommendation.gpu_budget, raise_from)
    return _apply(spec, recommendation.text, raw, keys, fits, start, inside, notes, state, now, limits, bands, unbanded)


def _recommend(
    spec: AutoscalingSpec, signals: Signals, units: int, current: Mapping[str, int], limits: Bounds, gpus: Mapping[str, int]
) -> Split | PerRole:
    if spec.policy == "FixedRatio":
        return fixed_ratio(spec, signals, units)
    if spec.policy == "PreferredBand":
        return preferred_band(spec, signals, units, limits, gpus)
    if spec.policy == "SLO":
        return slo(spec, signals, units)
    return independent(spec, signals, units, current, limits)


def _unusable(spec: AutoscalingSpec) -> str | None:
    """What validation would have rejected, for callers that only parsed the spec: no
    action rather than a crash in the controller's loop."""
    block = spec.policy_block()
    where = f"spec.autoscaling.{POLICY_FIELDS[spec.policy]}"
    if block is None:
        return f"{where} is missing"
    if isinstance(block, SLO):
        roles = spec.managed_roles
        return f"policy SLO sizes only {roles[0]} and {roles[1]}, not {roles[2]}" if len(roles) > 2 else None
    keys, field = (block.ratio, "ratio") if isinstance(block, FixedRatio) else (block.targets, "targets")
    absent = [role for role in spec.managed_roles if role not in keys]
    return f"{where}.{field} has no entry for {absent[0]}" if absent else None


def _stale(spec: AutoscalingSpec, signals: Signals | None, units: int, now: float) -> str | None:
    if units <= 0:
        return "the group has no units"
    if signals is None:
        return "no signals"
    age = now - signals.at
    if age > spec.metric_max_age_seconds:
        return f"signals are {age:g} s old (metricMaxAgeSeconds {spec.metric_max_age_seconds})"
    return None


def _apply(
    spec: AutoscalingSpec,
    text: str,
    raw: dict[str, int],
    panic_keys: Mapping[str, tuple[str, ...]],
    fits: Callable[[Mapping[str, int]], bool] | None,
    start: dict[str, int],
    current: dict[str, int],
    notes: list[str],
    state: AutoscalerState,
    now: float,
    limits: Bounds,
    bands: Mapping[str, tuple[int, int]] | None = None,
    unbanded: Mapping[str, int] | None = None,
) -> ScaleDecision:
    """Panic and the windows applied to each role's recommendation `raw`, then the bands.

    `panic_keys` maps a panic key to the roles it covers: the total covers both roles of a
    ratio-keeping policy (a burst of the total freezes both), each role covers itself for
    Independent. Every role is stabilised on its own history, so a role never shrinks
    sooner than its scale-down window allows, even when the policy only moved its share.
    """
    roles = spec.managed_roles
    history = state.history or (Recommendation(now, dict(current)),)
    panic_until = _live(state.panic_until, now)
    threshold = spec.panic.threshold_percent
    for key, covered in panic_keys.items():
        wanted, have = sum(raw[r] for r in covered), sum(current[r] for r in covered)
        if wanted * 100 >= threshold * max(1, have):
            panic_until[key] = now + spec.panic.window_seconds
            notes.append(f"panic: {key} {wanted} >= {threshold}% of {have}")
    frozen = {r for key, covered in panic_keys.items() if key in panic_until for r in covered}
    recommended = dict(raw)
    bypass = unbanded is not None and TOTAL in panic_until
    if bypass and unbanded is not None:
        # Kthena (PR #948): panic mode bypasses coordination. Here the bands may not cap a
        # role while panicking: each role gets the larger of its banded count and its count
        # in the same split without the bands (a burst is not throttled, and no other role
        # is lowered for it, so calm returns without a rebalance); the budget still wins.
        lifted = {role: max(raw[role], unbanded[role]) for role in raw}
        if lifted != raw and (fits is None or fits(lifted)):
            raw = lifted
            notes.append("panic bypasses the bands")
        elif lifted != raw:
            notes.append("panic would bypass the bands beyond the gpuBudget: the banded split is used")
    up, down = spec.stabilization.scale_up_seconds, spec.stabilization.scale_down_seconds
    desired: dict[str, int] = {}
    for role in roles:
        if role in frozen:
            desired[role] = max(current[role], raw[role])
            continue
        desired[role] = stabilize(history, role, now, current[role], raw[role], up, down)
        if desired[role] > raw[role]:
            notes.append(f"{role} scale-down held at {desired[role]} by the {down} s window")
        elif desired[role] < raw[role]:
            notes.append(f"{role} scale-up held at {desired[role]} by the {up} s window")
    notes += [
        f"no {'' if key == TOTAL else key + ' '}scale-down until t={until:g} (panic)" for key, until in sorted(panic_until.items())
    ]
    if fits is not None and not fits(desired):  # the budget beats the windows
        desired = dict(raw)
        notes.append("held counts would exceed the gpuBudget: the policy's split is used")
    if bands and not bypass:
        desired, band_notes = _keep_bands(desired, bands, limits, fits)
        notes += band_notes
    elif bands and not _in_bands(desired, bands) and "panic bypasses the bands" not in notes:
        notes.append("panic bypasses the bands")  # held by panic outside them: said, never silent
    history = prune(history + (Recommendation(now, dict(raw)),), now, max(up, down))
    changed = desired != start
    reason = text + "".join(f"; {note}" for note in notes) + _outcome(desired, changed)
    new_state = AutoscalerState(history, panic_until, now if changed else state.last_change_at)
    return ScaleDecision(desired, changed, reason, bool(frozen), new_state, recommended)


def _keep_bands(
    desired: dict[str, int],
    bands: Mapping[str, tuple[int, int]],
    limits: Bounds,
    fits: Callable[[Mapping[str, int]], bool] | None,
) -> tuple[dict[str, int], list[str]]:
    """The bands as the last guard, after the windows (Kthena enforces its ratio last too):
    a window may hold one role while another moves, and the pair then leaves its band; the
    short role is raised (never a held one lowered) when that holds every band within the
    roles' maxima and the GPU budget, else the counts stay and the reason says so."""
    if _in_bands(desired, bands):
        return desired, []
    raised, _ = raise_short(desired, bands, limits)
    if _in_bands(raised, bands) and (fits is None or fits(raised)):
        moved = ", ".join(f"{role} {desired[role]} -> {raised[role]}" for role in raised if raised[role] != desired[role])
        return raised, [f"bands kept after the windows: {moved}"]
    return desired, ["the held counts leave the bands and no raise within the maximums and budget restores them: band not kept"]


def _in_bands(counts: Mapping[str, int], bands: Mapping[str, tuple[int, int]]) -> bool:
    total = sum(counts.values())
    return all(total * lo <= 100 * counts[role] <= total * hi for role, (lo, hi) in bands.items() if role in counts)


def _split(
    total: int,
    weights: Mapping[str, float],
    bounds: Bounds,
    bands: Mapping[str, tuple[int, int]],
    fits: Callable[[Mapping[str, int]], bool] | None,
    budget: int | None,
    raise_from: Mapping[str, int] | None = None,
) -> tuple[dict[str, int], list[str]]:
    """`total` split by `weights` within `bounds` (tightened to `bands` where they can hold it),
    then the largest total below it that `fits` the GPU budget; when even the bounds'
    minimums do not fit, those minimums (and a note saying so).

    With `raise_from` (ratioEnforcement raiseShort: each role's own need) the counts are
    instead those needs with the short role raised to the bands (enforcement.py); the GPU
    budget still wins: counts that exceed it are replaced by the largest split that fits."""
    if raise_from is not None:
        raised, raise_notes = raise_short(raise_from, bands, bounds)
        if fits is None or fits(raised):
            return raised, raise_notes
        total = sum(raised.values())
        split, notes = _split(total, weights, bounds, bands, fits, budget)
        return split, raise_notes + ["raiseShort gives way to the gpuBudget", *notes]

    def attempt(target: int) -> tuple[dict[str, int], list[str]]:
        chosen, notes = bounds, []
        if bands:
            tightened, feasible = band_bounds(target, bands, bounds)
            if feasible:
                chosen = tightened
            else:
                held = _largest_banded_total(target, bands, bounds)
                if held is not None:
                    # A role's maximum binds (2/20 with prefill at most 3 and a 30% band):
                    # the bands hold at a smaller total, and that is what is asked for.
                    tightened, _ = band_bounds(held, bands, bounds)
                    notes.append(f"bands cannot hold total {reachable_total(target, bounds)} within the roles' bounds: total lowered to {held}")
                    return apportion(held, weights, tightened), notes
                notes.append(f"bands cannot hold total {reachable_total(target, bounds)} at any total within the roles' bounds: role bounds used")
        return apportion(target, weights, chosen), notes

    result, notes = attempt(total)
    if fits is None or fits(result):
        return result, notes
    low = sum(lo for lo, _ in bounds.values())
    smallest, smallest_notes = attempt(low)
    if not fits(smallest):
        return smallest, smallest_notes + [f"gpuBudget {budget} cannot hold the minimums"]
    good, bad = low, sum(result.values())
    while bad - good > 1:  # the split's GPUs grow with its total: bisect for the largest that fits
        middle = (good + bad) // 2
        if fits(attempt(middle)[0]):
            good = middle
        else:
            bad = middle
    result, notes = attempt(good)
    return result, notes + [f"gpuBudget {budget} caps the total at {good}"]


def _largest_banded_total(total: int, bands: Mapping[str, tuple[int, int]], bounds: Bounds) -> int | None:
    """The largest total below `total` at which the bands hold within the bounds, if any."""
    low = sum(lo for lo, _ in bounds.values())
    for candidate in range(reachable_total(total, bounds) - 1, low - 1, -1):
        if band_bounds(candidate, bands, bounds)[1]:
            return candidate
    return None


def _budget(
    budget: int | None, gpus: Mapping[str, int], units: int, roles: tuple[str, ...]
) -> Callable[[Mapping[str, int]], bool] | None:
    if budget is None:
        return None
    return lambda counts: units * sum(counts[r] * gpus.get(r, 0) for r in roles) <= budget


def _live(panic_until: Mapping[str, float], now: float) -> dict[str, float]:
    return {key: until for key, until in panic_until.items() if now < until}


def _panicking(panic_until: Mapping[str, float], now: float) -> bool:
    return bool(_live(panic_until, now))


def _touched(state: AutoscalerState, changed: bool, now: float) -> AutoscalerState:
    return AutoscalerState(state.history, state.panic_until, now) if changed else state


def _outcome(desired: Mapping[str, int], changed: bool) -> str:
    counts = ", ".join(f"{role} {count}" for role, count in desired.items())
    return f" -> {counts}" if changed else f" -> unchanged ({counts})"


def _clamp(value: int, limits: tuple[int, int]) -> int:
    return min(max(value, limits[0]), limits[1])
