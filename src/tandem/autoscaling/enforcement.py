"""`ratioEnforcement: raiseShort`: no role below its own need; the role short of the ratio is raised.

The ratio-keeping policies know two things: each role's own need (`Split.asks`) and the
ratio or band the roles should keep. When the needs break the ratio something must give:

- `keepTotal` (the default, scaler._split) keeps the policy's total and re-splits it, so
  the GPU count stays what was asked and a role can end below its own signal (6 prefill /
  2 decode asked at 1:1 -> 4/4);
- `raiseShort` (Kthena's current rule) keeps every role at least at its own need and raises
  the role that is short of the ratio (-> 6/6): no role is starved, at the price of GPUs.

With two roles every band is a lower bound on one role: a role's share at least its
minPercent, and the other's at most its maxPercent is this one's share at least
100 - maxPercent. In integers `count >= ceil(total * m / 100)` is
`count >= ceil(m * other / (100 - m))`, so raising each role to that, in turn, climbs to
the smallest counts above the needs that hold both bands (each raise is monotone, so the
first fixed point is the least one). A role that would have to pass its maximum stops
there, and the reason says the band could not be kept: raiseShort never lowers a role
below its need to keep a band.

With three or more roles (a router, an encoder beside prefill and decode) a role above
its maxPercent needs the *others* to grow, and which of them is a choice. There the
least total T at or above the needs is found whose per-role ranges
[max(need, ceil(T·min/100)), min(max, floor(T·max/100))] can hold it, and the replicas
above those floors are shared by need (rounding.apportion): the total is the least that
holds every band, no role goes below its need, and when no total within the maxima can
hold them, the needs stand and the reason says the band was not kept.
"""

from __future__ import annotations

import math
from typing import Mapping

from tandem.autoscaling.rounding import apportion

Bounds = Mapping[str, tuple[int, int]]


def raise_short(asks: Mapping[str, int], bands: Mapping[str, tuple[int, int]], bounds: Bounds) -> tuple[dict[str, int], list[str]]:
    """Counts of the two roles of `bounds`: each at least its ask (within its bounds), raised until the
    percent `bands` hold, each at most its maximum; and notes for the reason line."""
    roles = list(bounds)
    if len(roles) < 2:
        raise ValueError(f"raiseShort needs at least two roles, got {roles}")
    if len(roles) > 2:
        return _raise_many(asks, bands, bounds)
    asked = {role: min(max(asks.get(role, 0), bounds[role][0]), bounds[role][1]) for role in roles}
    floors = {role: _floor_percent(role, roles, bands) for role in roles}
    counts = dict(asked)
    changed = True
    while changed:  # terminates: every pass raises a count, and no count passes its maximum
        changed = False
        for role in roles:
            need = _least(floors[role], sum(counts.values()) - counts[role])
            raised = int(min(max(counts[role], need), bounds[role][1]))  # an int: `need` is inf only when the maximum binds
            if raised != counts[role]:
                counts[role], changed = raised, True
    notes = []
    for role in roles:
        (other,) = [r for r in roles if r != role]
        need = _least(floors[role], counts[other])
        if counts[role] < need:
            wanted = "every replica" if math.isinf(need) else f"{need}"
            notes.append(
                f"raiseShort: {role} at its maximum {counts[role]} cannot hold the band beside {other} {counts[other]}"
                f" (it needs {wanted}): band not kept, no role lowered below its signal"
            )
        elif counts[role] > asked[role]:
            notes.append(f"raiseShort: {role} raised from {asked[role]} to {counts[role]} to hold the band")
    return counts, notes


def _floor_percent(role: str, roles: list[str], bands: Mapping[str, tuple[int, int]]) -> int:
    """The smallest share `role` may have: its own minPercent, or what the other's maxPercent leaves."""
    (other,) = [r for r in roles if r != role]
    return max(bands.get(role, (0, 100))[0], 100 - bands.get(other, (0, 100))[1])


def _least(percent: int, other: int) -> float:
    """The fewest replicas that are at least `percent`% of themselves plus `other`."""
    if percent <= 0 or other == 0:
        return 0
    if percent >= 100:
        return math.inf
    return -(-percent * other // (100 - percent))


def _raise_many(asks: Mapping[str, int], bands: Mapping[str, tuple[int, int]], bounds: Bounds) -> tuple[dict[str, int], list[str]]:
    """raiseShort for three or more roles (see the module docstring): the least total at or
    above the needs whose bands, each role floored at its need, can hold it; the replicas
    above those floors shared by need (rounding.apportion)."""
    roles = list(bounds)
    asked = {role: min(max(asks.get(role, 0), bounds[role][0]), bounds[role][1]) for role in roles}
    for total in range(sum(asked.values()), sum(hi for _, hi in bounds.values()) + 1):
        limits = {}
        for role in roles:
            low, high = bands.get(role, (0, 100))
            limits[role] = (max(asked[role], -(-total * low // 100)), min(bounds[role][1], total * high // 100))
        if all(lo <= hi for lo, hi in limits.values()) and sum(lo for lo, _ in limits.values()) <= total <= sum(hi for _, hi in limits.values()):
            counts = apportion(total, {role: float(asked[role]) for role in roles}, limits)
            notes = [f"raiseShort: {role} raised from {asked[role]} to {counts[role]} to hold the band" for role in roles if counts[role] > asked[role]]
            return counts, notes
    return asked, ["raiseShort: no total within the roles' maximums holds the bands above every need: band not kept, no role lowered below its signal"]
