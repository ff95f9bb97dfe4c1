"""SLO (Dynamo's planner): prefill sized for a TTFT target, decode for an ITL target.

Dynamo sizes each pool from the predicted token load and the per-GPU throughput that
its profiling says meets the latency target, then corrects by how far the observed
latency is from the expected one, and finally scales both pools down together when
they would exceed a GPU budget. tandem takes the profiled figures as configuration:

    prefill = ceil(input tokens/s  / prefillTokensPerSecondPerReplica × max(1, TTFT p90 / ttftSeconds) / units)
    decode  = ceil(output tokens/s / decodeTokensPerSecondPerReplica  × max(1, ITL p90 / itlSeconds)   / units)

The correction only ever adds capacity (a missed target means the profiled throughput
was optimistic); the budget is applied when the total is split (see scaler.py). A
window without arrivals cannot measure latency, so there a NaN latency means no
correction; with arrivals it is a missing figure, and no action is taken.
"""

from __future__ import annotations

from tandem.api.autoscaling import AutoscalingSpec
from tandem.autoscaling.metrics import figure, whole
from tandem.autoscaling.recommendation import Split
from tandem.autoscaling.signals import Signals, missing


def slo(spec: AutoscalingSpec, signals: Signals, units: int) -> Split:
    config = spec.slo
    assert config is not None, "validation requires the slo block"
    prefill, decode = spec.prefill_role, spec.decode_role  # validation keeps SLO to these two
    arrivals = figure(signals.arrival_rate, "arrival rate")
    input_rate = figure(signals.input_tokens_per_s, "input tokens/s")
    output_rate = figure(signals.output_tokens_per_s, "output tokens/s")
    ttft = _correction(signals.ttft_p90_s, config.ttft_seconds, "TTFT p90", arrivals)
    itl = _correction(signals.itl_p90_s, config.itl_seconds, "ITL p90", arrivals)
    prefill_need = input_rate / config.prefill_tokens_per_second_per_replica * ttft / units
    decode_need = output_rate / config.decode_tokens_per_second_per_replica * itl / units
    p, d = whole(prefill_need), whole(decode_need)
    text = (
        f"SLO: {prefill} {input_rate:,.0f} input tok/s / {config.prefill_tokens_per_second_per_replica:,.0f}"
        f" x TTFT correction {ttft:.2f} = {prefill_need:.2f} -> {p}; {decode} {output_rate:,.0f} output tok/s"
        f" / {config.decode_tokens_per_second_per_replica:,.0f} x ITL correction {itl:.2f} = {decode_need:.2f} -> {d}"
        + (f" (per unit of {units})" if units > 1 else "")
    )
    return Split(p + d, {prefill: p, decode: d}, text, gpu_budget=config.gpu_budget, asks={prefill: p, decode: d})


def _correction(observed: float, target: float, name: str, arrivals: float) -> float:
    """How far the observed latency overshoots its target (1 when it does not)."""
    if missing(observed) and arrivals == 0:
        return 1.0
    return max(1.0, figure(observed, name) / target)
