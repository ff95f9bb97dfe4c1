"""Per-role percent bands turned into replica bounds for one total.

A band {minPercent, maxPercent} of a total T is the replica range
[ceil(T·min/100), floor(T·max/100)]; intersected with the role's own bounds it tightens
them. When the tightened bounds cannot hold T, the caller (scaler._split) lowers the total
to the largest one they can hold (a role's maximum binding); only when none can (integer
rounding at small totals, or role minimums that already exceed a band) do the role's own
bounds apply: min/max always win over a band, and the reason says which happened.
"""

from __future__ import annotations

from typing import Mapping

from tandem.autoscaling.rounding import reachable_total

Bounds = Mapping[str, tuple[int, int]]


def band_bounds(total: int, bands: Mapping[str, tuple[int, int]], bounds: Bounds) -> tuple[dict[str, tuple[int, int]], bool]:
    """Bounds tightened to the bands at `total` (clamped to what `bounds` allow), and whether
    that was feasible; when it was not, `bounds` unchanged and False."""
    target = reachable_total(total, bounds)
    tightened: dict[str, tuple[int, int]] = {}
    for name, (lo, hi) in bounds.items():
        min_percent, max_percent = bands.get(name, (0, 100))
        band_lo = -(-target * min_percent // 100)  # ceil, in integers
        band_hi = target * max_percent // 100
        tightened[name] = (max(lo, band_lo), min(hi, band_hi))
    feasible = all(lo <= hi for lo, hi in tightened.values()) and (
        sum(lo for lo, _ in tightened.values()) <= target <= sum(hi for _, hi in tightened.values())
    )
    return (tightened, True) if feasible else (dict(bounds), False)
