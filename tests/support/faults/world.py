"""The in-memory world a schedule is played in, one second of true time per step.

Each step: the schedule's events due by now (user changes, faults, recoveries); the
kubelet (`tandem.sim.pod_lifecycle`, with nodes that can be down and pods that can fail at
start-up); every live operator replica's loop turn (`tandem.operator.runner.Operator`:
leader election on a Lease, passes when due), each through its own faulty view of the
API (`api.ReplicaApi`) and on its own clock (offset and rate: skew), then, where groups
are autoscaled, its autoscaler loop's turn over the engines' metrics (`engines.py`); the
garbage collector after every writer; then the invariants (`invariants.Checker`).

Nothing here reads the wall clock: the store's clock is the step's true time, each
replica's is derived from it, and every random draw comes from the schedule's seed.
"""

from __future__ import annotations

import collections
import copy
import heapq
import itertools
import random
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from support.controller_world import Crash
from support.faults.api import Faults, ReplicaApi, Storm
from support.faults.engines import EngineModel, Scrape, WorldPodMetrics
from support.faults.schedule import EPOCH, MEMORY_BACKENDS, Schedule, patched_template
from tandem.backends.delegated_kinds import DELEGATED_BACKENDS, DELEGATED_KINDS, PRIORITY_CLASS, delegated_keys
from tandem.controller.delegation import RENDERED_ANNOTATION, DelegationSettings
from tandem.api.naming import GROUP_LABEL, LABEL_PREFIX, POD_INDEX_LABEL, REPLICA_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.cluster.memory import MemoryStore, Snapshot
from tandem.api.naming import GPU_RESOURCE
from tandem.api.quantity import MILLI, parse_quantity
from tandem.cluster.payloads import as_pod
from tandem.cluster.pods import assigned_node, pod_failed, pod_gpus, pod_ready, serving_leader
from tandem.controller.reconcile import Memo
from tandem.errors import ApiError, NotFound
from tandem.runtime.leader import LeaderElector, LeaseConfig
from tandem.operator.runner import Operator
from tandem.runtime.schedule import PassSchedule
from tandem.sim.events import EventLoop
from tandem.sim.pod_lifecycle import Kubelet, Startup

OBSERVED = ("InferenceGroup", "ClusterTopology", "Node", "Pod", "Service", "ConfigMap", *delegated_keys(DELEGATED_BACKENDS))
HISTORY_S = 16  # seconds of snapshots kept for reads that lag
STARTUP = Startup(image_pull_s=2.0, model_load_median_s=6.0, model_load_sigma=0.5)


