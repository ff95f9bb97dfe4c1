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
(`sim/load.py`); the autoscaler's pass (`controller/autoscaler.py`) runs every
`autoscale_tick_s` on the model's signals, and a tick that changed nothing costs no pass.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from tandem.cluster.index import ClusterIndex, GroupKey
from tandem.cluster.memory import MemoryStore
from tandem.controller import autoscale
from tandem.backends.delegated_kinds import DELEGATED_BACKENDS, DELEGATED_KINDS, PRIORITY_CLASS
from tandem.controller import DelegationSettings, Memo, Placer, reconcile
from tandem.placement import place
from tandem.sim.events import EventLoop
from tandem.sim.load import LoadDriver, ServingLoad
from tandem.sim.pod_lifecycle import Kubelet, Startup
from tandem.sim.sampler import Sampler
from tandem.sim.serving import ServingResults

FOLLOW_UP_S = 0.5
VIEWED_KINDS = ("InferenceGroup", "Node", "Pod")
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


DELEGATION = DelegationSettings(backends=DELEGATED_BACKENDS)


def simulate(scenario: Scenario, progress: Callable[[float], None] | None = None, placer: Placer = place) -> Result:
    """Run `scenario`; `placer` is the placement policy the controller uses (the engine by default)."""
    loop = EventLoop()
    store = MemoryStore(clock=lambda: loop.now)
    # Every scheduler a group may be handed to runs here (its stand-in: `tandem.schedulers`),
    # as in a cluster whose operator runs with --backends for all of them.
    for kind in (*(k for kinds in DELEGATED_KINDS.values() for k in kinds), PRIORITY_CLASS):
        store.register_kind(kind.key, cluster_scoped=not kind.namespaced, status=kind.status)
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
    # The runner's own view of the store, brought up to date once per pass (after the
    # pass's writes): the kubelet reacts to the pods that changed, the serving models
    # learn their groups' Ready replicas, and the sampler counts what changed.
    view, sampler = ClusterIndex(), Sampler()
    synced: dict[str, int] = {}
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
            _react(view, store, kubelet, sampler)
            _sync(driver, view, loop.now, synced)
            samples.append(_sample(view, sampler, loop.now))
            continue
        report = reconcile(store, loop.now, placer, memo, delegation=DELEGATION)
        passes += 1
        log += [(loop.now, line) for line in report.events]
        _react(view, store, kubelet, sampler)
        _sync(driver, view, loop.now, synced)
        if report.writes and not pending_follow_up:
            loop.schedule(loop.now + FOLLOW_UP_S, "follow-up")
            pending_follow_up = True
        if report.requeue_after is not None:
            due = loop.now + report.requeue_after
            if due not in requeued and due <= scenario.duration_s:
                loop.schedule(due, "requeue")
                requeued.add(due)
        samples.append(_sample(view, sampler, loop.now))
        if progress:
            progress(loop.now)
    if driver is None:
        return Result(samples, log, store, passes)
    driver.finish(scenario.duration_s)
    timeline = {key: run.timeline for key, run in driver.runs.items()}
    return Result(samples, log, store, passes, driver.results(), timeline, scale_events)


def _react(view: ClusterIndex, store: MemoryStore, kubelet: Kubelet, sampler: Sampler) -> None:
    changes = view.refresh(store.snapshot(), VIEWED_KINDS)
    kubelet.react(changes)
    sampler.update(changes)


def _sync(driver: LoadDriver | None, view: ClusterIndex, now: float, synced: dict[str, int]) -> None:
    """Tell the serving models which replicas are Ready, from their groups' pods; a group
    none of whose pods changed since the last sync is not looked at again."""
    if driver is None:
        return
    keys = {key: _group_key(key) for key in driver.runs}
    serials = {key: view.serial.get(group, 0) for key, group in keys.items()}
    if serials == synced:
        return
    synced.clear()
    synced.update(serials)
    pods = [pod for group in sorted(set(keys.values())) for _, pod in sorted(view.pods_of.get(group, {}).items())]
    driver.sync(pods, now)


def _group_key(key: str) -> GroupKey:
    """A serving run's key (`namespace/name`) as the index keys its group."""
    namespace, name = key.split("/", 1)
    return namespace, name


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


def _sample(view: ClusterIndex, sampler: Sampler, at: float) -> Sample:
    """Figures at one moment (see `sampler.py`): per group from its figures, kept while it
    and its pods hold; allocation and over-capacity from the GPUs bound to each node."""
    functional: dict[str, int] = {}
    partial: dict[str, int] = {}
    partially_placed: list[str] = []
    ready: dict[str, dict[str, int]] = {}
    desired: dict[str, dict[str, int]] = {}
    held: dict[str, int] = {}
    for (_, name), raw in sorted(view.of_kind("InferenceGroup").items()):
        namespace = raw["metadata"].get("namespace", "default")
        figures = sampler.group(view, (namespace, name), raw)
        if figures is None:
            continue
        key = f"{namespace}/{name}"
        functional[key], partial[key], held[key] = figures.functional, figures.partial_gpus, figures.gpus
        ready[key], desired[key] = dict(figures.ready), dict(figures.desired)
        partially_placed += figures.partially_placed
    return Sample(at, functional, partial, sampler.allocated, sorted(sampler.over), partially_placed, ready, desired, held)
