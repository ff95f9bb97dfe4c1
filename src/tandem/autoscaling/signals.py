"""What the autoscaler reads: per-role load figures over a recent window.

A real cluster fills these from its metrics pipeline, the simulator from its serving
model. Every figure may be NaN (not measured); a policy that needs a NaN figure, or a
`Signals` older than the configured maximum age, takes no action.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class RoleSignals:
    replicas: int  # Ready replicas of the role, all units together
    queue_depth: float  # requests waiting for this role, all replicas together
    busy_fraction: float  # mean share of the window the role's replicas were working (0..1)
    kv_utilization: float  # mean KV-cache use of the role's replicas (0..1); NaN where no KV is held
    tokens_per_s: float  # prefill: prompt tokens processed/s; decode: tokens generated/s


@dataclass(frozen=True)
class Signals:
    at: float  # when measured, in the caller's clock (seconds)
    window_s: float  # the window the rates and percentiles cover
    roles: Mapping[str, RoleSignals]  # by role name
    arrival_rate: float  # requests/s
    input_tokens_per_s: float  # prompt tokens arriving per second
    output_tokens_per_s: float  # tokens/s the arriving requests will ask to generate
    ttft_p90_s: float  # NaN when no request got its first token in the window
    itl_p90_s: float  # over requests completed in the window; NaN when none completed


def missing(value: float | None) -> bool:
    """True for a figure that was not measured."""
    return value is None or (isinstance(value, float) and math.isnan(value))
