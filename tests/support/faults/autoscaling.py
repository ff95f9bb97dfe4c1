"""The autoscaler's invariants (issue 29), judged on every decision an operator replica's
autoscaler loop takes (`AutoscaleReport.decided`: what it wrote into `spec.roles` when it
changed them, and into `status.autoscaling.desired` every time).

**The data a decision used** is the source's scrape rounds of the group inside its metrics
window ending at the decision (`window_s` seconds, this operator process's own rounds: a
restarted one starts with none), for the pods of its latest round (the group's Ready
replica leaders, as the replica read them). What the world knows of each pod's answer
(`engines.Scrape`) decides, not what the code made of it. The decision had **missing
data** when, in its latest round, no pod answered (the source down, every scrape failed)
or there was no Ready pod; or a role the policy reads has no Ready pod, or one of its pods
has fewer answered scrapes inside the window than its figure needs: two for a rate (decode
tokens/s for FixedRatio; prompt and generated tokens/s of every pod for SLO; a
`tokensPerSecond` target), one for a gauge (`queueDepth`, `busyFraction`, `kvUtilization`
targets). A pod whose series are stale (gauges NaN, counters frozen) has not answered; a
pod whose counters were reset has (the reset is Prometheus' `rate()` rule).

- `scale-down-on-missing-data`: a decision on missing data leaves every managed role at
  least at the count it read, or at the role's maximum when it read more (a count outside
  the bounds is brought inside them whatever the data, as the HPA does).
- `ratio-band`: every decision keeps every managed role inside its bounds; FixedRatio's
  counts are the ratio's split of their own total (each role's share clipped to its
  bounds, the excess shared by the others; each count the floor or the ceiling of its
  share, the ceilings to the largest fractions: Hamilton's rounding, which the scaler's
  stabilisation and panic keep, as the split of two roles grows with its total); PreferredBand's counts are inside every band,
  unless panic is on (panic bypasses the bands, as Kthena's PR #948 documents; the
  decision says `panic`) or no raise of the counts within the roles' maxima would hold
  the bands (the band guard's documented `band not kept`). SLO and Independent keep no
  ratio: their bounds only.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any, Mapping

from support.faults.engines import ANSWERED, Scrape

if TYPE_CHECKING:
    from support.faults.invariants import Checker
    from tandem.controller import AutoscaleReport

RATE, GAUGE = 2, 1  # answered scrapes a pod needs inside the window for its figure
EPSILON = 1e-6


def needs(spec: Mapping[str, Any]) -> dict[str, int]:
    """The roles a policy reads, and the scrapes each of their pods needs in the window."""
    prefill, decode = spec.get("prefillRole", "prefill"), spec.get("decodeRole", "decode")
    policy = spec["policy"]
    if policy == "FixedRatio":
        return {decode: RATE}
    if policy == "SLO":
        return {prefill: RATE, decode: RATE}
    block = spec["preferredBand" if policy == "PreferredBand" else "independent"]
    return {role: RATE if target["metric"] == "tokensPerSecond" else GAUGE for role, target in block["targets"].items()}


def missing_data(rounds: list[Scrape], spec: Mapping[str, Any], window_s: float) -> str | None:
    """What was missing from the data the decision at the last of `rounds` used; None: nothing."""
    latest = rounds[-1]
    inside = [r for r in rounds if latest.at - window_s < r.at <= latest.at]
    if not latest.pods:
        return "no Ready pod"
    if not any(state == ANSWERED for _, state in latest.pods.values()):
        return "no pod answered (" + ", ".join(sorted({state for _, state in latest.pods.values()})) + ")"
    for role, wanted in sorted(needs(spec).items()):
        pods = sorted(p for p, (r, _) in latest.pods.items() if r == role)
        if not pods:
            return f"no Ready {role} pod"
        for pod in pods:
            answered = sum(1 for r in inside if r.pods.get(pod, ("", ""))[1] == ANSWERED)
            if answered < wanted:
                return f"{role} pod {pod}: {answered} answered scrape(s) in the {window_s:g} s window, {wanted} needed"
    return None


def bounds_of(spec: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    return {role: (int(b.get("minReplicas", 0)), int(b["maxReplicas"])) for role, b in spec["roles"].items()}


def in_bands(counts: Mapping[str, int], bands: Mapping[str, tuple[int, int]]) -> bool:
    total = sum(counts.values())
    return all(total * lo <= 100 * counts[role] <= total * hi for role, (lo, hi) in bands.items() if role in counts)


def raisable(counts: Mapping[str, int], bands: Mapping[str, tuple[int, int]], bounds: Mapping[str, tuple[int, int]]) -> bool:
    """Whether some counts at or above `counts`, each within its maximum, hold every band (brute force)."""
    roles = sorted(counts)
    for candidate in itertools.product(*(range(counts[r], max(counts[r], bounds[r][1]) + 1) for r in roles)):
        if in_bands(dict(zip(roles, candidate)), bands):
            return True
    return False


def shares(total: int, weights: Mapping[str, int], bounds: Mapping[str, tuple[int, int]]) -> dict[str, float]:
    """Each role's real share of `total` by `weights`, clipped to its bounds (the clipped
    excess shared by the others), found by bisection: the checker's own, not the scaler's."""
    low, high = sum(lo for lo, _ in bounds.values()), sum(hi for _, hi in bounds.values())
    target = min(max(total, low), high)

    def fill(scale: float) -> dict[str, float]:
        return {r: min(max(scale * w, bounds[r][0]), bounds[r][1]) for r, w in weights.items()}

    a, b = 0.0, max(hi / w for r, w in weights.items() for _, hi in [bounds[r]]) + 1.0
    for _ in range(200):
        middle = (a + b) / 2
        if sum(fill(middle).values()) < target:
            a = middle
        else:
            b = middle
    return fill(b)


def in_ratio(counts: Mapping[str, int], ratio: Mapping[str, int], bounds: Mapping[str, tuple[int, int]]) -> bool:
    """The counts are the largest-remainder split of their total: each the floor or the
    ceiling of its share, and no role rounded up whose share's fraction is below that of a
    role rounded down."""
    quota = shares(sum(counts.values()), ratio, bounds)
    if any(abs(counts[r] - quota[r]) >= 1 - EPSILON for r in ratio if abs(quota[r] - round(quota[r])) > EPSILON):
        return False
    if any(abs(counts[r] - quota[r]) > EPSILON for r in ratio if abs(quota[r] - round(quota[r])) <= EPSILON):
        return False  # a whole share is met exactly
    up = [quota[r] - math.floor(quota[r]) for r in ratio if counts[r] > quota[r] + EPSILON]
    down = [quota[r] - math.floor(quota[r]) for r in ratio if counts[r] < quota[r] - EPSILON]
    return not up or not down or min(up) >= max(down) - EPSILON


class AutoscalingChecks:
    """Both invariants, on every decision the world's autoscaler loops report."""

    def __init__(self, checker: "Checker"):
        self.checker = checker
        self.window_s = float((checker.world.schedule.metrics or {}).get("window", 60.0))

    def decided(self, source: int, now: float, report: "AutoscaleReport") -> None:
        world, checker = self.checker.world, self.checker
        for d in report.decided:
            spec = world.schedule.groups[d.name]["spec"]["autoscaling"]
            rounds = world.ledger.get((source, d.name), [])
            if not rounds or rounds[-1].at != now:
                checker.violation("autoscaler-data", f"{d.name}: a decision at {now:.3f} with no scrape round recorded")
                continue
            scrape = rounds[-1]
            counts = {r: int(v) for r, v in d.desired.items()}
            bounds = bounds_of(spec)
            exercised = checker.exercised
            exercised["autoscaler_decisions"] = exercised.get("autoscaler_decisions", 0) + 1
            exercised["autoscaler_panic_decisions"] = exercised.get("autoscaler_panic_decisions", 0) + int(d.panic)
            if d.outcome == "scaled":
                direction = "up" if any(counts[r] > scrape.counts.get(r, 0) for r in counts) else "down"
                exercised[f"autoscaler_scaled_{direction}"] = exercised.get(f"autoscaler_scaled_{direction}", 0) + 1
                checker.windows = [w for w in checker.windows if w.name != d.name]  # an autoscaler change ends a watched change
            why = missing_data(rounds, spec, self.window_s)
            if why is not None:
                exercised["autoscaler_decisions_on_missing_data"] = exercised.get("autoscaler_decisions_on_missing_data", 0) + 1
                lowered = {r: (scrape.counts.get(r, 0), counts[r]) for r in counts if counts[r] < min(scrape.counts.get(r, 0), bounds[r][1])}
                if lowered:
                    checker.violation("scale-down-on-missing-data", f"{d.name}: {', '.join(f'{r} {a} -> {b}' for r, (a, b) in sorted(lowered.items()))} "
                                                                     f"decided while {why} ({d.outcome})")
            self._ratio_band(d.name, spec, counts, bounds, d.panic, d.outcome)

    def _ratio_band(self, name: str, spec: Mapping[str, Any], counts: dict[str, int], bounds: dict[str, tuple[int, int]], panic: bool,
                    outcome: str) -> None:
        outside = [r for r in counts if not bounds[r][0] <= counts[r] <= bounds[r][1]]
        if outside:
            self.checker.violation("ratio-band", f"{name}: {counts} outside the bounds {bounds} ({outcome})")
            return
        policy = spec["policy"]
        if policy == "FixedRatio":
            ratio = {r: int(spec["fixedRatio"]["ratio"][r]) for r in counts}
            if not in_ratio(counts, ratio, bounds):
                self.checker.violation("ratio-band", f"{name}: {counts} not the split of {sum(counts.values())} at {ratio} within {bounds} ({outcome})")
        elif policy == "PreferredBand":
            bands = {r: (int(b.get("minPercent", 0)), int(b.get("maxPercent", 100))) for r, b in (spec["preferredBand"].get("bands") or {}).items()}
            if bands and not in_bands(counts, bands) and not panic and raisable(counts, bands, bounds):
                self.checker.violation("ratio-band", f"{name}: {counts} outside the bands {bands} (no panic; a raise within {bounds} holds them) ({outcome})")
