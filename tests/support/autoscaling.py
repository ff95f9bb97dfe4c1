"""Builders for autoscaling tests: a spec with every policy's block, signals, and a tiny
closed loop that applies each decision at once (replicas Ready immediately)."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping

from tandem.api.autoscaling import AutoscalingSpec
from tandem.autoscaling import AutoscalerState, RoleSignals, ScaleDecision, Signals, scale

NAN = math.nan
POLICIES = ("FixedRatio", "PreferredBand", "SLO", "Independent")
BOUNDS = {"prefill": (1, 8), "decode": (1, 16)}
GPUS = {"prefill": 8, "decode": 8}

# The suggested shape from the issue, every block present so `policy` alone switches.
SPEC: dict[str, Any] = {
    "policy": "FixedRatio",
    "intervalSeconds": 15,
    "metricMaxAgeSeconds": 60,
    "roles": {"prefill": {"minReplicas": 1, "maxReplicas": 8}, "decode": {"minReplicas": 1, "maxReplicas": 16}},
    "stabilization": {"scaleUpSeconds": 0, "scaleDownSeconds": 300},
    "panic": {"thresholdPercent": 200, "windowSeconds": 60},
    "fixedRatio": {"ratio": {"prefill": 1, "decode": 2}, "decodeTokensPerSecondPerReplica": 1500},
    "preferredBand": {
        "bands": {"prefill": {"minPercent": 20, "maxPercent": 50}, "decode": {"minPercent": 50, "maxPercent": 80}},
        "costWeight": 0.5,
        "targets": {"prefill": {"metric": "queueDepth", "value": 4}, "decode": {"metric": "kvUtilization", "value": 0.7}},
    },
    "slo": {
        "ttftSeconds": 2.0,
        "itlSeconds": 0.05,
        "gpuBudget": 128,
        "prefillTokensPerSecondPerReplica": 20000,
        "decodeTokensPerSecondPerReplica": 1500,
    },
    "independent": {
        "targets": {"prefill": {"metric": "queueDepth", "value": 4}, "decode": {"metric": "kvUtilization", "value": 0.7}},
        "tolerancePercent": 10,
    },
}


def spec(policy: str = "FixedRatio", **changes: Any) -> AutoscalingSpec:
    """The suggested spec with `policy`; `changes` replace top-level wire fields (camelCase)."""
    raw = copy.deepcopy(SPEC)
    raw["policy"] = policy
    raw.update(changes)
    return AutoscalingSpec.model_validate(raw)


def role(replicas: int, queue: float = 0.0, busy: float = 0.5, kv: float = 0.5, tokens: float = 0.0) -> RoleSignals:
    return RoleSignals(replicas=replicas, queue_depth=queue, busy_fraction=busy, kv_utilization=kv, tokens_per_s=tokens)


def signals(
    at: float = 0.0,
    prefill: RoleSignals | None = None,
    decode: RoleSignals | None = None,
    *,
    arrival_rate: float = 1.0,
    input_tokens_per_s: float = 0.0,
    output_tokens_per_s: float = 0.0,
    ttft: float = 0.5,
    itl: float = 0.02,
) -> Signals:
    roles = {name: found for name, found in (("prefill", prefill), ("decode", decode)) if found is not None}
    return Signals(
        at=at,
        window_s=60.0,
        roles=roles,
        arrival_rate=arrival_rate,
        input_tokens_per_s=input_tokens_per_s,
        output_tokens_per_s=output_tokens_per_s,
        ttft_p90_s=ttft,
        itl_p90_s=itl,
    )


def world(level: float, replicas: Mapping[str, int], units: int, at: float) -> Signals:
    """Signals of a service under `level` requests/s whose every figure scales with the load,
    so that each policy's recommendation depends on the level only (not on the replicas):
    queues and token rates are totals; KV use falls as decode replicas are added."""
    ready_p, ready_d = replicas["prefill"] * units, replicas["decode"] * units
    return signals(
        at,
        role(ready_p, queue=2.0 * level, busy=0.5, kv=NAN, tokens=2000.0 * level),
        role(ready_d, queue=0.0, busy=0.5, kv=0.35 * level / max(ready_d, 1), tokens=400.0 * level),
        arrival_rate=level,
        input_tokens_per_s=2000.0 * level,
        output_tokens_per_s=400.0 * level,
        ttft=0.5,
        itl=0.02,
    )


@dataclass(frozen=True)
class Step:
    at: float
    decision: ScaleDecision


def run(
    autoscaling: AutoscalingSpec,
    levels: Callable[[float], float],
    *,
    until: float,
    start: Mapping[str, int],
    units: int = 1,
    bounds: Mapping[str, tuple[int, int]] = BOUNDS,
    gpus: Mapping[str, int] = GPUS,
    interval: float | None = None,
    make: Callable[[float, Mapping[str, int], int, float], Signals] = world,
) -> list[Step]:
    """Decide every interval from t=0 to `until`, applying each decision at once."""
    every = interval if interval is not None else autoscaling.interval_seconds
    current, state, steps = dict(start), AutoscalerState(), []
    t = 0.0
    while t <= until:
        decision = scale(autoscaling, bounds, gpus, current, units, make(levels(t), current, units, t), state, t)
        steps.append(Step(t, decision))
        current, state = dict(decision.desired), decision.state
        t += every
    return steps


def change_times(steps: Iterable[Step]) -> list[float]:
    return [step.at for step in steps if step.decision.changed]


def with_figure(found: Signals, role_name: str | None, **figures: float) -> Signals:
    """`found` with some figures replaced: of one role, or of the group when role_name is None."""
    if role_name is None:
        return replace(found, **figures)
    roles = dict(found.roles)
    roles[role_name] = replace(roles[role_name], **figures)
    return replace(found, roles=roles)
