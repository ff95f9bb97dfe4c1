"""The engine stand-ins of one API server, by pod: what the simulated kubelet starts, probes,
drains and stops, and the request records that outlive them (`report`)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from tandem.apiserver.engines import timing
from tandem.apiserver.engines.recognition import EngineSpec, recognise
from tandem.apiserver.engines.standin import EngineFaults, RequestLog, StandIn
from tandem.errors import InputError
from tandem.sim.serving.profiles import GPU_NAMES, MODEL_NAMES, GpuProfile, ModelProfile, gpu_profile, model_profile

log = logging.getLogger("tandem.apiserver.engines")
DEFAULT_TIME_SCALE = 1.0


@dataclass
class _Pod:
    namespace: str
    name: str
    uid: str
    ip: str
    spec: EngineSpec
    requests: RequestLog
    standin: StandIn | None
    load_seconds: float
    ready_since: float | None = None  # wall clock: when the kubelet turned it Ready
    deleting_since: float | None = None  # wall clock: when its graceful deletion began
    stopped_at: float | None = None  # wall clock: when its engine stopped taking requests


class EngineHost:
    def __init__(self, time_scale: float = DEFAULT_TIME_SCALE, monotonic: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 lifecycle_scale: float | None = None):
        """`time_scale` multiplies every duration a stand-in waits (load, prefill, decode) and
        the kubelet's preStop and grace periods; `lifecycle_scale`, when given, replaces it for
        the model load, preStop and grace periods only (a test that measures requests at
        their real times need not wait a real model load)."""
        self.time_scale = time_scale
        self.lifecycle_scale = time_scale if lifecycle_scale is None else lifecycle_scale
        self._monotonic, self._wall = monotonic, wall
        self._pods: dict[str, _Pod] = {}  # uid -> the pod, kept after its stand-in stopped
        self._lock = threading.Lock()
        self._models: dict[str, ModelProfile] = {}
        self._gpus: dict[str, GpuProfile] = {}
        self.faults = EngineFaults()  # every stand-in's, present and future

    def set_faults(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """`{"metricsDown": bool}`: every stand-in's `/metrics` answers 503 (true) or again
        as its engine would (false); ValueError on anything else."""
        if set(body) != {"metricsDown"} or not isinstance(body["metricsDown"], bool):
            raise ValueError('the body must be {"metricsDown": true|false}')
        self.faults.metrics_down = body["metricsDown"]
        log.warning("engine stand-ins: metrics %s", "down (a fault set by a test)" if self.faults.metrics_down else "answering again")
        return self.faults.to_dict()

    def recognise(self, pod: Mapping[str, Any], node: Mapping[str, Any] | None) -> EngineSpec | None:
        return recognise(pod, node, MODEL_NAMES, GPU_NAMES)

    def start(self, pod: Mapping[str, Any], spec: EngineSpec, ip: str) -> str | None:
        """Start `pod`'s stand-in on `ip`; None when it listens, else why not (a port that
        cannot be bound: the pod runs without one)."""
        meta = pod["metadata"]
        cost = self._timing(spec)
        load = timing.load_seconds(cost, spec.replica_pods)
        name = f"{meta.get('namespace')}/{meta['name']}"
        requests = RequestLog()
        try:
            standin = StandIn(spec, ip, cost, self.time_scale, requests, name, self._monotonic() + load * self.lifecycle_scale, self._monotonic,
                              self.faults)
        except OSError as exc:
            problem = f"the {spec.engine} stand-in cannot listen on {ip}:{spec.port}: {exc.strerror or exc}; the pod runs without one"
            log.warning("engine stand-in %s: %s", name, problem)
            return problem
        with self._lock:
            self._pods[meta["uid"]] = _Pod(meta.get("namespace") or "", meta["name"], meta["uid"], ip, spec, requests, standin, load)
        return None

    def running(self, uid: str) -> bool:
        pod = self._pods.get(uid)
        return pod is not None and pod.standin is not None

    def running_uids(self) -> list[str]:
        with self._lock:
            return [uid for uid, pod in self._pods.items() if pod.standin is not None]

    def ready_at(self, uid: str) -> float:
        """When (monotonic) its model has loaded."""
        standin = self._pods[uid].standin
        return standin.ready_at if standin is not None else 0.0

    def probe(self, uid: str) -> bool:
        """The readiness probe, asked in-process (no HTTP: the kubelet holds the server's lock)."""
        standin = self._pods[uid].standin
        return standin is not None and standin.serving()

    def turned_ready(self, uid: str) -> None:
        pod = self._pods.get(uid)
        if pod is not None and pod.ready_since is None:
            pod.ready_since = self._wall()

    def deleting(self, uid: str) -> None:
        pod = self._pods.get(uid)
        if pod is not None and pod.deleting_since is None:
            pod.deleting_since = self._wall()

    def stop_accepting(self, uid: str) -> None:
        pod = self._pods.get(uid)
        if pod is not None and pod.standin is not None and not pod.standin.draining:
            pod.stopped_at = self._wall()
            pod.standin.stop_accepting()

    def idle(self, uid: str) -> bool:
        pod = self._pods.get(uid)
        return pod is None or pod.standin is None or pod.standin.idle()

    def close(self, uid: str, wait: bool = False) -> None:
        """Stop `uid`'s stand-in (its ports released before returning when `wait`); its
        records stay."""
        pod = self._pods.get(uid)
        if pod is not None and pod.standin is not None:
            if pod.stopped_at is None:
                pod.stopped_at = self._wall()
            pod.standin.close(wait)
            pod.standin = None

    def close_all(self) -> None:
        """Stop every stand-in, all at once, their ports released before returning."""
        closing = [threading.Thread(target=self.close, args=(uid, True)) for uid in list(self._pods)]
        for thread in closing:
            thread.start()
        for thread in closing:
            thread.join()

    def report(self) -> dict[str, Any]:
        """Every pod that ran a stand-in, and each serving request and KV handoff it received (sorted by namespace,
        name, uid): what `GET /tandem/engines` on the API server answers."""
        with self._lock:
            pods = sorted(self._pods.values(), key=lambda p: (p.namespace, p.name, p.uid))
        return {"timeScale": self.time_scale, "lifecycleScale": self.lifecycle_scale, "pods": [
            {"namespace": p.namespace, "name": p.name, "uid": p.uid, "ip": p.ip, "port": p.spec.port, "bootstrapPort": p.spec.bootstrap_port,
             "engine": p.spec.engine, "role": p.spec.role, "model": p.spec.served_model, "profile": p.spec.profile, "gpu": p.spec.gpu,
             "tp": p.spec.tp, "pp": p.spec.pp, "loadSeconds": p.load_seconds, "running": p.standin is not None, "readySince": p.ready_since, "deletingSince": p.deleting_since,
             "stoppedAt": p.stopped_at, "requests": p.requests.snapshot()}
            for p in pods]}

    def _timing(self, spec: EngineSpec) -> timing.Timing:
        try:
            gpu = self._gpus.get(spec.gpu) or self._gpus.setdefault(spec.gpu, gpu_profile(spec.gpu))
            model = None if spec.profile is None else (self._models.get(spec.profile) or self._models.setdefault(spec.profile, model_profile(spec.profile)))
        except InputError as exc:  # the names come from the bundled lists: not expected
            raise RuntimeError(f"bundled profile unreadable: {exc}") from exc
        return timing.timing(model, gpu, spec.tp, spec.pp)
