"""Run the controller in a simulated cluster: the same `reconcile`, driven by a seeded clock.

After every batch of events (arrivals, spec changes, faults, binds, pods becoming Ready)
the controller runs one pass and the kubelet model reacts to what it wrote; a pass that
wrote anything is followed by another shortly after (its own writes, as a watch would
deliver them), and the pass's `requeue_after` schedules the next one when a deadline
is due (a gang timeout, a backoff, a step timeout): passes follow events and deadlines,
not a poll. A periodic resync (`resync_s`, 60 s by default) is the safety net an
operator also keeps. Metrics are sampled at every event time.

With serving load, each group's serving model runs its requests up to every batch's time
on the replicas that were Ready until then, and is told the new Ready set after the pass
(`sim/load.py`); the autoscaler's pass (`controller/autoscale.py`) runs every
`autoscale_tick_s` on the model's signals, and a tick that changed nothing costs no pass.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from pydantic import ValidationError

from tandem.api.naming import GPU_RESOURCE, GROUP_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.api.quantity import MILLI, parse_quantity
from tandem.api.resources import InferenceGroup
from tandem.controller.autoscale import autoscale
from tandem.controller.pods import assigned_node, is_functional, pod_failed, pod_gpus, unit_replicas
from tandem.controller.reconcile import Memo, Placer, reconcile
from tandem.placement import place
from tandem.sim.events import EventLoop
from tandem.sim.kubelet import Kubelet, Startup
from tandem.sim.load import LoadDriver, ServingLoad
from tandem.sim.serving import ServingResults
from tandem.sim.store import MemoryStore

FOLLOW_UP_S = 0.5
# The serving models record their replicas' figures this often (and at every autoscaler
# decision), so the report's curves are sampled evenly, autoscaled or not.
SERVING_SAMPLE_S = 30.0


@dataclass(frozen=True)
class Fault:
    at: float
    nodes: tuple[str, ...]
    recover_after: float | None = None


@dataclass(frozen=True)
class Change:
    at: float
    namespace: str
    name: str
    patch: Mapping[str, Any]  # JSON merge patch of the group


@dataclass(frozen=True)
class Variant:
    """One run of a comparison (see `sim.scenario.with_variant`)."""

    name: str
    placement: str = "tandem"
    autoscaling: str | None = None  # overrides spec.autoscaling.policy of every group that has one
    affinity: str = "keep"  # "drop": the groups' affinity rules are removed
    # JSON merge patch of spec.autoscaling of every group that has one (after `autoscaling`):
    # e.g. the Independent baseline's targets, or ratioEnforcement.
    autoscaling_patch: Mapping[str, Any] | None = None
    speed_factor: float = 1.0  # the serving GPUs' speed relative to the scenario's (0.7: 30% slower)


@dataclass
class Scenario:
    cluster: list[dict[str, Any]]  # ClusterTopology and Nodes
    arrivals: list[tuple[float, dict[str, Any]]]  # (time, InferenceGroup)
    duration_s: float
    changes: list[Change] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    seed: int = 0
    bind_latency_s: float = 1.0
    startup: Mapping[str, Startup] = field(default_factory=dict)
    resync_s: float = 60.0
    # Windows (start, end) when the controller is down (crashed, restarting): no pass runs.
    # The controller keeps nothing between passes, so a crash can only change timing.
    controller_down: list[tuple[float, float]] = field(default_factory=list)
    # Request load per group (replayed traces or synthetic), and how often the autoscaler
    # looks at the groups that configure `spec.autoscaling`.
    serving: list[ServingLoad] = field(default_factory=list)
    autoscale_tick_s: float = 5.0
    variants: list[Variant] = field(default_factory=list)  # what `--compare` runs; empty: the placement policies
    # Repetitions: how many seeds `tandem simulate` runs by default, and which one this is
    # (0: the scenario's own seed; k: seed + k, traces replayed from an offset, see scenario.py).
    seeds: int = 1
    replicate: int = 0
    trace_offsets_s: Mapping[str, float] = field(default_factory=dict)  # group -> where its trace replay starts


@dataclass
class Sample:
    at: float
    functional: dict[str, int]  # group -> functional units (every role at its minimum Ready)
    partial_gpus: dict[str, int]  # group -> GPUs held by partially placed units
    allocated_gpus: int
    over_capacity: list[str]  # nodes over allocatable (must stay empty)
    partially_placed: list[str]  # "group[unit]" holding GPUs with a role below its minimum placed
    ready: dict[str, dict[str, int]] = field(default_factory=dict)  # group -> role -> Ready replicas (all units)
    desired: dict[str, dict[str, int]] = field(default_factory=dict)  # group -> role -> desired replicas (all units)
    gpus: dict[str, int] = field(default_factory=dict)  # group -> GPUs of its bound pods


@dataclass
class Result:
    samples: list[Sample]
    log: list[tuple[float, str]]
    store: MemoryStore
    passes: int
    serving: dict[str, ServingResults] = field(default_factory=dict)
    # Per group: (time, Ready prefill replicas, Ready decode replicas, GPUs serving).
    serving_timeline: dict[str, list[tuple[float, int, int, int]]] = field(default_factory=dict)
    # Per group: (time, desired replicas per role) after each autoscaler change.
    scale_events: dict[str, list[tuple[float, dict[str, int]]]] = field(default_factory=dict)


def simulate(scenario: Scenario, progress: Callable[[float], None] | None = None, placer: Placer = place) -> Result:
    """Run `scenario`; `placer` is the placement policy the controller uses (the engine by default)."""
    loop = EventLoop()
    store = MemoryStore(clock=lambda: loop.now)
    kubelet = Kubelet(store, loop, np.random.default_rng(scenario.seed), scenario.bind_latency_s, scenario.startup)
    for obj in scenario.cluster:
        store.create(obj)
    for at, group in scenario.arrivals:
        loop.schedule(at, "arrive", group=group)
    for change in scenario.changes:
        loop.schedule(change.at, "change", change=change)
    for fault in scenario.faults:
        loop.schedule(fault.at, "fail", nodes=fault.nodes)
        if fault.recover_after is not None:
            loop.schedule(fault.at + fault.recover_after, "recover", nodes=fault.nodes)
    t = 0.0
    while t <= scenario.duration_s:
        loop.schedule(t, "resync")
        t += scenario.resync_s
    for _, end in scenario.controller_down:
        loop.schedule(end, "resync")  # the restarted controller's first pass
    driver = LoadDriver(scenario.serving, scenario.cluster) if scenario.serving else None
    if driver is not None:
        t = scenario.autoscale_tick_s
        while t <= scenario.duration_s:
            loop.schedule(t, "autoscale")
            t += scenario.autoscale_tick_s
        t = SERVING_SAMPLE_S
        while t < scenario.duration_s:
            loop.schedule(t, "serving-sample")
            t += SERVING_SAMPLE_S
    scale_events: dict[str, list[tuple[float, dict[str, int]]]] = {}

    samples: list[Sample] = []
    log: list[tuple[float, str]] = []
    passes = 0
    memo = Memo()  # validated groups, nodes and pods by resourceVersion, across passes
    typed_groups: dict[str, tuple[str, InferenceGroup | None]] = {}  # the sampler's, by uid and generation
    pending_follow_up = False
    requeued: set[float] = set()  # pass times already asked for by requeue_after
    while len(loop) and (loop.next_time() or 0.0) <= scenario.duration_s:
        batch = loop.pop_batch()
        if driver is not None:
            driver.advance(loop.now)  # requests run on the replicas that were Ready until now
        down = any(start <= loop.now < end for start, end in scenario.controller_down)
        quiet = True  # a batch of autoscaler ticks that changed nothing needs no pass
        for event in batch:
            if event.kind == "autoscale":
                if driver is not None and not down:
                    scaled = autoscale(store, loop.now, driver.signals)
                    log += [(loop.now, line) for line in scaled.events]
                    for key, desired in scaled.changes:
                        scale_events.setdefault(key, []).append((loop.now, desired))
                    quiet = quiet and not scaled.changes
                continue
            if event.kind == "serving-sample":
                if driver is not None:
                    driver.sample(loop.now)
                continue
            if event.kind == "requeue":
                requeued.discard(loop.now)
            quiet = False
            line = _apply(event.kind, event.data, store, kubelet)
            if line:
                log.append((loop.now, line))
            if event.kind == "follow-up":
                pending_follow_up = False
        if quiet:
            continue
        if down:
            kubelet.react()
            _sync(driver, store, loop.now)
            samples.append(_sample(store, loop.now, typed_groups))
            continue
        report = reconcile(store, loop.now, placer, memo)
        passes += 1
        log += [(loop.now, line) for line in report.events]
        kubelet.react()
        _sync(driver, store, loop.now)
        if report.writes and not pending_follow_up:
            loop.schedule(loop.now + FOLLOW_UP_S, "follow-up")
            pending_follow_up = True
        if report.requeue_after is not None:
            due = loop.now + report.requeue_after
            if due not in requeued and due <= scenario.duration_s:
                loop.schedule(due, "requeue")
                requeued.add(due)
        samples.append(_sample(store, loop.now, typed_groups))
        if progress:
            progress(loop.now)
    if driver is None:
        return Result(samples, log, store, passes)
    driver.finish(scenario.duration_s)
    timeline = {key: run.timeline for key, run in driver.runs.items()}
    return Result(samples, log, store, passes, driver.results(), timeline, scale_events)


def _sync(driver: LoadDriver | None, store: MemoryStore, now: float) -> None:
    if driver is not None:
        driver.sync(store.snapshot().list("Pod"), now)  # shared, read-only: no copy of every pod per pass


def _apply(kind: str, data: dict[str, Any], store: MemoryStore, kubelet: Kubelet) -> str | None:
    if kind == "arrive":
        group = copy.deepcopy(data["group"])
        store.create(group)
        return f"group {group['metadata'].get('namespace', 'default')}/{group['metadata']['name']} arrives"
    if kind == "change":
        change: Change = data["change"]
        store.patch("InferenceGroup", change.namespace, change.name, change.patch)
        return f"group {change.namespace}/{change.name} changed"
    if kind == "fail":
        lines = kubelet.fail_nodes(list(data["nodes"]))
        return f"nodes failed: {', '.join(data['nodes'])} ({len(lines)} pods lost)"
    if kind == "recover":
        kubelet.recover_nodes(list(data["nodes"]))
        return f"nodes recovered: {', '.join(data['nodes'])}"
    if kind in ("bind", "ready"):
        return kubelet.handle(kind, data)
    return None


def _sample(store: MemoryStore, at: float, typed: dict[str, tuple[str, InferenceGroup | None]] | None = None) -> Sample:
    """Figures at one moment; functional and Ready are counted as the controller counts
    them (complete replicas, `controller.pods`), GPUs per pod. `typed` remembers each
    group's model by uid and generation across samples (a status write changes neither)."""
    typed = {} if typed is None else typed
    reader = store.snapshot()
    pods = [p for p in reader.list("Pod") if not pod_failed(p)]
    by_group: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for pod in pods:
        owner = pod["metadata"].get("labels", {}).get(GROUP_LABEL)
        if owner is not None:
            by_group.setdefault((pod["metadata"].get("namespace", "default"), owner), []).append(pod)
    functional: dict[str, int] = {}
    partial: dict[str, int] = {}
    partially_placed: list[str] = []
    ready_counts: dict[str, dict[str, int]] = {}
    desired_counts: dict[str, dict[str, int]] = {}
    held: dict[str, int] = {}
    for raw in reader.list("InferenceGroup"):
        meta = raw["metadata"]
        stamp = f"{meta.get('uid')}/{meta.get('generation')}"
        kept = typed.get(meta.get("uid", ""))
        if kept is None or kept[0] != stamp:
            try:
                kept = (stamp, InferenceGroup.model_validate({k: v for k, v in raw.items() if k != "status"}))
            except ValidationError:
                kept = (stamp, None)
            typed[meta.get("uid", "")] = kept
        group = kept[1]
        if group is None:
            continue
        key = f"{group.metadata.namespace}/{group.metadata.name}"
        mine = by_group.get((group.metadata.namespace, group.metadata.name), [])
        functional[key] = partial[key] = 0
        held[key] = sum(pod_gpus(p) for p in mine if p["spec"].get("nodeName"))
        units = group.spec.replicas
        ready_counts[key] = {r.name: 0 for r in group.spec.roles}
        desired_counts[key] = {r.name: r.replicas * units for r in group.spec.roles}
        members_of: dict[int, list[dict[str, Any]]] = {}
        for pod in mine:
            members_of.setdefault(int(pod["metadata"]["labels"][UNIT_LABEL]), []).append(pod)
        for unit in range(units):
            members = members_of.get(unit, [])
            replicas = unit_replicas(members, group)
            for role, rs in replicas.items():
                if role in ready_counts[key]:
                    ready_counts[key][role] += sum(1 for r in rs if r.phase == "Ready")
            if is_functional(replicas, group):
                functional[key] += 1
            placed = True
            for role in group.spec.roles:
                mine_role = [p for p in members if p["metadata"]["labels"].get(ROLE_LABEL) == role.name]
                placed &= sum(1 for p in mine_role if assigned_node(p)) // role.pods_per_replica >= role.minimum
            if not placed and any(assigned_node(p) for p in members):
                # Holding GPUs without every minimum placed: the waste a unit gang prevents.
                partially_placed.append(f"{key}[{unit}]")
                partial[key] += sum(pod_gpus(p) for p in members if assigned_node(p))
    used: dict[str, int] = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if node:
            used[node] = used.get(node, 0) + pod_gpus(pod)
    over = [
        n["metadata"]["name"]
        for n in reader.list("Node")
        if used.get(n["metadata"]["name"], 0) > parse_quantity(n["status"]["allocatable"].get(GPU_RESOURCE, 0)) // MILLI
    ]
    return Sample(at, functional, partial, sum(used.values()), over, partially_placed, ready_counts, desired_counts, held)
