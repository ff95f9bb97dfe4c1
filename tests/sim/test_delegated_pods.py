"""The simulator's kubelet model places a delegated group's pods through its scheduler's stand-in."""

from __future__ import annotations

import numpy as np

from schedulers.helpers import kueue_pod, node, pod, volcano_group, volcano_pod, workload
from tandem.backends.delegated_kinds import DELEGATED_KINDS
from tandem.cluster.memory import MemoryStore
from tandem.sim.events import EventLoop
from tandem.sim.pod_lifecycle import Kubelet


def _world(backend: str | None) -> tuple[MemoryStore, EventLoop, Kubelet]:
    loop = EventLoop()
    store = MemoryStore(clock=lambda: loop.now)
    if backend is not None:
        for kind in DELEGATED_KINDS[backend]:
            store.register_kind(kind.key, cluster_scoped=False, status=kind.status)
    return store, loop, Kubelet(store, loop, np.random.default_rng(0), bind_latency_s=1.0)


def _create(store: MemoryStore, obj: dict) -> None:
    obj = {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k not in ("uid", "creationTimestamp")}}
    store.create(obj)


def _run(loop: EventLoop, kubelet: Kubelet) -> None:
    while len(loop):
        for event in loop.pop_batch():
            kubelet.handle(event.kind, event.data)
        kubelet.react()


def _bound(store: MemoryStore) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in store.list("Pod") if p["spec"].get("nodeName")}


def test_a_volcano_gang_is_bound_whole_after_the_bind_latency_once_it_fits():
    store, loop, kubelet = _world("volcano")
    for obj in [node("n-0"), volcano_group("g", 3), *[volcano_pod(f"v-{i}", "g", gpus=4) for i in range(3)]]:
        _create(store, obj)
    kubelet.react()
    _run(loop, kubelet)
    assert _bound(store) == {}
    (group,) = store.list("PodGroup.scheduling.volcano.sh")
    assert group["status"]["phase"] == "Inqueue"
    _create(store, node("n-1"))
    kubelet.react()
    assert _bound(store) == {}, "binds wait for the bind latency"
    _run(loop, kubelet)
    assert set(_bound(store)) == {"v-0", "v-1", "v-2"}
    assert store.list("PodGroup.scheduling.volcano.sh")[0]["status"]["phase"] == "Running"


def test_kueue_pods_are_admitted_then_bound_and_other_schedulers_pods_wait():
    store, loop, kubelet = _world("kueue")
    for obj in [node("n-0"), workload("g", {"decode": 2}), kueue_pod("q-0", "g"), kueue_pod("q-1", "g"), pod("v", 4, scheduler="volcano")]:
        _create(store, obj)
    kubelet.react()
    _run(loop, kubelet)
    assert _bound(store) == {"q-0": "n-0", "q-1": "n-0"}, "Volcano's kinds are not registered: its pod waits"


def test_without_registered_kinds_delegated_pods_are_not_bound():
    store, loop, kubelet = _world(None)
    for obj in [node("n-0"), volcano_pod("v", "g")]:
        _create(store, obj)
    kubelet.react()
    _run(loop, kubelet)
    assert _bound(store) == {}


def test_a_stopped_scheduler_writes_nothing_and_places_its_gang_once_started_again():
    """`paused` (the fault campaign's hook): the backend's stand-in decides nothing meanwhile."""
    store, loop, kubelet = _world("volcano")
    kubelet.paused.add("volcano")
    for obj in [node("n-0"), node("n-1"), volcano_group("g", 3), *[volcano_pod(f"v-{i}", "g", gpus=4) for i in range(3)]]:
        _create(store, obj)
    kubelet.react()
    _run(loop, kubelet)
    assert _bound(store) == {} and "status" not in store.list("PodGroup.scheduling.volcano.sh")[0]
    kubelet.paused.discard("volcano")
    kubelet.react()
    _run(loop, kubelet)
    assert set(_bound(store)) == {"v-0", "v-1", "v-2"}
