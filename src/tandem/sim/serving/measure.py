"""What the serving model reports: the autoscaler's load signals, per-replica samples, and
the results (per request and per replica)."""

from __future__ import annotations

import bisect
import math

import numpy as np

from tandem.autoscaling.signals import RoleSignals, Signals
from tandem.sim.serving.admission import Admission
from tandem.sim.serving.decode import DecodeStage
from tandem.sim.serving.events import EventQueue
from tandem.sim.serving.replicas import DecodeReplica, Fleet, PrefillReplica
from tandem.sim.serving.requests import Requests, RequestState
from tandem.sim.serving.results import ReplicaSamples, ServingResults
from tandem.sim.serving.routing import Router


class Measurements:
    """Reads the model's state; keeps only the per-replica samples."""

    def __init__(
        self, requests: Requests, fleet: Fleet, events: EventQueue, router: Router, admission: Admission, decoding: DecodeStage
    ) -> None:
        self.requests = requests
        self.fleet = fleet
        self.events = events
        self.router = router
        self.admission = admission
        self.decoding = decoding
        self._last_sample_at = 0.0
        self._samples: dict[str, list[float]] = {key: [] for key in ("at", "replica", "queue", "kv", "tokens_per_s", "busy")}

    def signals(self, window_s: float) -> Signals:
        """Load figures over (now - window_s, now], roles keyed "prefill" and "decode"."""
        now = self.events.now
        fleet = self.fleet
        requests = self.requests
        start = now - window_s
        prefills = list(fleet.prefills.values())
        decodes = list(fleet.decodes.values())
        tokens = {"prefill": 0.0, "decode": 0.0}
        busy: dict[str, list[float]] = {"prefill": [], "decode": []}
        for replica in fleet.all:
            if not (replica.left_at <= start):  # NaN (present) or left within the window
                seconds, count = replica.work(start, now)
                tokens[replica.info.kind] += count
                if math.isnan(replica.left_at) and replica.info.id not in fleet.draining:
                    begin = max(start, replica.joined_at)
                    busy[replica.info.kind].append(min(1.0, seconds / (now - begin)) if now > begin else 0.0)
        roles = {
            "prefill": RoleSignals(
                replicas=len(prefills),
                queue_depth=float(len(self.router.waiting) + sum(len(r.queue) for r in prefills)),
                busy_fraction=_mean(busy["prefill"]),
                kv_utilization=math.nan,
                tokens_per_s=tokens["prefill"] / window_s,
            ),
            "decode": RoleSignals(
                replicas=len(decodes),
                queue_depth=float(self.admission.waiting() + sum(len(d.joiners) + len(d.resume) for d in decodes)),
                busy_fraction=_mean(busy["decode"]),
                kv_utilization=_mean([self.decoding.allocated_blocks(d) / d.blocks for d in decodes]),
                tokens_per_s=tokens["decode"] / window_s,
            ),
        }
        low = int(np.searchsorted(requests.arrival, start, side="right"))
        high = int(np.searchsorted(requests.arrival, now, side="right"))
        return Signals(
            at=now,
            window_s=window_s,
            roles=roles,
            arrival_rate=(high - low) / window_s,
            input_tokens_per_s=float(requests.input[low:high].sum()) / window_s,
            output_tokens_per_s=float(requests.output[low:high].sum()) / window_s,
            ttft_p90_s=_p90_since(requests.ttft_at, requests.ttft_values, start),
            itl_p90_s=_p90_since(requests.done_at, requests.done_itl, start),
        )

    def sample(self) -> None:
        """Record each present replica's figures over the interval since the last sample."""
        fleet = self.fleet
        now = self.events.now
        start = self._last_sample_at
        span = now - start
        columns = self._samples
        present = list(fleet.prefills.values()) + list(fleet.decodes.values()) + list(fleet.draining.values())
        for replica in sorted(present, key=lambda r: r.index):
            busy, tokens = replica.work(start, now)
            if isinstance(replica, PrefillReplica):
                queue, kv = len(replica.queue), math.nan
            else:
                queue, kv = len(replica.joiners) + len(replica.resume), self.decoding.allocated_blocks(replica) / replica.blocks
            begin = max(start, replica.joined_at)
            columns["at"].append(now)
            columns["replica"].append(replica.index)
            columns["queue"].append(queue)
            columns["kv"].append(kv)
            columns["tokens_per_s"].append(tokens / span if span > 0 else math.nan)
            columns["busy"].append(min(1.0, busy / (now - begin)) if now > begin else math.nan)
        self._last_sample_at = now

    def results(self, ttft_slo_s: float, itl_slo_s: float) -> ServingResults:
        """Everything measured so far; requests not finished have NaN e2e/ITL and completed False."""
        requests = self.requests
        replicas = self.fleet.all
        done = RequestState.DONE
        completed = np.array([state is done for state in requests.state], dtype=bool)
        columns = self._samples
        return ServingResults(
            arrival_s=requests.arrival.copy(),
            input_tokens=requests.input.copy(),
            output_tokens=requests.output.copy(),
            ttft_s=requests.ttft.copy(),
            itl_s=np.where(completed, requests.itl, math.nan),
            max_itl_s=np.where(completed, requests.max_gap, math.nan),
            e2e_s=np.where(completed, requests.e2e, math.nan),
            kv_transfer_s=requests.transfer_s.copy(),
            prefill_s=requests.prefill_s.copy(),
            prefill_replica=requests.prefill_replica.copy(),
            decode_replica=requests.decode_replica.copy(),
            restarts=requests.restarts.copy(),
            completed=completed,
            preemptions=requests.preemptions.copy(),
            cached_tokens=requests.cached.copy(),
            prefilled_tokens=requests.prefilled.copy(),
            drain_requeued=requests.drain_requeued.copy(),
            replica_ids=tuple(r.info.id for r in replicas),
            replica_kinds=tuple(r.info.kind for r in replicas),
            replica_units=np.array([r.info.unit for r in replicas], dtype=np.int64),
            replica_gpus=np.array([r.info.gpus for r in replicas], dtype=np.int64),
            replica_joined_s=np.array([r.joined_at for r in replicas], dtype=float),
            replica_left_s=np.array([r.left_at for r in replicas], dtype=float),
            replica_drain_s=np.array([r.drain_at for r in replicas], dtype=float),
            replica_kv_capacity_tokens=np.array(
                [r.capacity if isinstance(r, DecodeReplica) else 0 for r in replicas], dtype=np.int64
            ),
            replica_peak_kv_utilization=np.array(
                [r.peak_blocks / r.blocks if isinstance(r, DecodeReplica) else math.nan for r in replicas], dtype=float
            ),
            replica_tokens=np.array([r.total_tokens for r in replicas], dtype=float),
            samples=ReplicaSamples(
                at_s=np.array(columns["at"], dtype=float),
                replica=np.array(columns["replica"], dtype=np.int64),
                queue_depth=np.array(columns["queue"], dtype=np.int64),
                kv_utilization=np.array(columns["kv"], dtype=float),
                tokens_per_s=np.array(columns["tokens_per_s"], dtype=float),
                busy_fraction=np.array(columns["busy"], dtype=float),
            ),
            ttft_slo_s=ttft_slo_s,
            itl_slo_s=itl_slo_s,
        )


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def _p90_since(times: list[float], values: list[float], start: float) -> float:
    """p90 of the values logged after `start` (the logs are in time order)."""
    first = bisect.bisect_right(times, start)
    if first >= len(values):
        return math.nan
    return float(np.percentile(values[first:], 90))
