"""PreferredBand (Kthena's PD-aware draft): a total split by a cost+pressure blend within bands.

The total per unit is the sum of what each role's target asks for (HPA-style, see
metrics.py), rounded up. Its split blends two shares, as Kthena's optimizer does:

- cost share: the total filled from every role's minimum, cheapest replica first
  (cost = GPUs per replica; roles of equal cost share evenly), as Kthena's cost-ordered
  optimizer allocates a total across targets;
- pressure share: each role's own demand over the sum of demands;

    share = costWeight × cost share + (1 − costWeight) × pressure share

and the result is clipped to each role's percent band when the band can hold the total
(bands.py), then rounded without losing the total (rounding.py).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping

from tandem.api.autoscaling import AutoscalingSpec
from tandem.autoscaling.metrics import demand, whole
from tandem.autoscaling.recommendation import Split
from tandem.autoscaling.rounding import quotas_within_bounds, reachable_total
from tandem.autoscaling.signals import Signals


def preferred_band(
    spec: AutoscalingSpec, signals: Signals, units: int, bounds: Mapping[str, tuple[int, int]], gpus_per_replica: Mapping[str, int]
) -> Split:
    config = spec.preferred_band
    assert config is not None, "validation requires the preferredBand block"
    roles = spec.managed_roles
    demands = {role: demand(config.targets[role], role, signals) for role in roles}
    per_unit = {role: demands[role].replicas / units for role in roles}
    total = whole(sum(per_unit.values()))
    fill = cost_fill(total, bounds, gpus_per_replica, roles)
    filled = sum(fill.values())
    cost = {role: fill[role] / filled if filled else 0.0 for role in roles}
    pressure_sum = sum(per_unit.values())
    pressure = {role: per_unit[role] / pressure_sum if pressure_sum else cost[role] for role in roles}
    weight = config.cost_weight
    blend = {role: weight * cost[role] + (1 - weight) * pressure[role] for role in roles}
    bands = {role: (config.bands[role].min_percent, config.bands[role].max_percent) for role in roles if role in config.bands}

    def shares(values: Mapping[str, float]) -> str:
        return "/".join(f"{values[role]:.0%}" for role in roles)

    text = (
        "PreferredBand: "
        + "; ".join(demands[role].text for role in roles)
        + (f" (per unit of {units})" if units > 1 else "")
        + f" -> total {total}, shares {'/'.join(roles)}: pressure {shares(pressure)}, cost {shares(cost)},"
        + f" blend {shares(blend)}"
    )
    return Split(total, blend, text, bands=bands, asks={role: whole(per_unit[role]) for role in roles})


def cost_fill(
    total: int, bounds: Mapping[str, tuple[int, int]], gpus_per_replica: Mapping[str, int], roles: tuple[str, ...]
) -> dict[str, float]:
    """`total` (clamped to the bounds) handed out from every minimum, cheapest role first;
    roles of equal cost share their tier evenly (Kthena breaks such ties by order, which
    would favour whichever role is listed first)."""
    fill = {role: Fraction(bounds[role][0]) for role in roles}
    rest = Fraction(reachable_total(total, {role: bounds[role] for role in roles})) - sum(fill.values())
    for cost in sorted({gpus_per_replica.get(role, 0) for role in roles}):
        tier = [role for role in roles if gpus_per_replica.get(role, 0) == cost]
        room = sum(bounds[role][1] - fill[role] for role in tier)
        given = min(rest, room)
        if given > 0:
            start = sum(fill[role] for role in tier)
            even = quotas_within_bounds(start + given, {role: Fraction(1) for role in tier}, {role: bounds[role] for role in tier})
            fill.update(even)
            rest -= given
    return {role: float(fill[role]) for role in roles}
