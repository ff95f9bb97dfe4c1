"""What a policy recommends, before stabilisation, panic and rounding are applied.

Two shapes. The ratio-keeping policies (FixedRatio, PreferredBand, SLO) recommend one
total per unit and how to share it, and what each role's own signal asks for (`asks`, which
`ratioEnforcement: raiseShort` keeps as a floor); the split's counts then go through each role's
stabilisation window, which for a fixed share is the same as stabilising the total (see
docs/autoscaling.md, "Stabilisation"). The Independent baseline recommends each role on its own,
as one HPA per role would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping


@dataclass(frozen=True)
class Split:
    total: int  # replicas per unit, managed roles together, before bounds
    weights: Mapping[str, float]  # how to share it, by role (need not sum to 1)
    text: str  # how the policy got there, for the reason line
    bands: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # percent bands by role
    gpu_budget: int | None = None  # GPUs for the managed roles, all units together
    # Replicas per unit each role's own signal asks for (FixedRatio: decode's, and prefill's
    # share of the ratio); `raiseShort` never goes below them (within the role's bounds).
    asks: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PerRole:
    desired: Mapping[str, int]  # replicas per unit, by role, within the role's bounds
    text: str