class WorldStore(MemoryStore):
    """The store, noting the version of each kind's last change: what an informer of that
    kind would report (the Lease, read live, wakes nobody)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.kind_version: dict[str, int] = {}

    def _write(self, key, obj, kind_of_event):  # type: ignore[no-untyped-def]
        out = super()._write(key, obj, kind_of_event)
        self.kind_version[key[0]] = self._version
        return out

    def _remove(self, key, orphan=False):  # type: ignore[no-untyped-def]
        super()._remove(key, orphan)
        self.kind_version[key[0]] = self._version

    def observed_version(self) -> int:
        return max((self.kind_version.get(k, 0) for k in OBSERVED), default=0)


def _replica_of(pod: dict[str, Any]) -> tuple[str, ...]:
    labels = pod["metadata"]["labels"]
    return (pod["metadata"]["namespace"], labels.get(GROUP_LABEL, ""), labels.get(UNIT_LABEL, ""), labels.get(ROLE_LABEL, ""), labels.get(REPLICA_LABEL, ""))


@dataclass
class FaultyKubelet(Kubelet):
    """The simulator's kubelet, where a node can be down (a bind or a start waits for it, as
    kube-scheduler and the kubelet would), binds to some nodes can be stuck (an outage),
    and pods can fail at start-up. Its admission refuses a pod bound to a node without room
    for it (the pod fails `OutOfnvidia.com/gpu`, as the kubelet's resource check does): two
    schedulers (tandem's engine and a delegated group's) can each choose the same free GPUs
    before either sees the other's bind; `refused` is told (the invariants judge it)."""

    is_down: Callable[[str], bool] = lambda node: False
    bind_stuck: Callable[[str], bool] = lambda node: False
    failure_rate: Callable[[], float] = lambda: 0.0
    chance: random.Random = field(default_factory=random.Random)
    start_failures: int = 0
    refused: Callable[[dict, str, list[dict]], None] = lambda pod, node, holders: None
    bound_at: dict[str, float] = field(default_factory=dict)  # pod uid -> when this kubelet bound it
    _delegated_at: tuple[str, int, frozenset[str]] | None = None  # the store's version, binds planned, schedulers stopped, at the stand-ins' last run

    def _delegate(self) -> None:
        """The stand-ins decide from the store, the binds planned and which schedulers are
        stopped alone: once they ran on these, running them again changes nothing (a step
        calls twice, most with no change)."""
        if self._delegated_at == (self.store.resource_version, len(self._planned), frozenset(self.paused)):
            return
        super()._delegate()
        self._delegated_at = (self.store.resource_version, len(self._planned), frozenset(self.paused))

    def handle(self, kind: str, data: dict) -> str | None:
        node = data.get("node")
        if kind == "ready":
            try:
                node = self.store.get("Pod", data["namespace"], data["name"])["spec"].get("nodeName")
            except ApiError:
                return None
        if kind in ("bind", "ready") and node and (self.is_down(node) or (kind == "bind" and self.bind_stuck(node))):
            self.loop.schedule(self.loop.now + 1.0, kind, **data)  # once the node is back
            return None
        if kind == "bind" and node:
            refusal = self._admit(data, node)
            if refusal is not None:
                return refusal
        rate = self.failure_rate()
        if kind == "ready" and rate > 0 and self.chance.random() < rate:
            try:
                pod = self.store.get("Pod", data["namespace"], data["name"])
                if pod["metadata"]["uid"] != data["uid"] or pod.get("status", {}).get("phase") == "Failed":
                    return None
                pod["status"] = {"phase": "Failed", "reason": "StartError", "message": "injected: the container failed at start-up"}
                self.store.update_status(pod)
            except ApiError:
                return None
            self.start_failures += 1
            return f"{data['name']} failed at start-up"
        line = super().handle(kind, data)
        if kind == "bind" and line:
            self.bound_at[data["uid"]] = self.loop.now
        return line

    def _admit(self, data: dict, node: str) -> str | None:
        """Refuse the bind when the node has no room left for the pod's GPUs: bound, then failed."""
        try:
            pod = self.store.get("Pod", data["namespace"], data["name"])
            allocatable = parse_quantity(self.store.get("Node", None, node)["status"]["allocatable"].get(GPU_RESOURCE, 0)) // MILLI
        except ApiError:
            return None
        if pod["metadata"]["uid"] != data["uid"] or pod_failed(pod) or pod["spec"].get("nodeName"):
            return None
        holders = [p for p in self.store.snapshot().list("Pod", fields=f"spec.nodeName={node}") if not pod_failed(p)]
        if sum(pod_gpus(p) for p in holders) + pod_gpus(pod) <= allocatable:
            return None
        try:
            self.store.bind(data["namespace"], data["name"], node)
            pod = self.store.get("Pod", data["namespace"], data["name"])
            pod["status"] = {"phase": "Failed", "reason": f"OutOf{GPU_RESOURCE}",
                             "message": f"Pod was rejected: Node didn't have enough resource: {GPU_RESOURCE}"}
            self.store.update_status(pod)
        except ApiError:
            return None
        self._planned.pop((data["namespace"], data["name"], data["uid"]), None)
        self.refused(pod, node, holders)
        return f"{data['name']} refused by {node}'s kubelet: no room for its GPUs"


@dataclass
class Replica:
    """One operator process: its clock, its view of the API, its loop (None while dead)."""

    index: int
    offset: float
    rate: float
    operator: Operator | None = None
    api: ReplicaApi | None = None
    seen: int = -1  # the observed version its informers last reported
    source: int = -1  # its metrics source (a new one each start: a restarted process has no scrape history)
    restart_at: float | None = None
    starts: int = 0

    @property
    def identity(self) -> str:
        return f"operator-{self.index}"

    def clock(self, t: float) -> float:
        return EPOCH + self.offset + self.rate * t


class World:
    """One schedule's cluster and operator replicas; `step()` advances it one second.
    `checker_factory` builds the invariants' checker (None: nothing is checked)."""

    def __init__(self, schedule: Schedule, checker_factory: Callable[["World"], Any] | None = None):
        self.schedule = schedule
        self.t = 0.0
        self.store = self._make_store()
        # Every operator replica runs with each backend the world serves enabled (`--backends`).
        self.delegation = DelegationSettings(backends=self._serve_backends())
        for obj in schedule.cluster_objects():
            self.store.create(obj)
        self.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tandem-system"}})
        self.rng = random.Random(f"world-{schedule.seed}")
        self.faults = Faults(self.rng, lambda: self.t)
        self.loop = EventLoop()
        self.down: dict[str, dict[int, str]] = {}  # node -> fault id -> "loss" or "flap"
        self.failure_windows: list[tuple[float, float, float]] = []  # (start, until, rate)
        self.outages: list[tuple[frozenset[str], float, float]] = []  # (nodes, start, until): no binds there
        self.stale: list[tuple[int, float, float, float]] = []  # (replica, start, until, lag)
        self.kubelet = FaultyKubelet(
            self.store, self.loop, np.random.default_rng(schedule.seed), 1.0, {"*": STARTUP},
            is_down=lambda node: bool(self.down.get(node)), bind_stuck=self._bind_stuck, failure_rate=self._failure_rate, chance=random.Random(f"kubelet-{schedule.seed}"),
            refused=lambda pod, node, holders: self.checker.admission_refused(pod, node, holders) if self.checker is not None else None,
        )
        clocks = schedule.clocks or [{"offset": 0.0, "rate": 1.0}]
        self.replicas = [Replica(i, float(c["offset"]), float(c["rate"])) for i, c in enumerate(clocks[: schedule.replicas])]
        self.history: collections.deque[tuple[float, Snapshot]] = collections.deque()
        self.timers: list[tuple[float, int, str, Callable[[], None]]] = []
        self._sequence = itertools.count()
        self.events = sorted(schedule.events, key=lambda e: float(e["at"]))
        self.next_event = 0
        self._collected_at: str | None = None  # the store's version at the garbage collector's last look
        self.crashes = self.failovers = self.passes = self.errors = 0
        self.leaderless = False  # no replica led after this step's turns
        self.healed = False
        self.log: list[tuple[float, str]] = []
        self.last_writes = self.last_errors = 0  # the last step's passes: writes tried, writes failed
        self.restart_delays: dict[int, float] = {}  # replica -> seconds from its crash to its restart
        # Issue 29: the groups with spec.autoscaling, their engines' metrics, each source's scrapes.
        self.autoscaled = {name for name, m in schedule.groups.items() if m["spec"].get("autoscaling")}
        self.engines = EngineModel(lambda: self.t)
        self.ledger: dict[tuple[int, str], list[Scrape]] = {}
        self._sources = itertools.count()
        self.checker = checker_factory(self) if checker_factory else None
        for replica in self.replicas:
            self._start(replica)

    # ------------------------------------------------------------------ the loop

    def step(self) -> None:
        """One second: events, kubelet, operator turns, garbage collection, invariants."""
        if not self.healed and self.t >= self.schedule.fault_window:
            self._heal()
        while self.next_event < len(self.events) and float(self.events[self.next_event]["at"]) <= self.t:
            self._event(self.events[self.next_event])
            self.next_event += 1
        while self.timers and self.timers[0][0] <= self.t:
            _, _, _, action = heapq.heappop(self.timers)
            action()
        self._kubelet()
        self._collect_garbage()
        if self.autoscaled:
            self.engines.advance(self.store.snapshot().list("Pod", labels=GROUP_LABEL), self.autoscaled)
        self._operators()
        self.kubelet.react()
        self._remember()
        if self.checker is not None:
            self.checker.step()
        self.t += 1.0

    def _operators(self) -> None:
        order = self.replicas if int(self.t) % 2 == 0 else list(reversed(self.replicas))
        self.last_writes = self.last_errors = 0
        for replica in order:
            if replica.operator is None:
                if replica.restart_at is not None and replica.restart_at <= self.t:
                    self._start(replica)
                else:
                    continue
            self._turn(replica)
            self._collect_garbage()
        self.leaderless = not any(r.operator is not None and r.operator.leading for r in self.replicas)
        for replica in self.replicas:  # a stale window's own writes older than every kept snapshot are in them all
            if replica.api is not None and self.history:
                replica.api.forget_before(int(self.history[0][1].resource_version))

    def _turn(self, replica: Replica) -> None:
        operator, api = replica.operator, replica.api
        assert operator is not None and api is not None
        self._before_turn(replica)
        version = self.store.observed_version()
        if version != replica.seen:
            replica.seen = version
            operator.changed()
        now = replica.clock(self.t)
        before = api.writes
        try:
            report = operator.tick(now)
        except Crash:
            self.crashes += 1
            self.log.append((self.t, f"{replica.identity} crashed"))
            self._kill(replica, self.t + self._restart_delay(replica))
            return
        except Exception as exc:  # a bug in a pass: the campaign reports it
            self.errors += 1
            if self.checker is not None:
                self.checker.violation("operator-error", f"{replica.identity}: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}")
            return
        if report is not None:
            self.passes += 1
            self.last_writes += api.writes - before
            self.last_errors += len(report.errors)
        if self.autoscaled and not self.healed:
            self._autoscale(replica, now)

    def _autoscale(self, replica: Replica, now: float) -> None:
        """The replica's autoscaler loop, one turn (it decides only while it holds the Lease),
        on the same clock and view; the checker judges every decision. It stops at the end
        of the fault window: the run then settles on the counts it left."""
        operator = replica.operator
        assert operator is not None
        try:
            report = operator.autoscaler.tick(now)
        except Crash:
            self.crashes += 1
            self.log.append((self.t, f"{replica.identity} crashed in the autoscaler's pass"))
            self._kill(replica, self.t + self._restart_delay(replica))
            return
        except Exception as exc:
            self.errors += 1
            if self.checker is not None:
                self.checker.violation("operator-error", f"{replica.identity} autoscaler: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}")
            return
        if report is None:
            return
        for line in report.events:
            self.log.append((self.t, f"{replica.identity} {line}"))
        if self.checker is not None:
            self.checker.autoscaling.decided(replica.source, now, report)

    # ------------------------------------------------------------------ replicas

    # ------------------------------------------------------------------ what a world of its own replaces

    def _make_store(self) -> Any:
        return WorldStore(clock=lambda: EPOCH + self.t)

    def _serve_backends(self) -> tuple[str, ...]:
        """Serve every delegated scheduler's kinds (their stand-ins then run in the kubelet);
        the backends served."""
        for kind in (*(k for b in MEMORY_BACKENDS for k in DELEGATED_KINDS[b]), PRIORITY_CLASS):
            self.store.register_kind(kind.key, cluster_scoped=not kind.namespaced, status=kind.status)
        return MEMORY_BACKENDS

    def _connect(self, replica: Replica) -> Any:
        """The replica's `Cluster`: its faulty view of the API."""
        return ReplicaApi(self.store, self.faults, self._snapshot_ago, on_delete=self._deleting, on_create=self._created,
                          floor=int(self.store.resource_version))

    def _disconnect(self, replica: Replica) -> None:
        """The replica's process is gone (nothing to close in memory)."""

    def _before_turn(self, replica: Replica) -> None:
        assert replica.api is not None
        replica.api.read_lag = self._lag(replica.index)

    def close(self) -> None:
        for replica in self.replicas:
            if replica.api is not None:
                self._disconnect(replica)

    # ------------------------------------------------------------------ replicas, continued

    def _start(self, replica: Replica) -> None:
        lease = self.schedule.lease
        api = self._connect(replica)
        config = LeaseConfig(identity=replica.identity, duration=float(lease["duration"]), renew_deadline=float(lease["renew_deadline"]),
                             renew_every=float(lease["renew_every"]))
        replica.api = api
        replica.source = next(self._sources)
        source = None
        if self.autoscaled:
            source = WorldPodMetrics(api.snapshot, self.engines, self.ledger, replica.source, float((self.schedule.metrics or {}).get("window", 60.0)))
        replica.operator = Operator(
            api, lambda: replica.clock(self.t), LeaderElector(api, config),
            PassSchedule(debounce=0.0, min_interval=0.5, resync=self.schedule.resync), memo=Memo(), delegation=self.delegation,
            metrics_source=source,
        )
        replica.seen = -1
        replica.restart_at = None
        replica.starts += 1

    def _kill(self, replica: Replica, restart_at: float | None, graceful: bool = False) -> None:
        if replica.operator is None:
            return
        if graceful and replica.operator.elector is not None:
            try:
                replica.operator.elector.release(replica.clock(self.t))
            except Crash:
                pass
        self._disconnect(replica)
        replica.operator, replica.api = None, None
        replica.restart_at = restart_at

    def _restart_delay(self, replica: Replica) -> float:
        return self.restart_delays.pop(replica.index, 1.0)

    def leader(self) -> Replica | None:
        leading = [r for r in self.replicas if r.operator is not None and r.operator.leading]
        return leading[0] if leading else None

    # ------------------------------------------------------------------ events

    def _event(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        self.log.append((self.t, f"{kind} {({k: v for k, v in event.items() if k not in ('at', 'type')})}"))
        if self.checker is not None:
            self.checker.before_event(event)
        handler = getattr(self, "_on_" + kind.replace("-", "_"))
        handler(event)
        if self.checker is not None:
            self.checker.after_event(event)

    def _on_create(self, event: dict[str, Any]) -> None:
        manifest = copy.deepcopy(self.schedule.groups[event["group"]])
        try:
            self.store.create(manifest)
        except ApiError:
            pass  # still there (deleting)

    def _on_delete(self, event: dict[str, Any]) -> None:
        try:
            self.store.delete("InferenceGroup", "serving", event["group"])
        except NotFound:
            pass

    def _group(self, name: str) -> dict[str, Any] | None:
        try:
            return self.store.get("InferenceGroup", "serving", name)
        except NotFound:
            return None

    def _on_scale(self, event: dict[str, Any]) -> None:
        if self._group(event["group"]) is not None:
            self.store.patch("InferenceGroup", "serving", event["group"], {"spec": {"replicas": int(event["replicas"])}})

    def _on_ratio(self, event: dict[str, Any]) -> None:
        current = self._group(event["group"])
        if current is None:
            return
        roles = copy.deepcopy(current["spec"]["roles"])
        counts = event["replicas"] if isinstance(event["replicas"], dict) else {event["role"]: event["replicas"]}  # one role, as files once said
        for r in roles:
            if r["name"] in counts:
                r["replicas"] = int(counts[r["name"]])
                if r.get("minReplicas") is not None:
                    r["minReplicas"] = min(r["minReplicas"], r["replicas"])
        self.store.patch("InferenceGroup", "serving", event["group"], {"spec": {"roles": roles}})

    def _on_template(self, event: dict[str, Any]) -> None:
        current = self._group(event["group"])
        if current is not None:
            self.store.patch("InferenceGroup", "serving", event["group"], patched_template(current, int(event["revision"])))

    def _on_backend(self, event: dict[str, Any]) -> None:
        if self._group(event["group"]) is not None:
            self.store.patch("InferenceGroup", "serving", event["group"], {"spec": {"scheduler": {"backend": event["backend"]}}})

    def _on_gang_edit(self, event: dict[str, Any]) -> None:
        """One of the group's gang objects changed by hand (`schedule.GANG_EDITS`), as `kubectl
        delete`, `kubectl edit` or `kubectl label/annotate ...-` would; nothing when the group
        has none now. The checker is told what it was before (`DelegatedChecks.gang_edited`)."""
        group = self._group(event["group"])
        if group is None:
            return
        uid = group["metadata"]["uid"]
        snapshot = self.store.snapshot()
        owned = sorted(((key, o) for key in delegated_keys(self.delegation.backends) for o in snapshot.list(key)
                        if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])),
                       key=lambda item: (item[0], item[1]["metadata"]["name"]))
        edit, pick = event["edit"], int(event["pick"])
        if edit == "min-member":
            counted = [(key, o) for key, o in owned if "minMember" in (o.get("spec") or {})]
            owned, edit = (counted, edit) if counted else (owned, "annotation")
        if not owned:
            return
        key, before = owned[pick % len(owned)]
        meta = before["metadata"]
        after = copy.deepcopy(before)
        if edit == "delete":
            try:
                self.store.delete(key, meta.get("namespace"), meta["name"], uid=meta["uid"])
            except ApiError:
                return
        else:
            if edit == "min-member":
                count = int(after["spec"]["minMember"])
                after["spec"]["minMember"] = count + 1 if pick % 2 == 0 or count <= 1 else count - 1
            elif edit == "label":
                ours = sorted(k for k in meta.get("labels") or {} if k.startswith(LABEL_PREFIX))
                if not ours:
                    return
                del after["metadata"]["labels"][ours[pick % len(ours)]]
            else:
                (after["metadata"].get("annotations") or {}).pop(RENDERED_ANNOTATION, None)
            try:
                self.store.update(after)
            except ApiError:
                return
        self.log.append((self.t, f"gang-edit: {edit} {key} {meta['name']}"))
        if self.checker is not None:
            self.checker.delegated.gang_edited(key, before, edit)

    # ------------------------------------------------------------------ load and metric faults (issue 29)

    def _on_load(self, event: dict[str, Any]) -> None:
        self.engines.load[event["group"]] = float(event["level"])

    def _on_metrics_outage(self, event: dict[str, Any]) -> None:
        self.engines.outage(float(event["until"]))

    def _on_scrape_missing(self, event: dict[str, Any]) -> None:
        pod = self._engine_pod(event)
        if pod is not None:
            self.engines.miss(pod, float(event["until"]))

    def _on_series_stale(self, event: dict[str, Any]) -> None:
        pod = self._engine_pod(event)
        if pod is not None:
            self.engines.go_stale(pod, float(event["until"]))

    def _on_counter_reset(self, event: dict[str, Any]) -> None:
        pod = self._engine_pod(event)
        if pod is not None:
            self.engines.reset(pod)

    def _engine_pod(self, event: dict[str, Any]) -> tuple[str, str] | None:
        """The group's `pick`-th Ready replica leader of a role it autoscales (modulo, by name), if it has any."""
        managed = set(self.schedule.groups[event["group"]]["spec"]["autoscaling"]["roles"])
        pods = sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.store.snapshot().list("Pod", labels={GROUP_LABEL: event["group"]})
                      if serving_leader(as_pod(p)) and p["metadata"]["labels"].get(ROLE_LABEL) in managed)
        if not pods:
            return None
        pod = pods[int(event["pick"]) % len(pods)]
        self.log.append((self.t, f"{event['type']}: {pod[1]}"))
        return pod

    def _on_scheduler_stop(self, event: dict[str, Any]) -> None:
        """The backend's scheduler stops (its stand-in decides nothing) until `until`."""
        backend = event["backend"]
        self.kubelet.paused.add(backend)
        self._timer(float(event["until"]), "scheduler-start", lambda: self.kubelet.paused.discard(backend))

    def _on_node_loss(self, event: dict[str, Any]) -> None:
        fault = next(self._sequence)
        for node in event["nodes"]:
            self.down.setdefault(node, {})[fault] = "loss"
        self.kubelet.fail_nodes(sorted(n for n in event["nodes"] if self._has_node(n)))  # a deleted node has nothing to lose
        if event.get("recover_after") is not None:
            self._timer(self.t + float(event["recover_after"]), "recover", lambda: self._node_up(event["nodes"], fault))

    def _on_flap(self, event: dict[str, Any]) -> None:
        fault = next(self._sequence)
        node = event["node"]
        was_up = not self.down.get(node)
        self.down.setdefault(node, {})[fault] = "flap"
        if was_up:
            self._node_ready(node, False)
        self._timer(self.t + float(event["down_for"]), "flap-end", lambda: self._node_up([node], fault))

    def _on_startup_failures(self, event: dict[str, Any]) -> None:
        self.failure_windows.append((self.t, float(event["until"]), float(event["rate"])))

    def _on_bind_outage(self, event: dict[str, Any]) -> None:
        self.outages.append((frozenset(event["nodes"]), self.t, float(event["until"])))

    def _bind_stuck(self, node: str) -> bool:
        return any(node in nodes and start <= self.t < until for nodes, start, until in self.outages)

    def _on_crash(self, event: dict[str, Any]) -> None:
        target = self.leader() if event["replica"] == "leader" else self.replicas[int(event["replica"])]
        if target is None or target.api is None:
            target = next((r for r in self.replicas if r.api is not None), None)
        if target is None or target.api is None:
            return
        target.api.crash_after(int(event["after_writes"]))
        self.restart_delays[target.index] = float(event["restart_after"])

    def _on_storm(self, event: dict[str, Any]) -> None:
        self.faults.storms.append(Storm(event["code"], self.t, float(event["until"]), float(event["rate"])))

    def _on_stale(self, event: dict[str, Any]) -> None:
        self.stale.append((int(event["replica"]), self.t, float(event["until"]), float(event["lag"])))

    def _on_failover(self, event: dict[str, Any]) -> None:
        target = self.leader()
        if target is None:
            return
        self.failovers += 1
        restart = event.get("restart_after")
        self._kill(target, None if restart is None else self.t + float(restart), graceful=bool(event.get("graceful")))

    def _on_fill(self, event: dict[str, Any]) -> None:
        """Full domains: each node's free GPUs taken by a bound pod of another namespace
        (not while a replica's reads lag: bound past the scheduler, such a pod could land
        on room a lagging pass is placing on, which no real kube-scheduler would bind)."""
        if self.stale_now():
            self._timer(self.t + 1.0, "fill", lambda: self._on_fill(event))
            return
        snapshot = self.store.snapshot()
        used: dict[str, int] = {}
        for pod in snapshot.list("Pod"):
            node = assigned_node(pod) or self.kubelet._planned.get((pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"]))
            if node and not pod_failed(pod):  # a scheduler's bind on its way takes its room too
                used[node] = used.get(node, 0) + pod_gpus(pod)
        for node in snapshot.list("Node"):
            name = node["metadata"]["name"]
            free = int(node["status"]["allocatable"].get(GPU_RESOURCE, 0)) - used.get(name, 0)
            if free <= 0:
                continue
            filler = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"fill-{name}-{int(self.t)}", "namespace": "filler"},
                      "spec": {"nodeName": name, "containers": [{"name": "fill", "image": "pause",
                                                                 "resources": {"requests": {GPU_RESOURCE: str(free)}}}]},
                      "status": {"phase": "Running"}}
            self.store.create(filler)
        if event.get("until") is not None:
            self._timer(float(event["until"]), "unfill", self._unfill)

    def _unfill(self) -> None:
        for pod in self.store.snapshot().list("Pod"):
            if pod["metadata"].get("namespace") == "filler":
                try:
                    self.store.delete("Pod", "filler", pod["metadata"]["name"])
                except ApiError:
                    pass

    def _on_pod_delete(self, event: dict[str, Any]) -> None:
        """A leader or a worker of some group deleted, as eviction or `kubectl delete pod` does."""
        leader = event["which"] == "leader"
        alive = [p for p in self.store.snapshot().list("Pod", labels=GROUP_LABEL) if not p["metadata"].get("deletionTimestamp")]
        pods = sorted((p for p in alive if (p["metadata"]["labels"].get(POD_INDEX_LABEL) == "0") == leader), key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))
        if leader:  # a leader with workers, where one is there
            led = {_replica_of(p) for p in alive if p["metadata"]["labels"].get(POD_INDEX_LABEL) != "0"}
            pods = [p for p in pods if _replica_of(p) in led] or pods
        if pods:
            meta = pods[int(event["pick"]) % len(pods)]["metadata"]
            self._delete_pod(meta)

    def _on_node_delete(self, event: dict[str, Any]) -> None:
        """The Node goes and its pods with it (the pod garbage collector); a Node of that name
        comes back later, at the latest when the window ends."""
        try:
            node = self.store.get("Node", None, event["node"])
        except NotFound:
            return
        self.store.delete("Node", None, event["node"])
        for pod in self.store.snapshot().list("Pod", fields=f"spec.nodeName={event['node']}"):
            self._delete_pod(pod["metadata"])
        after = event.get("recover_after")
        back = self.schedule.fault_window if after is None else min(self.t + float(after), self.schedule.fault_window)
        fresh = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node["metadata"]["name"], "labels": node["metadata"].get("labels") or {}},
                 "spec": {k: v for k, v in (node.get("spec") or {}).items() if k != "unschedulable"}, "status": node.get("status") or {}}
        self._timer(back, "node-back", lambda: self._node_back(fresh))

    def _has_node(self, name: str) -> bool:
        try:
            self.store.get("Node", None, name)
        except NotFound:
            return False
        return True

    def _node_back(self, node: dict[str, Any]) -> None:
        node = copy.deepcopy(node)
        if self.down.get(node["metadata"]["name"]):  # lost or flapping meanwhile: back NotReady
            node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
        try:
            self.store.create(node)
        except ApiError:
            pass  # back already

    def _delete_pod(self, meta: dict[str, Any]) -> None:
        try:
            self.store.delete("Pod", meta.get("namespace"), meta["name"], uid=meta["uid"])
        except ApiError:
            pass

    # ------------------------------------------------------------------ nodes and pods

    def _node_up(self, nodes: list[str], fault: int) -> None:
        for node in nodes:
            faults = self.down.get(node, {})
            faults.pop(fault, None)
            if not faults:
                self.down.pop(node, None)
                self._node_ready(node, True)

    def _node_ready(self, node: str, ready: bool) -> None:
        """The node's Ready condition, and that of its running pods with it (a flap, a return)."""
        if not self._has_node(node):
            return  # deleted: it comes back as it was
        obj = self.store.get("Node", None, node)
        obj["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
        self.store.update_status(obj)
        for pod in self.store.snapshot().list("Pod", fields=f"spec.nodeName={node}"):
            status = pod.get("status") or {}
            if status.get("phase") != "Running" or pod_ready(pod) == ready:
                continue
            new = copy.deepcopy(pod)
            new["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
            self.store.update_status(new)

    def _heal(self) -> None:
        """The end of the fault window: nodes back, storms and lags over, replicas restarted."""
        self.healed = True
        for node in sorted(self.down):
            self.down[node] = {}
            self.down.pop(node)
            self._node_ready(node, True)
        self.faults.storms.clear()
        self.stale.clear()
        self.failure_windows.clear()
        self.outages.clear()
        self.engines.heal()
        self._unfill()
        self.kubelet.paused.clear()
        self.timers = [t for t in self.timers if t[2] not in ("recover", "flap-end", "fill", "unfill", "scheduler-start")]
        heapq.heapify(self.timers)
        for replica in self.replicas:
            if replica.api is not None:
                replica.api.crash_at = None
            if replica.operator is None:
                replica.restart_at = self.t

    def _timer(self, at: float, what: str, action: Callable[[], None]) -> None:
        heapq.heappush(self.timers, (at, next(self._sequence), what, action))

    def _failure_rate(self) -> float:
        return max((rate for start, until, rate in self.failure_windows if start <= self.t < until), default=0.0)

    def _lag(self, replica: int) -> float:
        return max((lag for index, start, until, lag in self.stale if index == replica and start <= self.t < until), default=0.0)

    def stale_now(self) -> bool:
        return any(start <= self.t < until for _, start, until, _ in self.stale)

    def storm_now(self) -> bool:
        return any(storm.on(self.t) for storm in self.faults.storms)

    def _kubelet(self) -> None:
        while len(self.loop) and (self.loop.next_time() or 0.0) <= self.t:
            for event in self.loop.pop_batch():
                line = self.kubelet.handle(event.kind, event.data)
                if line:
                    self.log.append((self.t, line))
        self.loop.now = self.t
        self.kubelet.react()

    def _collect_garbage(self) -> None:
        """kube-controller-manager's garbage collector, at once: an object whose owners are
        all gone goes (a create that raced its group's deletion, from a cache that lagged)."""
        if self.store.resource_version == self._collected_at:
            return  # nothing changed since the last look
        snapshot = self.store.snapshot()
        owners = {g["metadata"]["uid"] for g in snapshot.list("InferenceGroup")}
        for kind in ("Pod", "Service", "ConfigMap", *delegated_keys(self.delegation.backends)):
            for obj in snapshot.list(kind, labels=GROUP_LABEL):
                refs = obj["metadata"].get("ownerReferences") or []
                if refs and not any(ref.get("uid") in owners for ref in refs):
                    meta = obj["metadata"]
                    try:
                        self.store.delete(kind, meta.get("namespace"), meta["name"], uid=meta["uid"])
                    except ApiError:
                        pass
        self._collected_at = self.store.resource_version

    # ------------------------------------------------------------------ reads that lag

    def _remember(self) -> None:
        self.history.append((self.t, self.store.snapshot()))
        while self.history and self.history[0][0] < self.t - HISTORY_S:
            self.history.popleft()

    def _snapshot_ago(self, seconds: float, floor: int) -> Snapshot:
        """The store as it was `seconds` ago (at the end of that step), never older than `floor`."""
        chosen = None
        for at, snapshot in self.history:
            if at <= self.t - seconds:
                chosen = snapshot
        if chosen is None or int(chosen.resource_version) < floor:
            for _, snapshot in self.history:
                if int(snapshot.resource_version) >= floor:
                    return snapshot
            return self.store.snapshot()
        return chosen

    # ------------------------------------------------------------------ judging deletes

    def _deleting(self, kind: str, namespace: str | None, name: str) -> Callable[[], None]:
        """Judge a controller's delete before it is sent; returns what to call once it went through."""
        if self.checker is None or kind != "Pod":
            return lambda: None
        judged = self.checker.judge_delete(namespace, name)
        checker = self.checker
        return lambda: checker.pod_deleted(judged)

    def _created(self, obj: dict[str, Any]) -> None:
        if self.checker is not None and obj["kind"] == "Pod":
            self.checker.pod_created(obj)
