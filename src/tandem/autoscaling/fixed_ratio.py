"""FixedRatio (HeteroScale, arXiv 2508.19559): one signal, decode tokens/s, sizes every pool.

Decode replicas per unit = ceil(decode tokens/s / per-replica target / units); the total
is then the smallest that holds them at the configured ratio, so decode never gets fewer
than the signal asks for: total = ceil(decode × Σ ratio / d) (two roles: (p + d) / d).
Every other managed role (prefill, a router, an encoder, ...) asks for its share beside
decode, ceil(decode × r / d).
"""

from __future__ import annotations

from tandem.api.autoscaling import AutoscalingSpec
from tandem.autoscaling.metrics import MissingSignal, figure, role_signals, whole
from tandem.autoscaling.recommendation import Split
from tandem.autoscaling.signals import Signals


def fixed_ratio(spec: AutoscalingSpec, signals: Signals, units: int) -> Split:
    config = spec.fixed_ratio
    assert config is not None, "validation requires the fixedRatio block"
    roles, decode = spec.managed_roles, spec.decode_role
    found = role_signals(signals, decode)
    if found.replicas <= 0:
        raise MissingSignal(f"no Ready {decode} replicas to measure tokens/s")
    rate = figure(found.tokens_per_s, f"{decode} tokensPerSecond")
    per_replica = config.decode_tokens_per_second_per_replica
    needed = rate / per_replica / units
    decode_replicas = whole(needed)
    ratio = {role: config.ratio[role] for role in roles}
    d = ratio[decode]
    total = -(-decode_replicas * sum(ratio.values()) // d)
    per_unit = f" / {units} units" if units > 1 else ""
    text = (
        f"FixedRatio: {decode} {rate:,.0f} tok/s / {per_replica:,.0f} per replica{per_unit} = {needed:.2f}"
        f" -> {decode} {decode_replicas}, total {total} at {':'.join(roles)} {':'.join(str(ratio[r]) for r in roles)}"
    )
    asks = {role: decode_replicas if role == decode else -(-decode_replicas * ratio[role] // d) for role in roles}
    return Split(total, ratio, text, asks=asks)
