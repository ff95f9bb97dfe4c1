"""Serving load on the simulated cluster: the bridge between pods and the serving model.

Each group with load gets one `ServingModel`. After every controller pass the driver
reads which replicas are Ready (all their pods Ready, none deleting) and hands that set
to the model; between passes the model runs its requests. The autoscaler reads the
model's figures through `signals`, renamed from the model's prefill/decode to the
group's own role names, just as a metrics pipeline would report them.

A replica that stops being Ready because its pods are being deleted (a scale-down, a
rolling update: every pod gone or carrying a deletionTimestamp, none failed) drains: the
model stops routing to it and lets it finish, for at most the grace period (the leader
pod's `terminationGracePeriodSeconds`, 30 s when unset, as Kubernetes; or the scenario's
override). Any other loss (a pod failed, a node lost, a pod of a multi-node replica gone
while the others stay) is forced: its requests restart at once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from tandem.api.kube import Node
from tandem.api.naming import GROUP_LABEL, POD_INDEX_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.api.resources import ClusterTopology
from tandem.autoscaling.signals import Signals
from tandem.cluster.payloads import PodPayload, as_pod
from tandem.cluster.pods import pod_failed, pod_gpus, pod_ready
from tandem.cluster.replicas import replicas_of_unit
from tandem.sim.serving import GpuProfile, ModelProfile, ReplicaInfo, ServingModel, ServingResults
from tandem.sim.traces import Trace
from tandem.topology import ClusterSnapshot, TopologyView



@dataclass(frozen=True)
class ServingLoad:
    """One group's load, resolved from a scenario: what runs, on what, against which SLO."""

    namespace: str
    name: str
    model: ModelProfile
    gpu: GpuProfile
    prefill_role: str
    decode_role: str
    ttft_slo_s: float
    itl_slo_s: float
    trace: Trace
    window_s: float = 60.0
    cluster_bandwidth_gbps: float = 100.0  # between nodes that share no domain of any level
    pods_per_replica: Mapping[str, int] = field(default_factory=dict)  # by role name; 1 when absent
    # engine behaviour (docs/serving.md)
    kv_block_tokens: int = 16
    preemption: str = "recompute"
    swap_space_gib: float = 4.0
    swap_gbps: float = 25.0
    prefix_caching: bool = True
    chunked_prefill: bool = False
    max_num_batched_tokens: int = 8192
    drain: bool = True
    drain_grace_s: float | None = None  # None: the pod's terminationGracePeriodSeconds (30 s default)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class ServingRun:
    """What the driver keeps per group: the model and the Ready sets it was handed."""

    load: ServingLoad
    model: ServingModel
    replicas: tuple[ReplicaInfo, ...] = ()
    pods_of: dict[str, tuple[tuple[str, ...], float]] = field(default_factory=dict)  # replica id -> (pod uids, grace s)
    drained: int = 0  # replicas that left by draining (graceful), not forced
    timeline: list[tuple[float, int, int, int]] = field(default_factory=list)  # (t, prefill, decode, GPUs serving)


class LoadDriver:
    def __init__(self, loads: list[ServingLoad], cluster: list[dict[str, Any]]):
        bandwidth = _bandwidth(cluster)
        self.runs: dict[str, ServingRun] = {}
        for load in loads:
            model = ServingModel(
                load.model,
                load.gpu,
                functools.partial(bandwidth, fallback=load.cluster_bandwidth_gbps),
                ttft_slo_s=load.ttft_slo_s,
                itl_slo_s=load.itl_slo_s,
                max_prefill_batch_tokens=load.max_num_batched_tokens,
                block_tokens=load.kv_block_tokens,
                preemption=load.preemption,
                swap_space_gib=load.swap_space_gib,
                swap_gbps=load.swap_gbps,
                prefix_caching=load.prefix_caching,
                chunked_prefill=load.chunked_prefill,
            )
            model.add_requests(
                load.trace.arrival_s,
                load.trace.input_tokens,
                load.trace.output_tokens,
                load.trace.prefix_hashes,
                load.trace.prefix_block_tokens,
            )
            self.runs[load.key] = ServingRun(load, model)

    def advance(self, now: float) -> None:
        for run in self.runs.values():
            run.model.advance(now)

    def sync(self, pods: list[dict[str, Any]], now: float) -> None:
        """Hand each model the replicas that are Ready now (only when the set changed)."""
        by_uid: dict[str, dict[str, Any]] | None = None
        for run in self.runs.values():
            ready, pods_of = _ready_replicas(pods, run.load)
            if ready != run.replicas:
                drain: dict[str, float] = {}
                if run.load.drain:
                    if by_uid is None:
                        by_uid = {p["metadata"].get("uid", ""): p for p in pods}
                    kept = {r.id for r in ready}
                    for old in run.replicas:
                        if old.id not in kept and _deleted(run.pods_of[old.id][0], by_uid):
                            drain[old.id] = run.load.drain_grace_s if run.load.drain_grace_s is not None else run.pods_of[old.id][1]
                run.drained += len(drain)
                run.model.set_replicas(now, ready, drain)
                run.replicas = ready
                run.pods_of = pods_of
                kinds = [r.kind for r in ready]
                run.timeline.append((now, kinds.count("prefill"), kinds.count("decode"), sum(r.gpus for r in ready)))

    def sample(self, now: float) -> None:
        """Every model records its replicas' figures since its last sample (the report's
        utilisation, queue and KV curves are drawn from these, at a steady cadence)."""
        for run in self.runs.values():
            run.model.sample(now)

    def signals(self, namespace: str, name: str, now: float) -> Signals | None:
        run = self.runs.get(f"{namespace}/{name}")
        if run is None:
            return None
        raw = run.model.signals(now, run.load.window_s)
        names = {"prefill": run.load.prefill_role, "decode": run.load.decode_role}
        return Signals(
            at=raw.at,
            window_s=raw.window_s,
            roles={names[kind]: figures for kind, figures in raw.roles.items() if kind in names},
            arrival_rate=raw.arrival_rate,
            input_tokens_per_s=raw.input_tokens_per_s,
            output_tokens_per_s=raw.output_tokens_per_s,
            ttft_p90_s=raw.ttft_p90_s,
            itl_p90_s=raw.itl_p90_s,
        )

    def finish(self, end: float) -> None:
        """Run to the end and take a last sample, so the figures cover the whole run."""
        for run in self.runs.values():
            run.model.advance(end)
            run.model.signals(end, run.load.window_s)

    def results(self) -> dict[str, ServingResults]:
        return {key: run.model.results() for key, run in self.runs.items()}


