"""Controller pass cost on settled clusters; prints one JSON object per case on stdout.

    python bench/controller.py [--sizes 1000,10000] [--repeats 5]

For each size: a generated cluster (blocks of 10 racks of 25 hosts, 8 GPUs each), one
InferenceGroup per 10 nodes (4 prefill + 2 decode replicas of 2 GPUs, packed in a rack),
rolled out and bound through passes and a toy kubelet until nothing changes. Then, with
the memo kept across passes as the simulator and the operator keep it:

- `steady`: a pass on the settled cluster (nothing to write), p50 and max of `--repeats`;
- `new-group`: one more group arrives; the pass that creates and places its pods.

In process, over the memory store (no HTTP). Once settled, the heap is frozen out of the
garbage collector's walks, as `tandem operator` does once its informers have synced. The goals of issue 15 (steady ≤ 20 ms and a
new group ≤ 50 ms at 10,000 nodes) are printed beside the figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.builders import group, role  # noqa: E402
from support.controller_world import kubelet  # noqa: E402
from tandem.controller.reconcile import Memo, reconcile  # noqa: E402
from tandem.sim.store import MemoryStore  # noqa: E402
from tandem.topology.generate import generate_cluster  # noqa: E402


def _group(index: int) -> dict:
    return group(f"g{index:05d}", [role("prefill", 4, 1, gpus=2), role("decode", 2, 1, gpus=2)], required="rack")


def run(nodes: int, repeats: int, progress: Progress) -> list[dict]:
    blocks = max(1, nodes // 250)
    topology, node_objects = generate_cluster([("block", blocks), ("rack", 10), ("host", 25)], 8)
    store = MemoryStore()
    for obj in [topology, *node_objects]:
        store.create(obj)
    groups = len(node_objects) // 10
    for index in range(groups):
        store.create(_group(index))
    memo = Memo()
    now, passes = 0.0, 0
    task = progress.add_task(f"{len(node_objects)} nodes: settling", total=None)
    while True:
        report = reconcile(store, now, memo=memo)
        moved = kubelet(store)
        passes += 1
        now += 1.0
        progress.advance(task)
        if not moved and not report.writes:
            break
    progress.remove_task(task)
    gc.collect()
    gc.freeze()  # as `tandem operator` does once its informers have synced (operator/process.py)
    pods = len(store.list("Pod"))
    steady = []
    for _ in range(repeats):
        start = time.perf_counter()
        report = reconcile(store, now, memo=memo)
        steady.append((time.perf_counter() - start) * 1000)
        assert report.writes == 0
    store.create(_group(groups))
    start = time.perf_counter()
    report = reconcile(store, now + 1, memo=memo)
    arrival = (time.perf_counter() - start) * 1000
    sizes = {"nodes": len(node_objects), "groups": groups, "pods": pods}
    return [
        {"suite": "controller", "case": "steady", **sizes, "passes_to_settle": passes, "ms_p50": round(statistics.median(steady), 1),
         "ms_max": round(max(steady), 1), "repeats": repeats, "goal_ms_at_10000_nodes": 20},
        {"suite": "controller", "case": "new-group", **sizes, "ms": round(arrival, 1), "pods_created": report.count("create", "Pod"),
         "placed": report.placed, "goal_ms_p99_at_10000_nodes": 50},
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    with Progress(console=Console(stderr=True), transient=True) as progress:
        for size in (int(s) for s in args.sizes.split(",")):
            for row in run(size, args.repeats, progress):
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
