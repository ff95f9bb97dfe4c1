"""Independent: the baseline, one Kubernetes-HPA-style autoscaler per role.

Each role is sized from its own target alone: desired = ceil(needed replicas / units),
kept at the current count while the usage ratio is within `tolerancePercent` of 1
(HPA's 10% default), then clamped to the role's bounds. Nothing keeps the roles in
ratio; that is what the other policies are compared against.
"""

from __future__ import annotations

from typing import Mapping

from tandem.api.autoscaling import AutoscalingSpec
from tandem.autoscaling.metrics import demand, whole
from tandem.autoscaling.recommendation import PerRole
from tandem.autoscaling.signals import Signals


def independent(
    spec: AutoscalingSpec, signals: Signals, units: int, current: Mapping[str, int], bounds: Mapping[str, tuple[int, int]]
) -> PerRole:
    config = spec.independent
    assert config is not None, "validation requires the independent block"
    tolerance = config.tolerance_percent / 100
    desired: dict[str, int] = {}
    parts: list[str] = []
    for role in spec.managed_roles:
        found = demand(config.targets[role], role, signals)
        if found.usage is not None and abs(found.usage - 1) <= tolerance:
            wanted, why = current[role], f"within {config.tolerance_percent}% of target, keep {current[role]}"
        else:
            wanted = whole(found.replicas / units)
            why = f"{wanted}" + (f" per unit of {units}" if units > 1 else "")
        lo, hi = bounds[role]
        desired[role] = min(max(wanted, lo), hi)
        parts.append(f"{found.text} -> {why}")
    return PerRole(desired, "Independent: " + "; ".join(parts))
