"""A simulated scheduler and kubelets, in real time: what a cluster does to a pod tandem lets go.

- A gated pod is left alone (its PodScheduled condition says `SchedulingGated`).
- A pod whose scheduling gates are all gone is bound, `bind_latency` seconds later, to the
  first node (by name) that is Ready, schedulable, matches its whole `nodeSelector` (so
  tandem's `kubernetes.io/hostname` choice is honoured), tolerates the node's NoSchedule
  taints and has room for its requests (every resource the node's `allocatable` lists:
  nvidia.com/gpu, cpu, memory, pods). A pod that fits nowhere stays Pending with
  PodScheduled False, `Unschedulable`, and the reason.
- A bound pod starts at once: phase Running, a pod IP (127.10.x.y, handed out in order, so
  the same run gives the same addresses; with engine stand-ins, the server's own block,
  `pod_network`; every address handed out is in 127.0.0.0/8, so a
  client that connects to one stays on this machine), container statuses; it turns Ready `ready_after`
  seconds after it started.
- A bound pod's `qosClass` is Kubernetes': Guaranteed when every container limits CPU
  and memory and asks for exactly what it limits (or states no request), BestEffort when
  no container asks for or limits either, else Burstable (other resources, GPUs
  included, do not count).
- A pod bound to a node with a `NoExecute` taint it does not tolerate is deleted at once;
  one that tolerates it for `tolerationSeconds`, that long after the taint appeared (the
  taint manager of kube-controller-manager, `evictions.py`). A node whose Ready condition
  is False or Unknown counts as tainted `node.kubernetes.io/not-ready` or `unreachable`,
  which every pod tolerates for `--default-toleration-seconds` unless it says otherwise.
  Nodes are followed by what changed (`changes_since`), not listed every step; so are
  pods, while no node was removed, no node is tainted NoExecute and neither engine
  stand-ins nor delegated schedulers run (then every pod is listed, as before): a step
  looks at the pods written since the last one and those it left with something due,
  and the nodes' use is kept per node, so a settled pod costs nothing.
- With engine stand-ins (`--engines`, `engines/`), a pod whose container is SGLang or vLLM
  gets a stand-in on its pod IP when it starts, and turns Ready only once its model has
  loaded (the serving model's cold start, times the time scale) and its health endpoint
  answers. Deleting such a pod is graceful (`verbs`): the kubelet sees its
  deletionTimestamp, keeps serving for its `preStop` sleep, then stops the engine (no new
  requests; in-flight ones finish) and removes the pod once the engine is idle, at the
  latest when the grace period ends (both times the time scale).
- A pod bound to a node that no longer exists is deleted (the pod garbage collector of
  kube-controller-manager), so deleting a Node takes its pods with it. Nothing else fails
  on its own.
Like `tandem.sim.pod_lifecycle`, with the wall clock (injected) instead of the simulator's.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

from tandem.api.quantity import parse_quantity
from tandem.api.timestamps import rfc3339
from tandem.apiserver.engines.host import EngineHost
from tandem.apiserver.evictions import Taint, eviction_time, no_execute_taints
from tandem.apiserver.pod_network import DEFAULT_BLOCK, address
from tandem.apiserver.server_state import State
from tandem.apiserver.step_thread import StepThread, Stepped
from tandem.cluster.payloads import as_pod
from tandem.cluster.ports import ObjectRef
from tandem.cluster.pods import pod_ready
from tandem.errors import ApiError
from tandem.backends.delegated_kinds import DELEGATED_KINDS
from tandem.schedulers.fit import Amounts, NodeIndex, add, first_fit, pod_requests
from tandem.schedulers.apply import apply_decision
from tandem.schedulers.run import RUNS_ON, kube_scheduler_binds, schedule
from tandem.schedulers.shared import World



PROBE_PERIOD_S = 0.05  # how often a loaded engine's health, or a draining one's in-flight requests, is looked at again


@dataclass
class Kubelet(Stepped):
    THREAD_NAME = "tandem-apiserver-kubelet"
    OWN_WRITES_WAKE = False  # a bind or a start it wrote needs nothing more from it
    COALESCE_S = 0.02  # after a step, let a burst of writes land before the next
    state: State
    ready_after: float = 0.0
    bind_latency: float = 0.0
    monotonic: Callable[[], float] = time.monotonic
    engines: EngineHost | None = None  # engine stand-ins, when the server runs them
    _terminating: dict[str, float] = field(default_factory=dict)  # uid -> when its graceful deletion was seen (monotonic)
    _eligible: dict[str, float] = field(default_factory=dict)  # uid -> when its gates were seen gone
    _started: dict[str, float] = field(default_factory=dict)  # uid -> when it started running
    _ips: dict[str, str] = field(default_factory=dict)
    _addresses: int = 0  # pod IPs handed out so far
    address_block: int = DEFAULT_BLOCK  # pod IPs are 127.<block>.x.y (`pod_network`)
    _known: dict[str, "Amounts | None"] = field(default_factory=dict)  # uid -> its requests, once needed
    _settled: dict[str, str] = field(default_factory=dict)  # uid -> the resourceVersion it was running and Ready at
    _nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> the node, followed by changes
    _cursor: Any = None  # where `changes_since` last left off
    _pods: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (namespace, name) -> the pod, followed by changes
    _pending: set[tuple[str, str]] = field(default_factory=set)  # pods the last step found something due for
    _on_node: dict[str, dict[tuple[str, str], Amounts]] = field(default_factory=lambda: defaultdict(dict))  # node -> its pods' requests
    _used_now: dict[str, Amounts] = field(default_factory=lambda: defaultdict(dict))  # node -> its pods' requests added up
    _dirty: set[str] = field(default_factory=set)  # nodes whose `_used_now` is to be added up again
    _index: NodeIndex | None = None  # the nodes for `first_fit`, until a node changes
    _taints: dict[str, dict[Taint, float]] = field(default_factory=dict)  # node -> its NoExecute taints -> since (server clock)
    _thread: StepThread | None = None

    def step(self) -> float | None:
        """Do what is due (with the lock held); seconds until the next thing is due, or None.

        A pod running and Ready costs a glance: the nodes' use is added up (requests
        remembered per pod) and the nodes sorted only when some pod is to be bound, so a
        step over thousands of settled pods stays cheap (the load bench, docs/reliability.md)."""
        now = self.monotonic()
        snapshot = self.state.store.snapshot()
        wall = self.state.clock()  # taints are timed on the server's clock, as the objects' stamps are
        self._cursor, keys = snapshot.changes_since(self._cursor)
        nodes_removed = self._follow_nodes(snapshot, keys, wall)
        served = self._served()
        delegated = bool(served) and self._delegated(snapshot, served, wall)
        if delegated:
            snapshot = self.state.store.snapshot()  # the stand-ins wrote: read their binds before fitting the rest
            self._cursor, _ = snapshot.changes_since(None)
        if keys is None or nodes_removed or served or self._taints or self.engines is not None:
            pods = snapshot.list("Pod")
            self._track_all(pods)
        else:
            pods = self._track_changes(snapshot, keys)  # only the pods written since, and those with something due
        gone = self._collect_orphans(pods)
        evicted, next_eviction = self._evict(pods, wall)
        gone |= evicted
        for pod in pods:
            if pod["metadata"]["uid"] in gone:
                self._track((pod["metadata"]["namespace"], pod["metadata"]["name"]), None)
        if self.engines is not None:
            stopped, next_stop = self._terminate(pods, now)
            gone |= stopped
            if next_stop is not None:
                next_eviction = next_stop if next_eviction is None else min(next_eviction, next_stop)
        wrote = bool(gone) or delegated
        if gone:
            pods = [p for p in pods if p["metadata"]["uid"] not in gone]
        work = [p for p in pods if self._needs_work(p)]
        self._pending = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in work}
        due: list[float] = [] if next_eviction is None else [next_eviction]
        used: dict[str, Amounts] | None = None
        placement: NodeIndex | None = None
        for pod in sorted(work, key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["namespace"], p["metadata"]["name"])):
            meta, spec = pod["metadata"], pod.get("spec") or {}
            uid = meta["uid"]
            try:
                if not spec.get("nodeName"):
                    if spec.get("schedulingGates"):
                        self._eligible.pop(uid, None)
                        wrote |= self._scheduled_condition(pod, "False", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")
                        # Nothing is due for it until it changes (its gates go): not looked at again till then.
                        self._pending.discard((meta["namespace"], meta["name"]))
                        continue
                    if not kube_scheduler_binds(pod, set(served)):
                        continue  # another scheduler's pod (or a Workload API gang's): its stand-in binds it
                    first = self._eligible.setdefault(uid, now)
                    if now - first < self.bind_latency:
                        due.append(first + self.bind_latency - now)
                        continue
                    if used is None or placement is None:
                        used, placement = self._used(), self._node_index()
                    node, why = first_fit(pod, placement, used, self._requests(pod))
                    if node is None:
                        wrote |= self._scheduled_condition(pod, "False", "Unschedulable", why)
                        continue
                    pod = self.state.store.bind(meta["namespace"], meta["name"], node)
                    add(used[node], self._requests(pod))
                    self._dirty.add(node)  # added up from its pods again once the bind is followed
                    wrote = True
                if (uid not in self._started or (pod.get("status") or {}).get("phase") != "Running") and self._run_pod(pod, now):
                    pod = self.state.store.get("Pod", meta["namespace"], meta["name"])
                    wrote = True
                if not pod_ready(as_pod(pod)):
                    engine = self.engines is not None and self.engines.running(uid)
                    ready_at = self._started[uid] + self.ready_after
                    if engine and self.engines is not None:
                        ready_at = max(ready_at, self.engines.ready_at(uid))
                    left = ready_at - now
                    if left <= 0 and (not engine or (self.engines is not None and self.engines.probe(uid))):
                        if engine and self.engines is not None:
                            self.engines.turned_ready(uid)  # before the write any watcher (a router) could see
                        self._ready(pod)
                        wrote = True
                    else:
                        due.append(left if left > 0 else PROBE_PERIOD_S)
            except ApiError:
                continue  # changed under us (deleted, re-gated): look again next step
        if self.engines is not None:  # stop the stand-ins of pods that are gone
            alive = {p["metadata"]["uid"] for p in pods}
            for uid in self.engines.running_uids():
                if uid not in alive:
                    self.engines.close(uid)
                    self.state.graceful_pods.discard(uid)
                    self._terminating.pop(uid, None)
        if len(self._known) > len(self._pods):  # forget pods that are gone
            alive = {p["metadata"]["uid"] for p in self._pods.values()}
            for remembered in (self._eligible, self._started, self._ips, self._known, self._settled):
                for uid in [u for u in remembered if u not in alive]:
                    del remembered[uid]
        if wrote:
            self.state.changed()
        return min(due) if due else None

    # ------------------------------------------------------------------ delegated schedulers

    def _served(self) -> dict[str, list[str]]:
        """Per backend whose gang kind this server serves (its CRD installed), the store keys
        of its kinds that are served (a CRD installed; the Workload API with `--workload-api`)."""
        out: dict[str, list[str]] = {}
        for backend, kinds in DELEGATED_KINDS.items():
            keys = {kind.kind: resource.key for kind in kinds if (resource := self.state.registry.for_kind(kind.kind, kind.group)) is not None}
            if RUNS_ON[backend] in keys:
                out[backend] = sorted(keys.values())
        return out

    def _delegated(self, snapshot: Any, served: dict[str, list[str]], now: float) -> bool:
        """Run the served schedulers' stand-ins (`tandem.schedulers`) and apply what they
        decide; whether anything was written."""
        queues = self.state.registry.for_kind("LocalQueue", "kueue.x-k8s.io")
        world = World(
            pods=snapshot.list("Pod"),
            nodes=list(self._nodes.values()),
            gangs={backend: [o for key in keys for o in snapshot.list(key)] for backend, keys in served.items()},
            now=now,
            local_queues=None if queues is None else snapshot.list(queues.key),
        )
        return apply_decision(self.state.store, schedule(world), lambda pod, reason, message: self._scheduled_condition(pod, "False", reason, message))

    def _follow_nodes(self, snapshot: Any, keys: set[tuple[str, str, str]] | None, now: float) -> bool:
        """Bring the nodes, and when each NoExecute taint appeared, up to date with the
        keys written since the last step (every node only on the first step, or after more
        changes than the store remembers: `keys` None); whether a node was removed."""
        removed = False
        if keys is None:
            before = set(self._nodes)
            self._nodes = {n["metadata"]["name"]: n for n in snapshot.list("Node")}
            changed = before | set(self._nodes)
            removed = bool(before - set(self._nodes))
        else:
            changed = {name for kind, _, name in keys if kind == "Node"}
            for name in changed:
                try:
                    self._nodes[name] = snapshot.get("Node", None, name)
                except ApiError:
                    removed |= self._nodes.pop(name, None) is not None
        if changed:
            self._index = None
        for name in changed:
            node = self._nodes.get(name)
            taints = no_execute_taints(node) if node is not None else frozenset()
            seen = self._taints.get(name, {})
            if taints:
                self._taints[name] = {taint: seen.get(taint, now) for taint in taints}
            else:
                self._taints.pop(name, None)
        return removed

    # ------------------------------------------------------------------ pods followed

    def _track_all(self, pods: list[dict[str, Any]]) -> None:
        """Follow every pod afresh (after a full listing)."""
        self._pods, self._on_node, self._used_now, self._dirty = {}, defaultdict(dict), defaultdict(dict), set()
        for pod in pods:
            self._track((pod["metadata"]["namespace"], pod["metadata"]["name"]), pod)

    def _track_changes(self, snapshot: Any, keys: set[tuple[str, str, str]]) -> list[dict[str, Any]]:
        """Follow the pods among `keys`; the pods to look at this step (those written
        since, and those the last step left with something due), as they are now."""
        look = set(self._pending)
        for kind, namespace, name in keys:
            if kind != "Pod":
                continue
            key = (namespace, name)
            try:
                self._track(key, snapshot.get("Pod", namespace, name))
                look.add(key)
            except ApiError:
                self._track(key, None)
                look.discard(key)
        return [self._pods[key] for key in look if key in self._pods]

    def _track(self, key: tuple[str, str], pod: dict[str, Any] | None) -> None:
        """Note `pod` (None: gone) under `key`, and what it uses on its node."""
        old = self._pods.pop(key, None)
        for node in (_counted_on(old), _counted_on(pod)):
            if node is not None:
                self._on_node[node].pop(key, None)
                self._dirty.add(node)
        if pod is not None:
            self._pods[key] = pod
            node = _counted_on(pod)
            if node is not None:
                self._on_node[node][key] = self._requests(pod)

    def _used(self) -> dict[str, Amounts]:
        """Per node, the requests of the pods bound to it and not finished (added up again
        only for the nodes whose pods changed)."""
        for node in self._dirty:
            total: Amounts = {}
            for requests in self._on_node.get(node, {}).values():
                add(total, requests)
            self._used_now[node] = total
        self._dirty = set()
        return self._used_now

    def _node_index(self) -> NodeIndex:
        if self._index is None:
            self._index = NodeIndex(list(self._nodes.values()))
        return self._index

    def _collect_orphans(self, pods: list[dict[str, Any]]) -> set[str]:
        """Delete the pods bound to nodes that are gone, at once (PodGC's force delete); their uids."""
        return {p["metadata"]["uid"] for p in pods if (node := (p.get("spec") or {}).get("nodeName")) and node not in self._nodes and self._delete(p)}

    def _evict(self, pods: list[dict[str, Any]], now: float) -> tuple[set[str], float | None]:
        """Delete the pods whose node's NoExecute taints they no longer tolerate (the taint
        manager); the uids deleted, and seconds until the next eviction due, if any."""
        if not self._taints:
            return set(), None
        evicted: set[str] = set()
        later: float | None = None
        for pod in pods:
            taints = self._taints.get((pod.get("spec") or {}).get("nodeName") or "")
            if not taints or pod["metadata"].get("deletionTimestamp"):
                continue
            at = eviction_time(taints, (pod.get("spec") or {}).get("tolerations") or [])
            if at is None:
                continue
            if at > now:
                later = at - now if later is None else min(later, at - now)
            elif self._delete(pod):
                evicted.add(pod["metadata"]["uid"])
        return evicted, later

    def _terminate(self, pods: list[dict[str, Any]], now: float) -> tuple[set[str], float | None]:
        """Pods being deleted gracefully: their preStop sleep, then their engine stops taking
        requests, then (in-flight ones done, or the grace period over) they are removed. The
        uids removed, and seconds until the next thing due."""
        assert self.engines is not None
        removed: set[str] = set()
        later: float | None = None
        scale = self.engines.lifecycle_scale
        for pod in pods:
            meta = pod["metadata"]
            uid = meta["uid"]
            if not meta.get("deletionTimestamp") or not self.engines.running(uid):
                continue
            since = self._terminating.setdefault(uid, now)
            self.engines.deleting(uid)
            deadline = since + float(meta.get("deletionGracePeriodSeconds") or 0) * scale
            pre_stop_end = min(since + pre_stop_seconds(pod) * scale, deadline)
            if now < pre_stop_end:
                wait = pre_stop_end - now
            else:
                self.engines.stop_accepting(uid)
                if self.engines.idle(uid) or now >= deadline:
                    if self._delete(pod):
                        removed.add(uid)
                    self.engines.close(uid)
                    self.state.graceful_pods.discard(uid)
                    self._terminating.pop(uid, None)
                    continue
                wait = min(PROBE_PERIOD_S, deadline - now)
            later = wait if later is None else min(later, wait)
        return removed, later

    def _delete(self, pod: dict[str, Any]) -> bool:
        meta = pod["metadata"]
        try:
            self.state.store.delete("Pod", meta["namespace"], meta["name"], uid=meta["uid"])
        except ApiError:
            return False  # gone or replaced meanwhile
        return True

    def _needs_work(self, pod: dict[str, Any]) -> bool:
        """Whether anything may be due for `pod`: not when it is finished, being deleted, or
        running and Ready since this kubelet started it (remembered at its resourceVersion)."""
        meta = pod["metadata"]
        uid, version = meta["uid"], meta.get("resourceVersion")
        if self._settled.get(uid) == version:
            return False
        status = pod.get("status") or {}
        if meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
            return False
        self._known.setdefault(uid, None)
        if (pod.get("spec") or {}).get("nodeName") and uid in self._started and status.get("phase") == "Running" and pod_ready(as_pod(pod)):
            self._settled[uid] = version
            return False
        return True

    def _requests(self, pod: dict[str, Any]) -> Amounts:
        """The pod's requests (a pod's containers never change: remembered by uid)."""
        uid = pod["metadata"]["uid"]
        known = self._known.get(uid)
        if known is None:
            known = self._known[uid] = pod_requests(pod)
        return known

    # ------------------------------------------------------------------ status writes

    def _scheduled_condition(self, pod: dict[str, Any], status: str, reason: str, message: str) -> bool:
        conditions = (pod.get("status") or {}).get("conditions") or []
        current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if current and (current.get("status"), current.get("reason"), current.get("message")) == (status, reason, message):
            return False
        condition = {"type": "PodScheduled", "status": status, "reason": reason, "message": message, "lastProbeTime": None,
                     "lastTransitionTime": rfc3339(int(self.state.clock()))}
        new = {**pod, "status": {"phase": "Pending", **(pod.get("status") or {}),
                                 "conditions": [c for c in conditions if c.get("type") != "PodScheduled"] + [condition]}}
        self.state.store.update_status(new)
        return True

    def _run_pod(self, pod: dict[str, Any], now: float) -> bool:
        uid = pod["metadata"]["uid"]
        self._started.setdefault(uid, now)
        status = pod.get("status") or {}
        if status.get("phase") == "Running" and status.get("podIP"):
            return False  # already running (a pod loaded from a cluster file)
        stamp = rfc3339(int(self.state.clock()))
        if uid not in self._ips:
            self._addresses += 1
            self._ips[uid] = address(self.address_block, self._addresses)
        ip = self._ips[uid]
        new_status = {
            "phase": "Running",
            "conditions": _conditions(False, stamp),
            "hostIP": _host_ip(pod["spec"]["nodeName"]),
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": stamp,
            "qosClass": qos_class(pod),
            "containerStatuses": [
                {"name": c.get("name", ""), "image": c.get("image", ""), "imageID": "", "ready": False, "restartCount": 0, "started": True,
                 "state": {"running": {"startedAt": stamp}}}
                for c in pod["spec"].get("containers") or []
            ],
        }
        self.state.store.update_status({**pod, "status": new_status})
        if self.engines is not None:
            spec = self.engines.recognise(pod, self._nodes.get(pod["spec"]["nodeName"]))
            problem = None if spec is None else self.engines.start(pod, spec, ip)
            if spec is not None and problem is None:
                self.state.graceful_pods.add(uid)
            elif problem is not None:
                self.state.store.record_event(ObjectRef.of(pod), "Warning", "EngineNotStarted", problem)
        return True

    def _ready(self, pod: dict[str, Any]) -> None:
        status = dict(pod.get("status") or {})
        stamp = rfc3339(int(self.state.clock()))
        status["phase"] = "Running"
        status["conditions"] = _conditions(True, stamp)
        status["containerStatuses"] = [{**c, "ready": True} for c in status.get("containerStatuses") or []]
        self.state.store.update_status({**pod, "status": status})


def pre_stop_seconds(pod: dict[str, Any]) -> float:
    """The longest `lifecycle.preStop.sleep.seconds` of the pod's containers (0 when none);
    other preStop hooks (exec, httpGet) are not run."""
    longest = 0.0
    for container in (pod.get("spec") or {}).get("containers") or []:
        seconds = (((container.get("lifecycle") or {}).get("preStop") or {}).get("sleep") or {}).get("seconds")
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
            longest = max(longest, float(seconds))
    return longest


def qos_class(pod: dict[str, Any]) -> str:
    """The pod's quality-of-service class, as Kubernetes computes it from CPU and memory."""
    containers = [*(pod["spec"].get("initContainers") or []), *(pod["spec"].get("containers") or [])]
    asked = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for name in ("cpu", "memory"):
            request, limit = requests.get(name), limits.get(name)
            asked |= request is not None or limit is not None
            if limit is None or (request is not None and parse_quantity(request) != parse_quantity(limit)):
                guaranteed = False
    if not asked:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _conditions(ready: bool, stamp: str) -> list[dict[str, Any]]:
    state = "True" if ready else "False"
    out = [
        {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": stamp},
        {"type": "Initialized", "status": "True", "lastTransitionTime": stamp},
        {"type": "Ready", "status": state, "lastTransitionTime": stamp},
        {"type": "ContainersReady", "status": state, "lastTransitionTime": stamp},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp},
    ]
    if not ready:
        out[2]["reason"] = out[3]["reason"] = "ContainersNotReady"
    return out


def _host_ip(node: str) -> str:
    """A stable made-up address per node name, on this machine (127.20.0.0/16)."""
    digest = sum((i + 1) * ord(ch) for i, ch in enumerate(node))
    return f"127.20.{digest // 254 % 256}.{digest % 254 + 1}"


def _counted_on(pod: dict[str, Any] | None) -> str | None:
    """The node whose capacity `pod` uses: the one it is bound to, unless it finished."""
    if pod is None:
        return None
    node = (pod.get("spec") or {}).get("nodeName")
    if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
        return str(node)
    return None
