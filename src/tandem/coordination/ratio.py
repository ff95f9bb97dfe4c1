"""The ratio arithmetic every coordination planner shares.

One definition of progress and skew, so rollout, scaling and rolling update agree on
what "in ratio" means. Percentages follow Kubernetes' IntOrString convention
(`GetScaledValueFromIntOrPercent`): a percent of a total, rounded as the caller asks.
"""

from __future__ import annotations

import math
from fractions import Fraction

Number = int | str


def is_percent(value: Number) -> bool:
    return isinstance(value, str) and value.endswith("%")


def scaled(value: Number, total: int, *, round_up: bool) -> int:
    """An int-or-percent as a count out of `total` (int values are taken as they are)."""
    if not is_percent(value):
        return int(value)
    share = Fraction(int(str(value)[:-1]), 100) * total
    return math.ceil(share) if round_up else math.floor(share)


def progress(current: int, start: int, target: int) -> Fraction:
    """How far a role is from `start` to `target`, 0..1 (1 when there is nowhere to go)."""
    if start == target:
        return Fraction(1)
    done = Fraction(current - start, target - start)
    return min(max(done, Fraction(0)), Fraction(1))


def position(start: int, target: int, fraction: Fraction) -> int:
    """The count at `fraction` of the way from `start` to `target`, rounded away from start.

    Rounding away from the start (up when growing, down when shrinking) makes every step
    move by at least one replica of every role that still has somewhere to go, which is
    what keeps a role of one replica from stalling the others (rbg #307).
    """
    fraction = min(max(fraction, Fraction(0)), Fraction(1))
    exact = start + fraction * (target - start)
    return math.ceil(exact) if target >= start else math.floor(exact)


def skew_fraction(max_skew: Number, start: int, target: int) -> Fraction:
    """`maxSkew` as a fraction of a role's way: a percent as it is, an int as replicas."""
    if is_percent(max_skew):
        return Fraction(int(str(max_skew)[:-1]), 100)
    span = abs(target - start)
    return Fraction(1) if span == 0 else Fraction(int(max_skew), span)


def interpolate_new(i: int, steps: int, target: int) -> int:
    """LWS DisaggregatedSet: replicas of the new revision after step i of `steps`, ceil(i*target/steps)."""
    return math.ceil(Fraction(i * target, steps))


def interpolate_old(i: int, steps: int, initial: int) -> int:
    """LWS DisaggregatedSet: replicas of the old revision after step i, initial - floor(i*initial/steps)."""
    return initial - math.floor(Fraction(i * initial, steps))
