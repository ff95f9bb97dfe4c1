"""Bounded largest-remainder rounding: a total split into integers by weight, within bounds.

Kthena's draft split a total across roles by largest remainder and then clamped each role
to its min/max, which can lose the total. Here the bounds go in first:

1. the total is clamped to [Σlo, Σhi], the only totals the bounds allow;
2. clip-and-redistribute finds real quotas y_i = clamp(λ·w_i, lo_i, hi_i) summing to it
   (a role pinned at a bound gives its excess to, or takes its deficit from, the others
   in proportion to their weights);
3. each quota is floored and the leftover units go, one each, to the largest fractional
   parts, ties by position (the caller's role order).

So the result keeps the total exactly, respects every bound, and every x_i is within one
of its quota. Exact rational arithmetic keeps it deterministic to the last unit.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Mapping


def apportion(total: int, weights: Mapping[str, float], bounds: Mapping[str, tuple[int, int]]) -> dict[str, int]:
    """Integers x with Σx = clamp(total, Σlo, Σhi) and lo ≤ x ≤ hi, as near total × weight as
    the bounds allow. Roles are taken in the order of `weights`; all-zero weights split evenly."""
    names = list(weights)
    if set(names) != set(bounds):
        raise ValueError(f"weights and bounds name different roles: {sorted(weights)} vs {sorted(bounds)}")
    for name in names:
        lo, hi = bounds[name]
        if not 0 <= lo <= hi:
            raise ValueError(f"bounds of {name!r} must satisfy 0 <= lo <= hi, got {lo}..{hi}")
        if not math.isfinite(weights[name]) or weights[name] < 0:
            raise ValueError(f"weight of {name!r} must be finite and >= 0, got {weights[name]}")
    if not names:
        return {}
    target = reachable_total(total, bounds)
    quotas = quotas_within_bounds(target, {n: Fraction(weights[n]) for n in names}, bounds)
    floors = {n: math.floor(quotas[n]) for n in names}
    leftover = target - sum(floors.values())
    by_fraction = sorted(names, key=lambda n: (-(quotas[n] - floors[n]), names.index(n)))
    for name in by_fraction[:leftover]:
        floors[name] += 1
    return floors


def reachable_total(total: int, bounds: Mapping[str, tuple[int, int]]) -> int:
    """`total` clamped to [Σlo, Σhi], the only totals the bounds allow."""
    low = sum(lo for lo, _ in bounds.values())
    high = sum(hi for _, hi in bounds.values())
    return min(max(total, low), high)


def quotas_within_bounds(
    target: int | Fraction, weights: Mapping[str, Fraction], bounds: Mapping[str, tuple[int, int]]
) -> dict[str, Fraction]:
    """Real quotas y_i = clamp(λ·w_i, lo_i, hi_i) with Σy = target (Σlo ≤ target ≤ Σhi).

    Roles of weight 0 sit at their minimum while the others can still take more; past
    that they share the rest evenly (within their own bounds).
    """
    weighted = [n for n in weights if weights[n] > 0]
    if not weighted:
        return _fill({n: Fraction(1) for n in weights}, bounds, Fraction(target))
    zero = [n for n in weights if weights[n] == 0]
    room = sum(bounds[n][1] for n in weighted) + sum(bounds[n][0] for n in zero)
    if target <= room:
        quotas = _fill({n: weights[n] for n in weighted}, bounds, Fraction(target - sum(bounds[n][0] for n in zero)))
        quotas.update({n: Fraction(bounds[n][0]) for n in zero})
    else:
        quotas = {n: Fraction(bounds[n][1]) for n in weighted}
        rest = Fraction(target - sum(bounds[n][1] for n in weighted))
        quotas.update(_fill({n: Fraction(1) for n in zero}, bounds, rest))
    return {n: quotas[n] for n in weights}


def _fill(weights: Mapping[str, Fraction], bounds: Mapping[str, tuple[int, int]], target: Fraction) -> dict[str, Fraction]:
    """Solve Σ clamp(λ·w_i, lo_i, hi_i) = target for λ (every w_i > 0) along the sorted breakpoints."""
    names = list(weights)
    # The sum is piecewise linear and non-decreasing in λ; it bends where a role leaves
    # its lower bound (λ = lo/w) or reaches its upper one (λ = hi/w).
    breakpoints = sorted({Fraction(bounds[n][0]) / weights[n] for n in names} | {Fraction(bounds[n][1]) / weights[n] for n in names})

    def at(scale: Fraction) -> dict[str, Fraction]:
        return {n: min(max(scale * weights[n], Fraction(bounds[n][0])), Fraction(bounds[n][1])) for n in names}

    previous = Fraction(0)
    for point in breakpoints:
        if sum(at(point).values()) >= target:
            break
        previous = point
    else:
        return at(breakpoints[-1])
    # Between `previous` and `point` only the roles strictly inside their bounds move.
    base = at(previous)
    moving = [n for n in names if bounds[n][0] <= previous * weights[n] < bounds[n][1]]
    slope = sum(weights[n] for n in moving)
    if slope == 0:
        return base
    scale = previous + (target - sum(base.values())) / slope
    return at(scale)
