"""Controller pass cost on settled clusters; prints one JSON object per case on stdout.

    python bench/controller.py [--sizes 1000,10000,65536] [--repeats 20] [--backend native|volcano|kai|koordinator]

For each size: a generated cluster (blocks of 10 racks of 25 hosts, 8 GPUs each, 500
millicores and 1 GiB allocatable per host besides), three other pods bound on every
node (the DaemonSets a real node runs: they hold capacity and tandem reads them), and
one InferenceGroup per 10 nodes (4 prefill replicas of one pod + 3 decode replicas of
two pods, 2 GPUs each, packed in a rack): 10,000 nodes carry 40,000 pods and 1,000
groups; 65,536 nodes 262,000 pods. Rolled out and bound through passes and a toy
kubelet until nothing changes, then, with the memo kept across passes as the simulator
and the operator keep it:

- `steady`: a pass on the settled cluster (nothing changed, nothing to write), p50 and
  max of `--repeats`;
- `new-group`: one more group arrives; the pass that creates and places its pods, p50,
  p99 and max over `--repeats` groups (each settled before the next comes);
- `event`: what one change costs the pass that sees it: batches of 1,000 pod status
  changes, of 1,000 node heartbeats, of 100 nodes going NotReady then Ready again, each
  followed by one observe and the placement snapshot brought up to date, divided by the
  events (median and largest of 5 batches); and one node going NotReady alone (10 passes);
- `memory`: the process's peak RSS over the whole run (building, settling, everything
  above), and its RSS at the end, with the store, index, memo and snapshot held.

With `--backend` other than `native`, every group is delegated to that scheduler (issue
27): the pass writes its gang objects and pods as the scheduler needs them and places
nothing itself; a toy scheduler here binds each handed-over pod to the first node with
room (the schedulers' stand-ins are not what is measured). `new-group` then counts the
pods created, not placed.

In process, over the memory store (no HTTP: `bench/operator_http.py` measures that). The
store plays the operator's informer caches too, so it keeps each object as they keep it:
Pods and Nodes trimmed to what tandem reads (`tandem.kube.trim`), which is what the goal
of 2 GB at 65,536 nodes counts. Once settled, the heap is frozen out of the garbage
collector's walks, as `tandem operator` does once its informers have synced. The goals of
issue 15 are printed beside the figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.builders import container, group, role  # noqa: E402
from tandem.api.naming import BACKEND_LABEL, GATE, HOSTNAME_LABEL  # noqa: E402
from tandem.backends.delegated_kinds import DELEGATED_KINDS, PRIORITY_CLASS  # noqa: E402
from tandem.controller import DelegationSettings  # noqa: E402
from tandem.cluster.memory import MemoryStore  # noqa: E402
from tandem.controller.observe import observe  # noqa: E402
from tandem.controller.reconcile import Memo, reconcile  # noqa: E402
from tandem.kube.trim import trimmer  # noqa: E402
from tandem.topology.generate import generate_cluster  # noqa: E402

DAEMONS = ("node-exporter", "kube-proxy", "gpu-device-plugin")


class InformerShapedStore(MemoryStore):
    """The memory store keeping each object as the operator's informer caches keep it."""

    def _write(self, key: tuple[str, str, str], obj: dict, kind_of_event: str) -> dict:
        return super()._write(key, trimmer(key[0])(obj), kind_of_event)


def _group(index: int, backend: str = "native") -> dict:
    made = group(f"g{index:05d}", [role("prefill", 4, 1, gpus=2), role("decode", 3, 1, gpus=2, pods=2)], required="rack")
    made["spec"]["scheduler"] = {"backend": backend}
    return made


class Scheduler:
    """The toy scheduler of a delegated run: each handed-over pod to the first node with
    room (2-GPU pods on 8-GPU nodes), remembering how full each node is."""

    def __init__(self, nodes: list[str], gpus: int = 8):
        self.nodes, self.free, self.cursor = nodes, {name: gpus for name in nodes}, 0

    def place(self, need: int) -> str:
        while self.free[self.nodes[self.cursor]] < need:
            self.cursor += 1
        self.free[self.nodes[self.cursor]] -= need
        return self.nodes[self.cursor]


