"""From measured figures to replicas: what one role's target says it needs.

Kubernetes' HPA computes desired = ceil(current × metric / target) over the pods that
report the metric. For a total such as a queue or a token rate that is simply
total / target; for a mean such as KV-cache use it is ready × mean / target. Signals
are totals over all units, so these are replicas across all units; callers divide by
the number of units.

A figure that was not measured (NaN), is infinite or negative, or a mean with no Ready
replica behind it, raises `MissingSignal`: the decision then takes no action and its
reason names the figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tandem.api.autoscaling import MetricTarget
from tandem.autoscaling.signals import RoleSignals, Signals, missing

# A replica count computed from floats can land a hair above an integer (12.000000000001);
# rounding that up would add a replica nobody asked for.
_EPSILON = 1e-9
# Far above any count the API accepts (int32), far below where floats lose integers.
_CAP = 2**40


class MissingSignal(Exception):
    """A figure a policy needs was not measured; the message names it."""


def whole(replicas: float) -> int:
    """Replicas rounded up, tolerant of float noise; never negative."""
    return max(0, math.ceil(min(replicas, _CAP) - _EPSILON))


def number(value: float) -> str:
    """A figure as a person reads it in a reason: 12,400 or 0.85, never 1.24e+04."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def figure(value: float, name: str) -> float:
    """A measured figure, or MissingSignal when it is not usable."""
    if missing(value):
        raise MissingSignal(f"{name} not measured (NaN)")
    if not math.isfinite(value) or value < 0:
        raise MissingSignal(f"{name} is not a usable figure ({value})")
    return float(value)


def role_signals(signals: Signals, role: str) -> RoleSignals:
    found = signals.roles.get(role)
    if found is None:
        raise MissingSignal(f"no signals for role {role!r}")
    return found


@dataclass(frozen=True)
class Demand:
    replicas: float  # replicas the target asks for, all units together
    usage: float | None  # metric / target per Ready replica (HPA's usage ratio); None without any
    text: str  # e.g. "decode kvUtilization 0.85 x 6 ready / 0.7 = 7.29"


def demand(target: MetricTarget, role: str, signals: Signals) -> Demand:
    """Replicas of `role` that `target` asks for (see the module docstring)."""
    found = role_signals(signals, role)
    ready = found.replicas
    metric, value = target.metric, target.value
    if metric in ("queueDepth", "tokensPerSecond"):
        total = figure(found.queue_depth if metric == "queueDepth" else found.tokens_per_s, f"{role} {metric}")
        needed = total / value
        usage = needed / ready if ready > 0 else None
        return Demand(needed, usage, f"{role} {metric} {number(total)} / {value:g} per replica = {needed:.2f}")
    source = {
        "busyFraction": found.busy_fraction,
        "kvUtilization": found.kv_utilization,
        "ttftSeconds": signals.ttft_p90_s,
        "itlSeconds": signals.itl_p90_s,
    }[metric]
    measured = figure(source, f"{role} {metric}")
    if ready <= 0:
        raise MissingSignal(f"no Ready {role} replicas to measure {metric}")
    usage = measured / value
    needed = ready * usage
    return Demand(needed, usage, f"{role} {metric} {number(measured)} x {ready} ready / {value:g} = {needed:.2f}")
