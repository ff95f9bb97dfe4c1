"""What a serving run measured: per request, per replica, and per-replica samples over time.

Arrays, one entry per request in arrival order, so that a caller slices and aggregates
with numpy. A latency is NaN where it was not measured: `ttft_s` until the first token,
`e2e_s` and `itl_s` unless the request completed (and `itl_s` for one-token requests,
which have no inter-token gap).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

LATENCIES = ("ttft_s", "itl_s", "e2e_s", "max_itl_s", "kv_transfer_s", "prefill_s")


@dataclass(frozen=True)
class ReplicaSamples:
    """Long format: one row per (sample time, replica present then).

    Samples are taken at every `set_replicas` and `signals` call; rates and the busy
    fraction cover the interval since the previous sample.
    """

    at_s: np.ndarray  # float, when sampled
    replica: np.ndarray  # int, index into ServingResults.replica_ids
    queue_depth: np.ndarray  # int: prefill: prompts queued (not running); decode: transferred, waiting for a batch slot
    kv_utilization: np.ndarray  # float 0..1 (allocated blocks / blocks); NaN for prefill
    tokens_per_s: np.ndarray  # float: prefill prompt tokens/s, decode generated tokens/s
    busy_fraction: np.ndarray  # float 0..1: share of the interval with a batch running


@dataclass(frozen=True)
class ServingResults:
    # per request, in arrival order
    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    ttft_s: np.ndarray  # arrival -> first token delivered (the first KV transfer done)
    itl_s: np.ndarray  # TPOT: (e2e - ttft) / (output_tokens - 1)
    max_itl_s: np.ndarray  # the longest gap between two consecutive tokens
    e2e_s: np.ndarray  # arrival -> last token
    kv_transfer_s: np.ndarray  # seconds of KV transfer, summed over attempts
    prefill_s: np.ndarray  # seconds of prefill batches the request was in, summed over attempts
    prefill_replica: np.ndarray  # int index into replica_ids of the last prefill replica; -1 if none
    decode_replica: np.ndarray  # int index of the last decode replica; -1 if none
    restarts: np.ndarray  # times the request lost prefill work or its KV to a leaving replica
    completed: np.ndarray  # bool
    preemptions: np.ndarray  # times a decode replica preempted the request for KV blocks
    cached_tokens: np.ndarray  # prompt tokens served from a prefill replica's prefix cache, all attempts
    prefilled_tokens: np.ndarray  # prompt tokens of the prefills it completed (hits included), all attempts
    drain_requeued: np.ndarray  # times a draining replica's grace period ran out with it unfinished there
    # per replica that ever took part, in order of joining
    replica_ids: tuple[str, ...]
    replica_kinds: tuple[str, ...]
    replica_units: np.ndarray
    replica_gpus: np.ndarray
    replica_joined_s: np.ndarray
    replica_left_s: np.ndarray  # NaN while present
    replica_drain_s: np.ndarray  # when it began to drain (it took no new request from then); NaN if it never drained
    replica_kv_capacity_tokens: np.ndarray  # 0 for prefill
    replica_peak_kv_utilization: np.ndarray  # highest allocated blocks / blocks ever; NaN for prefill
    replica_tokens: np.ndarray  # prefill: prompt tokens processed; decode: tokens generated
    samples: ReplicaSamples
    ttft_slo_s: float
    itl_slo_s: float

    def slo_met(self, ttft_slo: float | None = None, itl_slo: float | None = None) -> np.ndarray:
        """Per request: completed, TTFT <= target and ITL <= target (a one-token request has
        no ITL and meets that half). Targets default to the model's SLOs."""
        ttft_target = self.ttft_slo_s if ttft_slo is None else ttft_slo
        itl_target = self.itl_slo_s if itl_slo is None else itl_slo
        with np.errstate(invalid="ignore"):
            itl_ok = np.isnan(self.itl_s) | (self.itl_s <= itl_target)
            met: np.ndarray = self.completed & (self.ttft_s <= ttft_target) & itl_ok
        return met

    def prefix_hit_rate(self) -> float | None:
        """Prompt tokens served from prefix caches / prompt tokens prefilled (None before any prefill)."""
        queried = int(self.prefilled_tokens.sum())
        return None if queried == 0 else float(self.cached_tokens.sum()) / queried

    def percentiles(
        self, metric: str = "ttft_s", qs: Sequence[float] = (50, 90, 99), completed_only: bool = True
    ) -> dict[float, float]:
        """Percentiles (0..100) of one latency over the requests that have it (NaN if none)."""
        if metric not in LATENCIES:
            raise ValueError(f"unknown metric {metric!r}; one of {', '.join(LATENCIES)}")
        values = getattr(self, metric)
        if completed_only:
            values = values[self.completed]
        values = values[~np.isnan(values)]
        if values.size == 0:
            return {float(q): float("nan") for q in qs}
        return {float(q): float(v) for q, v in zip(qs, np.percentile(values, list(qs)))}
