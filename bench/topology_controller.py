"""Topology controller pass cost at scale; prints one JSON object per case on stdout.

    python bench/topology_controller.py [--sizes 4096,16384,65536] [--repeats 9] [--backends volcano]

For each size: a cluster of blocks of 32 racks of 32 hosts (labels block, rack and
`kubernetes.io/hostname`), one ClusterTopology with those three levels, and the topology
controller keeping Volcano's HyperNodes (and whatever else `--backends` names) in the
memory store, its memo kept across passes as `tandem topology-controller` keeps it.
Settled first (passes until one writes nothing), the heap then frozen out of the
garbage collector's walks as the operator does once its informers have synced. Then:

- `node-event`: what one node event costs the pass that sees it, for a node added to an
  existing rack, a node relabelled into another existing rack, and a node removed: the
  pass's time (median, min, max over `--repeats` events, and its observe / decide / apply
  parts), and the objects it wrote (backend objects; the status patch apart);
- `rack-added`: a rack of 32 nodes added under an existing block: the time of the pass
  that brings the HyperNodes up to date (the next pass writes nothing: checked), the
  HyperNodes it wrote against the HyperNodes there are (median over `--repeats` racks);
- `memory`: the tracemalloc peak of one rack-added pass (traced apart from the timed
  ones: tracing slows a pass), and the process's peak RSS over the whole run.

In process, over the memory store. Issue 26's goal: a 65,536-node cluster's HyperNodes
up to date within 1 s of a rack being added, without rewriting the rest.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.progress import Progress

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tandem.api.naming import HOSTNAME_LABEL  # noqa: E402
from tandem.cluster.memory import MemoryStore  # noqa: E402
from tandem.topology.generate import generate_cluster  # noqa: E402
from tandem.topology_controller.apply import apply  # noqa: E402
from tandem.topology_controller.decide import decide  # noqa: E402
from tandem.topology_controller.kinds import BACKEND_KINDS  # noqa: E402
from tandem.topology_controller.observe import observe  # noqa: E402
from tandem.topology_controller.reconcile import TopologyMemo, TopologySettings, reconcile  # noqa: E402

RACKS_PER_BLOCK, HOSTS_PER_RACK = 32, 32
RACK_LABEL = "network.tandem.dev/rack"
BLOCK_LABEL = "network.tandem.dev/block"


def _store() -> MemoryStore:
    store = MemoryStore()
    for kinds in BACKEND_KINDS.values():
        for kind in kinds:
            store.register_kind(kind.key, cluster_scoped=True, status=False)
    store.register_kind("ClusterTopology", cluster_scoped=True, status=True)
    return store


class Pass:
    """One pass, timed part by part (the same steps as `reconcile`)."""

    def __init__(self, store: MemoryStore, settings: TopologySettings, memo: TopologyMemo):
        self.store, self.settings, self.memo = store, settings, memo

    def __call__(self, now: float) -> dict[str, Any]:
        t0 = time.perf_counter()
        world = observe(self.store.snapshot(), self.settings.backends, self.memo)
        t1 = time.perf_counter()
        decisions = decide(world, now)
        t2 = time.perf_counter()
        applied = apply(self.store, decisions)
        t3 = time.perf_counter()
        assert not applied.errors, applied.errors
        objects = applied.created + applied.patched + applied.deleted - applied.by_kind[("patch", "ClusterTopology")]
        return {"ms": (t3 - t0) * 1e3, "observe_ms": (t1 - t0) * 1e3, "decide_ms": (t2 - t1) * 1e3, "apply_ms": (t3 - t2) * 1e3,
                "objects_written": objects, "status_patches": applied.status_patches,
                "hypernodes_written": sum(n for (verb, kind), n in applied.by_kind.items() if kind == "HyperNode")}


def _settle(run: Pass, now: float) -> tuple[float, int]:
    passes = 0
    while True:
        figures = run(now)
        passes += 1
        now += 1.0
        if not figures["objects_written"] and not figures["status_patches"]:
            return now, passes


def _summary(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    values = sorted(r[key] for r in rows)
    return {f"{key}_median": round(statistics.median(values), 2), f"{key}_min": round(values[0], 2), f"{key}_max": round(values[-1], 2)}


def run(nodes: int, repeats: int, backends: tuple[str, ...], progress: Progress) -> list[dict[str, Any]]:
    blocks = max(1, nodes // (RACKS_PER_BLOCK * HOSTS_PER_RACK))
    topology, node_objects = generate_cluster([("block", blocks), ("rack", RACKS_PER_BLOCK), ("host", HOSTS_PER_RACK)], 8)
    store = _store()
    task = progress.add_task(f"{len(node_objects)} nodes: building", total=len(node_objects))
    store.create(topology)
    for node in node_objects:
        store.create(node)
        progress.advance(task)
    template = node_objects[0]
    names = [n["metadata"]["name"] for n in node_objects]
    del node_objects
    settings = TopologySettings(backends)
    memo = TopologyMemo()
    run_pass = Pass(store, settings, memo)
    progress.update(task, description=f"{len(names)} nodes: settling", total=None)
    start = time.perf_counter()
    now, passes = _settle(run_pass, 0.0)
    settle_s = time.perf_counter() - start
    gc.collect()
    gc.freeze()
    hypernodes = len(store.snapshot().list("HyperNode")) if "volcano" in backends else 0
    sizes = {"nodes": len(names), "blocks": blocks, "backends": list(backends), "hypernodes": hypernodes}
    fresh = iter(range(10**9))

    def new_node(rack: str, block: str) -> dict[str, Any]:
        node = copy.deepcopy(template)
        name = f"added-{next(fresh):06d}"
        node["metadata"]["name"] = name
        node["metadata"]["labels"].update({HOSTNAME_LABEL: name, RACK_LABEL: rack, BLOCK_LABEL: block})
        return node

    def passes_after(label: str, change: Callable[[int], None]) -> list[dict[str, Any]]:
        """`repeats` times: the change, the pass it needs (timed), and a check that the next writes nothing."""
        nonlocal now
        rows = []
        progress.update(task, description=f"{len(names)} nodes: {label}")
        for i in range(repeats):
            change(i)
            rows.append(run_pass(now))
            now += 1.0
            assert run_pass(now)["objects_written"] == 0  # up to date after one pass
            now += 1.0
        return rows

    def measure(label: str, change: Callable[[int], None]) -> dict[str, Any]:
        rows = passes_after(label, change)
        out = {"suite": "topology-controller", "case": "node-event", "event": label, **sizes, "repeats": repeats}
        for key in ("ms", "observe_ms", "decide_ms", "apply_ms", "objects_written", "hypernodes_written"):
            out.update(_summary(rows, key))
        return out

    label_of = lambda name: store.get("Node", None, name)["metadata"]["labels"]  # noqa: E731
    results = [
        measure("node-added-to-rack", lambda i: store.create(new_node(label_of(names[i * 97])[RACK_LABEL], label_of(names[i * 97])[BLOCK_LABEL]))),
        measure("node-relabelled-to-another-rack", lambda i: store.patch("Node", None, names[i * 89 + 1], {
            "metadata": {"labels": {RACK_LABEL: label_of(names[i * 89 + 1 + HOSTS_PER_RACK])[RACK_LABEL],
                                    BLOCK_LABEL: label_of(names[i * 89 + 1 + HOSTS_PER_RACK])[BLOCK_LABEL]}}})),
        measure("node-removed", lambda i: store.delete("Node", None, names[i * 101 + 2])),
    ]

    def add_rack(i: int) -> None:
        for _ in range(HOSTS_PER_RACK):
            store.create(new_node(f"rack-new-{i}", label_of(names[0])[BLOCK_LABEL]))

    rack_rows = passes_after("racks added", add_rack)
    total = len(store.snapshot().list("HyperNode")) if "volcano" in backends else 0
    rack = {"suite": "topology-controller", "case": "rack-added", **sizes, "hosts_per_rack": HOSTS_PER_RACK, "repeats": repeats,
            "hypernodes_total": total, "passes_to_settle": passes, "settle_s": round(settle_s, 1), "goal_ms_at_65536_nodes": 1000}
    for key in ("ms", "observe_ms", "decide_ms", "apply_ms", "hypernodes_written"):
        rack.update(_summary(rack_rows, key))
    results.append(rack)

    add_rack(repeats)
    tracemalloc.start()
    reconcile(store, now, settings, memo)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    results.append({"suite": "topology-controller", "case": "memory", **sizes, "pass_peak_traced_mb": round(peak / 2**20, 1),
                    "process_peak_rss_mb": round(rss_mb)})
    progress.remove_task(task)
    gc.unfreeze()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4096,16384,65536")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--backends", default="volcano")
    args = parser.parse_args(argv)
    backends = tuple(b for b in args.backends.split(",") if b)
    with Progress(console=Console(stderr=True), transient=True) as progress:
        for size in (int(s) for s in args.sizes.split(",")):
            for row in run(size, args.repeats, backends, progress):
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
