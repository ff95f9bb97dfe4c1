"""What the cluster does to pods once tandem lets them go: bind, start, fail.

A pod whose tandem gate is gone and that carries a hostname selector is bound after a
bind latency (kube-scheduler's work). A delegated group's pods are placed by the stand-in of
their scheduler (`tandem.schedulers`) when the store has that scheduler's gang kind
registered (`MemoryStore.register_kind`): its gang statuses, pod conditions and lifted
gates are written at once, its binds after the bind latency (the nodes they will take
count as taken meanwhile); Kueue's pods, once admitted, by kube-scheduler's first fit. A bound pod becomes Ready after an image pull plus
a model load drawn from a seeded log-normal around a median: per `namespace/group/role`
when the scenario states one (a serving role: its cold start, from the model's size and a
load bandwidth, see `sim.scenario.cold_start_seconds`), else per role, else `"*"`.
Readiness waits for the model, as a readiness probe on the engine's health endpoint does. A failed node fails its pods and
drops out of Ready until it recovers. A backend named in `paused` has its scheduler stopped
(the fault campaign's hook): its stand-in writes nothing, binds nothing, until it is taken
out again; binds it planned before stay on their way, as a bind already sent does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np

from tandem.api.naming import GATE, HOSTNAME_LABEL
from tandem.api.naming import GROUP_LABEL, ROLE_LABEL
from tandem.cluster.index import Change
from tandem.cluster.memory import MemoryStore
from tandem.cluster.payloads import as_pod
from tandem.cluster.pods import pod_ready
from tandem.backends.delegated_kinds import DELEGATED_KINDS
from tandem.errors import ApiError
from tandem.schedulers import kueue
from tandem.schedulers.apply import apply_decision, set_unscheduled
from tandem.schedulers.run import RUNS_ON, first_fit_pass, schedule
from tandem.schedulers.shared import Decision, World
from tandem.sim.events import EventLoop

LOCAL_QUEUE = "LocalQueue.kueue.x-k8s.io"


@dataclass(frozen=True)
class Startup:
    """Seconds from bound to Ready: image pull, then model load (log-normal around a median)."""

    image_pull_s: float = 20.0
    model_load_median_s: float = 60.0
    model_load_sigma: float = 0.3


@dataclass
class Kubelet:
    store: MemoryStore
    loop: EventLoop
    rng: np.random.Generator
    bind_latency_s: float = 1.0
    startup: Mapping[str, Startup] = field(default_factory=dict)  # per "ns/group/role", per role; "*" for the rest
    _scheduled: set[tuple[str, str, str, str]] = field(default_factory=set)  # (action, namespace, name, uid)
    _planned: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (namespace, name, uid) -> node a bind event will take
    paused: set[str] = field(default_factory=set)  # delegated backends whose scheduler is stopped (a fault the campaign injects)

    def react(self, changes: Iterable[Change] | None = None) -> None:
        """Schedule binds and readiness for pods that newly need them: those among `changes`
        (what changed since the last call, in key order), or every pod (read from a
        snapshot: shared, not copied). A pod that did not change needs nothing new."""
        if changes is None:
            pods: Iterable[dict] = self.store.snapshot().list("Pod")
        else:
            pods = [c.after for c in changes if c.kind == "Pod" and c.after is not None]
        for pod in pods:
            meta, spec = pod["metadata"], pod.get("spec", {})
            key = (meta["namespace"], meta["name"], meta["uid"])
            if meta.get("deletionTimestamp") or pod.get("status", {}).get("phase") == "Failed":
                continue
            gated = any(g.get("name") == GATE for g in spec.get("schedulingGates", []))
            node = spec.get("nodeSelector", {}).get(HOSTNAME_LABEL)
            if not gated and node and not spec.get("nodeName") and ("bind",) + key not in self._scheduled:
                self._scheduled.add(("bind",) + key)
                self.loop.schedule(self.loop.now + self.bind_latency_s, "bind", namespace=meta["namespace"], name=meta["name"], uid=meta["uid"], node=node)
            if spec.get("nodeName") and not pod_ready(as_pod(pod)) and ("ready",) + key not in self._scheduled:
                self._scheduled.add(("ready",) + key)
                labels = meta.get("labels", {})
                role = labels.get(ROLE_LABEL, "*")
                start = (
                    self.startup.get(f"{meta['namespace']}/{labels.get(GROUP_LABEL, '')}/{role}")
                    or self.startup.get(role)
                    or self.startup.get("*")
                    or Startup()
                )
                delay = start.image_pull_s + float(self.rng.lognormal(np.log(start.model_load_median_s), start.model_load_sigma))
                self.loop.schedule(self.loop.now + delay, "ready", namespace=meta["namespace"], name=meta["name"], uid=meta["uid"])
        self._delegate()

    def _served(self) -> dict[str, list[str]]:
        """Per delegated backend whose gang kind the store has registered, its registered kinds' keys."""
        out: dict[str, list[str]] = {}
        for backend, kinds in DELEGATED_KINDS.items():
            keys = {kind.kind: kind.key for kind in kinds if self.store.serves(kind.key)}
            if RUNS_ON[backend] in keys:
                out[backend] = sorted(keys.values())
        return out

    def _world(self, served: dict[str, list[str]]) -> World:
        """The store as the stand-ins see it: a pod with a bind event pending counts as on its
        node; the gangs of the backends not paused (a stopped scheduler decides nothing)."""
        snapshot = self.store.snapshot()
        pods = []
        for pod in snapshot.list("Pod"):
            meta = pod["metadata"]
            node = self._planned.get((meta["namespace"], meta["name"], meta["uid"]))
            if node is not None and not (pod.get("spec") or {}).get("nodeName"):
                pod = {**pod, "spec": {**pod.get("spec", {}), "nodeName": node}}
            pods.append(pod)
        return World(
            pods=pods,
            nodes=snapshot.list("Node"),
            gangs={backend: [o for key in keys for o in snapshot.list(key)] for backend, keys in served.items() if backend not in self.paused},
            now=self.loop.now,
            local_queues=snapshot.list(LOCAL_QUEUE) if self.store.serves(LOCAL_QUEUE) else None,
        )

    def _delegate(self) -> None:
        """Run the registered schedulers' stand-ins; Kueue's admitted pods then go to
        kube-scheduler's first fit. Binds are scheduled after the bind latency."""
        served = self._served()
        snapshot = self.store.snapshot()
        if not any(snapshot.list(key) for keys in served.values() for key in keys):
            return  # no gang object stored: nothing delegated to place (a native run pays one look per kind)
        setter = set_unscheduled(self.store, self.loop.now)
        decision = schedule(self._world(served))
        apply_decision(self.store, decision, setter, binds=False)
        self._plan(decision)
        if "kueue" in served:
            world = self._world(served)
            managed = World([p for p in world.pods if kueue.managed(p) or (p.get("spec") or {}).get("nodeName")], world.nodes, {}, world.now)
            follow = first_fit_pass(managed, set(served))
            apply_decision(self.store, Decision(conditions=follow.conditions), setter, binds=False)
            self._plan(follow)

    def _plan(self, decision: Decision) -> None:
        for bind in decision.binds:
            try:
                uid = self.store.get("Pod", bind.namespace, bind.name)["metadata"]["uid"]
            except ApiError:
                continue
            key = (bind.namespace, bind.name, uid)
            if key in self._planned:
                continue  # its bind event is pending; a bind that failed (node gone NotReady) may be planned again
            self._planned[key] = bind.node
            self.loop.schedule(self.loop.now + self.bind_latency_s, "bind", namespace=bind.namespace, name=bind.name, uid=uid, node=bind.node)

    def handle(self, kind: str, data: dict) -> str | None:
        """Apply one kubelet event; returns a log line, or None if it no longer applies."""
        try:
            pod = self.store.get("Pod", data["namespace"], data["name"])
        except ApiError:
            return None
        if kind == "bind":
            self._planned.pop((data["namespace"], data["name"], data["uid"]), None)
        if pod["metadata"]["uid"] != data["uid"] or pod.get("status", {}).get("phase") == "Failed":
            return None
        try:
            if kind == "bind":
                node = self.store.get("Node", None, data["node"])
                if not _node_ready(node):
                    return None
                self.store.bind(data["namespace"], data["name"], data["node"])
                return f"bound {data['name']} to {data['node']}"
            if kind == "ready" and pod.get("spec", {}).get("nodeName"):
                pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
                self.store.update_status(pod)
                return f"{data['name']} Ready"
        except ApiError:
            return None
        return None

    def fail_nodes(self, names: list[str]) -> list[str]:
        """Nodes go NotReady; their pods fail."""
        lines = []
        for name in names:
            node = self.store.get("Node", None, name)
            node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
            self.store.update_status(node)
        down = set(names)
        for pod in self.store.list("Pod"):
            if pod.get("spec", {}).get("nodeName") in down and pod.get("status", {}).get("phase") != "Failed":
                pod["status"] = {"phase": "Failed", "reason": "NodeLost"}
                self.store.update_status(pod)
                lines.append(f"{pod['metadata']['name']} failed: node {pod['spec']['nodeName']} lost")
        return lines

    def recover_nodes(self, names: list[str]) -> None:
        for name in names:
            node = self.store.get("Node", None, name)
            node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
            self.store.update_status(node)


def _node_ready(node: dict) -> bool:
    conditions = node.get("status", {}).get("conditions", [])
    return all(c.get("status") == "True" for c in conditions if c.get("type") == "Ready")