def _daemon(node: str, name: str) -> dict:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-{node}", "namespace": "kube-system"},
           "spec": {"nodeName": node, "containers": [container(cpu="50m", memory="64Mi")]}, "status": {"phase": "Running"}}
    return pod


def kubelet(store: MemoryStore, scheduler: Scheduler | None = None) -> int:
    """Bind every pod tandem placed to its node (and, with a `scheduler`, every pod handed
    to one to the node it picks) and make every bound tandem pod Ready."""
    changes = 0
    for pod in store.snapshot().list("Pod", labels="tandem.dev/group"):
        spec, meta = pod["spec"], pod["metadata"]
        gated = any(g.get("name") == GATE for g in spec.get("schedulingGates", []))
        if not gated and not spec.get("nodeName") and spec.get("nodeSelector", {}).get(HOSTNAME_LABEL):
            store.bind(meta["namespace"], meta["name"], spec["nodeSelector"][HOSTNAME_LABEL])
            changes += 1
        elif scheduler is not None and not spec.get("schedulingGates") and not spec.get("nodeName") and BACKEND_LABEL in meta["labels"]:
            store.bind(meta["namespace"], meta["name"], scheduler.place(2))
            changes += 1
        elif spec.get("nodeName") and not pod.get("status", {}).get("conditions"):
            store.patch_status("Pod", meta["namespace"], meta["name"],
                               {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
            changes += 1
    return changes


def settle(store: MemoryStore, memo: Memo, now: float, delegation: DelegationSettings, scheduler: Scheduler | None) -> tuple[float, int]:
    passes = 0
    while True:
        report = reconcile(store, now, memo=memo, delegation=delegation)
        moved = kubelet(store, scheduler)
        passes += 1
        now += 1.0
        if not moved and not report.writes:
            return now, passes


def run(nodes: int, repeats: int, progress: Progress, backend: str = "native") -> list[dict]:
    blocks = max(1, -(-nodes // 250))
    topology, node_objects = generate_cluster([("block", blocks), ("rack", 10), ("host", 25)], 8)
    node_objects = node_objects[:nodes]
    for node in node_objects:
        node["status"]["allocatable"].update({"cpu": "500", "memory": "2000Gi"})
    store = InformerShapedStore()
    delegation = DelegationSettings() if backend == "native" else DelegationSettings(backends=(backend,))
    for kind in (*DELEGATED_KINDS.get(backend, ()), PRIORITY_CLASS):
        store.register_kind(kind.key, cluster_scoped=not kind.namespaced, status=kind.status)
    scheduler = None if backend == "native" else Scheduler([node["metadata"]["name"] for node in node_objects])
    groups = len(node_objects) // 10
    task = progress.add_task(f"{len(node_objects)} nodes: building", total=1 + len(node_objects) + groups)
    store.create(topology)
    for node in node_objects:
        store.create(node)
        for name in DAEMONS:
            store.create(_daemon(node["metadata"]["name"], name))
        progress.advance(task)
    for index in range(groups):
        store.create(_group(index, backend))
        progress.advance(task)
    names = [node["metadata"]["name"] for node in node_objects]
    del node_objects, topology  # the store holds the cluster now, as a real one would
    progress.update(task, description=f"{len(names)} nodes: settling", total=None)
    memo = Memo()
    start = time.perf_counter()
    now, passes = settle(store, memo, 0.0, delegation, scheduler)
    settle_s = time.perf_counter() - start
    progress.remove_task(task)
    gc.collect()
    gc.freeze()  # as `tandem operator` does once its informers have synced (operator/process.py)
    snapshot = store.snapshot()
    pods = len(snapshot.list("Pod"))
    sizes = {"backend": backend, "nodes": len(names), "groups": groups, "pods": pods}

    steady = []
    for _ in range(repeats):
        begin = time.perf_counter()
        report = reconcile(store, now, memo=memo, delegation=delegation)
        steady.append((time.perf_counter() - begin) * 1000)
        assert report.writes == 0
    arrivals, created = [], 0
    for index in range(repeats):
        store.create(_group(groups + index, backend))
        now += 1.0
        begin = time.perf_counter()
        report = reconcile(store, now, memo=memo, delegation=delegation)
        arrivals.append((time.perf_counter() - begin) * 1000)
        created += report.count("create", "Pod")
        assert report.placed > 0 if scheduler is None else report.count("create", "Pod") > 0
        now, _ = settle(store, memo, now + 1.0, delegation, scheduler)
    events = _events(store, memo, names)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    end_mb = _current_rss_mb()
    arrivals.sort()
    return [
        {"suite": "controller", "case": "steady", **sizes, "passes_to_settle": passes, "settle_s": round(settle_s, 1),
         "ms_p50": round(statistics.median(steady), 2), "ms_max": round(max(steady), 2), "repeats": repeats,
         "goal_ms_at_10000_nodes": 20},
        {"suite": "controller", "case": "new-group", **sizes, "ms_p50": round(statistics.median(arrivals), 1),
         "ms_p99": round(arrivals[min(len(arrivals) - 1, int(0.99 * len(arrivals)))], 1), "ms_max": round(arrivals[-1], 1),
         "repeats": repeats, "pods_created_per_group": created / repeats, "goal_ms_p99_at_10000_nodes": 50},
        {"suite": "controller", "case": "event", **sizes, **events, "goal_us_per_event": 50},
        {"suite": "controller", "case": "memory", **sizes, "peak_rss_mb": round(rss_mb), "end_rss_mb": None if end_mb is None else round(end_mb), "goal_mb_at_65536_nodes": 2048},
    ]


def _current_rss_mb() -> float | None:
    """Resident memory now (Linux: /proc/self/statm; None elsewhere), where `ru_maxrss` is the peak."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * resource.getpagesize() / 2**20


def _events(store: MemoryStore, memo: Memo, node_names: list[str], rounds: int = 5) -> dict:
    """Microseconds per event, for pod status changes, node heartbeats and Ready flips: the
    median and the largest over `rounds` batches (a batch, then one observe and the
    snapshot brought up to date); and a node going NotReady alone, one event per pass."""
    out: dict = {}
    names = node_names[:1000]
    daemons = [f"{DAEMONS[0]}-{name}" for name in names]

    def timed(label: str, batches: list[list]) -> None:  # type: ignore[type-arg]
        batches = [writes for writes in batches if writes]
        if not batches:  # a cluster too small to have the nodes for it
            return
        per_event = []
        for writes in batches:
            observe(store.snapshot(), memo)  # nothing pending
            memo.placement.snapshot()
            for write in writes:
                write()
            begin = time.perf_counter()
            observe(store.snapshot(), memo)
            memo.placement.snapshot()
            per_event.append((time.perf_counter() - begin) * 1e6 / len(writes))
        out[f"us_per_{label}"] = round(statistics.median(per_event), 1)
        out[f"us_per_{label}_max"] = round(max(per_event), 1)
        out[f"{label}_events"] = f"{len(batches)} x {len(batches[0])}"

    def status(kind: str, namespace: str | None, name: str, body: dict):  # type: ignore[no-untyped-def]
        return lambda: store.patch_status(kind, namespace, name, {"status": body})

    def ready(value: str) -> dict:
        return {"conditions": [{"type": "Ready", "status": value}]}

    timed("pod_status", [[status("Pod", "kube-system", d, {"podIP": f"127.{10 + r}.{i // 250}.{i % 250}"}) for i, d in enumerate(daemons)]
                         for r in range(rounds)])
    timed("node_heartbeat", [[status("Node", None, n, {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": f"t{r}.{i}"}]})
                              for i, n in enumerate(names)] for r in range(rounds)])
    per = max(1, min(100, len(names) // (2 * rounds)))  # 100 a batch from 1,000 nodes up
    flips = [names[r * per:(r + 1) * per] for r in range(rounds)]
    timed("node_not_ready", [[status("Node", None, n, ready("False")) for n in batch] for batch in flips])
    timed("node_ready_again", [[status("Node", None, n, ready("True")) for n in batch] for batch in flips])
    alone = names[rounds * per:rounds * per + 2 * rounds]  # nodes no batch flipped
    timed("node_not_ready_alone", [[status("Node", None, n, ready("False"))] for n in alone])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,65536")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--backend", default="native", choices=("native", "volcano", "kai", "koordinator"))
    args = parser.parse_args(argv)
    with Progress(console=Console(stderr=True), transient=True) as progress:
        for size in (int(s) for s in args.sizes.split(",")):
            for row in run(size, args.repeats, progress, args.backend):
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