# Kubernetes' default terminationGracePeriodSeconds
DEFAULT_GRACE_S = 30.0


def _deleted(uids: tuple[str, ...], by_uid: dict[str, dict[str, Any]]) -> bool:
    """Every pod of the replica is gone or being deleted, and none failed: a graceful removal."""
    for uid in uids:
        pod = by_uid.get(uid)
        if pod is not None and (not pod["metadata"].get("deletionTimestamp") or pod_failed(as_pod(pod))):
            return False
    return True


def _ready_replicas(
    pods: list[dict[str, Any]], load: ServingLoad
) -> tuple[tuple[ReplicaInfo, ...], dict[str, tuple[tuple[str, ...], float]]]:
    """The group's serving replicas: Ready as the controller counts them
    (`cluster.replicas.replicas_of_unit`: every pod there and Ready), and bound; and per
    replica its pods' uids and the leader's grace period."""
    kinds = {load.prefill_role: "prefill", load.decode_role: "decode"}
    by_unit: dict[int, list[PodPayload]] = {}
    for pod in map(as_pod, pods):
        pod_meta = pod["metadata"]
        labels = pod_meta.get("labels", {})
        if pod_meta.get("namespace") != load.namespace or labels.get(GROUP_LABEL) != load.name or labels.get(ROLE_LABEL) not in kinds:
            continue
        by_unit.setdefault(int(labels[UNIT_LABEL]), []).append(pod)
    out = []
    meta: dict[str, tuple[tuple[str, ...], float]] = {}
    for unit, members in sorted(by_unit.items()):
        replicas, pods_of = replicas_of_unit(members, dict(load.pods_per_replica))
        for replica in replicas:
            replica_pods = pods_of[(replica.role, replica.index)]
            if replica.phase != "Ready" or not all(_serving(p) for p in replica_pods):
                continue
            leader = min(replica_pods, key=lambda p: int(p["metadata"]["labels"].get(POD_INDEX_LABEL, "0")))
            gpus = sum(pod_gpus(p) for p in replica_pods)
            # The leader's uid is part of the identity: a re-created replica starts with an empty KV cache.
            ident = f"{load.key}/{unit}/{replica.role}/{replica.index}@{leader['metadata'].get('uid', '')}"
            out.append(ReplicaInfo(ident, kinds[replica.role], unit, gpus, leader["spec"]["nodeName"]))
            grace = leader["spec"].get("terminationGracePeriodSeconds")
            meta[ident] = (
                tuple(p["metadata"].get("uid", "") for p in replica_pods),
                DEFAULT_GRACE_S if grace is None else float(grace),
            )
    return tuple(out), meta


def _serving(pod: PodPayload) -> bool:
    if pod["metadata"].get("deletionTimestamp") or not pod["spec"].get("nodeName") or pod_failed(pod):
        return False
    return pod_ready(pod)


class Bandwidth(Protocol):
    def __call__(self, a: str, b: str, fallback: float) -> float: ...


def _bandwidth(cluster: list[dict[str, Any]]) -> Bandwidth:
    """bandwidth(a, b, fallback): the stated bandwidth of the nodes' lowest common level,
    or of the nearest broader level that states one, else `fallback`."""
    topologies = [ClusterTopology.model_validate(o) for o in cluster if o.get("kind") == "ClusterTopology"]
    nodes = [Node.model_validate(o) for o in cluster if o.get("kind") == "Node"]
    if not topologies:

        def unknown(a: str, b: str, fallback: float) -> float:
            return 7200.0 if a == b else fallback

        return unknown
    snapshot, _ = ClusterSnapshot.build(nodes)
    view = TopologyView.build(topologies[0], snapshot)
    levels = topologies[0].spec.levels
    cache: dict[tuple[str, str], float | None] = {}

    def bandwidth(a: str, b: str, fallback: float) -> float:
        key = (a, b) if a <= b else (b, a)
        if key not in cache:
            index = snapshot.node_index
            depth = view.lowest_common_depth(index[a], index[b]) if a != b else len(levels)
            stated = [lv.link_bandwidth_gbps for lv in levels[:depth] if lv.link_bandwidth_gbps]
            cache[key] = stated[-1] if stated else None
        return cache[key] or fallback

    return bandwidth
