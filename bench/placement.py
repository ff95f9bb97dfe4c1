"""Placement benchmarks; prints one JSON object per case on stdout.

    python bench/placement.py                      # every suite
    python bench/placement.py --suite latency      # p50/p99 of one decision (1,000 to 65,536 nodes)
    python bench/placement.py --suite batch        # one plan for hundreds of units
    python bench/placement.py --suite quality      # engine vs exact vs baselines
    python bench/placement.py --suite contention   # more demand than capacity

Latency: one placement decision (`tandem.placement.place` on a prebuilt snapshot, as a
scheduler keeps its cache) for the unit of issue #2 — 4 prefill replicas (1 pod × 8 GPUs),
2 decode replicas (2 pods × 8 GPUs within one rack), unit pack required block / preferred
rack, Preferred prefill→decode affinity at rack — on clusters of 8-GPU nodes in blocks of
10 racks × 25 hosts, pre-filled to 0%, 50% and 90% of their GPUs. Wall-clock and CPU
time are both reported: on a shared machine the first measures the neighbours too.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from rich.progress import Progress

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tandem.api.loading import load_texts  # noqa: E402
from tandem.placement import place, units_from_groups  # noqa: E402
from tandem.placement.verify import verify_plan  # noqa: E402
from tandem.topology import ClusterSnapshot, TopologyView  # noqa: E402
from tandem.topology.generate import generate_cluster  # noqa: E402

RACKS_PER_BLOCK = 10
HOSTS_PER_RACK = 25

UNIT = {
    "apiVersion": "tandem.dev/v1alpha1",
    "kind": "InferenceGroup",
    "metadata": {"name": "bench", "namespace": "bench"},
    "spec": {
        "topology": {"pack": {"required": "block", "preferred": "rack"}},
        "roles": [
            {
                "name": "prefill",
                "replicas": 4,
                "minReplicas": 1,
                "topology": {"pack": {"required": "host"}},
                "template": {"spec": {"containers": [{"name": "e", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}},
            },
            {
                "name": "decode",
                "replicas": 2,
                "minReplicas": 1,
                "podsPerReplica": 2,
                "topology": {"pack": {"required": "rack"}},
                "template": {"spec": {"containers": [{"name": "e", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}},
            },
        ],
        "affinity": [{"from": "prefill", "to": "decode", "level": "rack", "mode": "Preferred"}],
    },
}


def build_world(nodes: int, fill: float, seed: int, pattern: str = "packed"):
    """(snapshot, views, units, build seconds) for a pre-filled cluster of `nodes` nodes."""
    started = time.perf_counter()
    blocks = max(1, nodes // (RACKS_PER_BLOCK * HOSTS_PER_RACK))
    topology, manifests = generate_cluster([("block", blocks), ("rack", RACKS_PER_BLOCK), ("host", HOSTS_PER_RACK)], 8)
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [topology, *manifests, UNIT]})
    inputs = load_texts([("bench", text)])
    snapshot, _ = ClusterSnapshot.build(inputs.nodes, inputs.pods)
    snapshot = dataclasses.replace(snapshot, used=prefill(snapshot, fill, seed, pattern))
    views = {"default": TopologyView.build(inputs.topologies["default"], snapshot)}
    return snapshot, views, units_from_groups(inputs.groups), time.perf_counter() - started


def prefill(snapshot: ClusterSnapshot, fill: float, seed: int, pattern: str) -> np.ndarray:
    """Used capacity covering `fill` of all GPUs, 80% as whole-node jobs and 20% on partly used nodes (4, 6 or 7 GPUs).

    `scattered`: every job on a node drawn uniformly at random (worst case for packing).
    `packed`: nodes taken rack by rack in a random rack order, as a topology-aware
    scheduler leaves a cluster, so free capacity stays in whole racks.
    """
    rng = np.random.default_rng(seed)
    used = snapshot.used.copy()
    gpu = snapshot.resource_index["nvidia.com/gpu"]
    n = len(snapshot.node_names)
    target = int(round(fill * n * 8))
    if pattern == "scattered":
        order = rng.permutation(n)
    else:
        racks = rng.permutation(n // HOSTS_PER_RACK)
        order = (racks[:, None] * HOSTS_PER_RACK + np.arange(HOSTS_PER_RACK)[None, :]).ravel()
    whole = int(target * 0.8) // 8
    used[order[:whole], gpu] = 8
    remaining = target - whole * 8
    for node in order[whole:]:
        if remaining <= 0:
            break
        amount = min(int(rng.choice([4, 6, 7])), remaining)
        used[node, gpu] = amount
        remaining -= amount
    pods = snapshot.resource_index["pods"]
    used[:, pods] = (used[:, gpu] + 7) // 8
    return used


def latency(sizes: list[int], fills: list[float], repeat: int, seed: int) -> list[dict]:
    results = []
    cases = [(n, f, p) for n in sizes for f in fills for p in (("packed", "scattered") if f > 0 else ("packed",))]
    with Progress(transient=True, console=_stderr()) as progress:
        task = progress.add_task("latency", total=len(cases))
        for nodes, fill, pattern in cases:
            snapshot, views, units, build_s = build_world(nodes, fill, seed, pattern)
            plan = place(snapshot, views, units)  # warm-up, and the result we report
            assert verify_plan(plan, snapshot, views, units) == []
            times, cpu = [], []
            for _ in range(repeat):
                start, start_cpu = time.perf_counter(), time.process_time()
                place(snapshot, views, units)
                times.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
            times.sort()
            cpu.sort()
            unit = plan.units[0]
            results.append(
                {
                    "suite": "latency",
                    "nodes": len(snapshot.node_names),
                    "gpus": int(len(snapshot.node_names) * 8),
                    "prefilled": fill,
                    "pattern": pattern,
                    "repeat": repeat,
                    "p50_ms": round(statistics.median(times) * 1e3, 3),
                    "p99_ms": round(times[min(len(times) - 1, int(0.99 * len(times)))] * 1e3, 3),
                    "max_ms": round(times[-1] * 1e3, 3),
                    # CPU time of this process: what the decision costs when other work
                    # shares the machine (wall-clock p99 then measures the neighbours).
                    "cpu_p50_ms": round(statistics.median(cpu) * 1e3, 3),
                    "cpu_p99_ms": round(cpu[min(len(cpu) - 1, int(0.99 * len(cpu)))] * 1e3, 3),
                    "snapshot_build_s": round(build_s, 3),
                    "state": unit.state,
                    "domain": unit.domain,
                }
            )
            progress.advance(task)
    return results


def batch(nodes: int, fill: float, counts: list[int], seed: int, repeat: int = 3) -> list[dict]:
    """One plan for many pending units at once (the controller's case), some not fitting;
    each plan timed `repeat` times (median and slowest reported)."""
    results = []
    snapshot, views, units, _ = build_world(nodes, fill, seed, "packed")
    (unit,) = units
    with Progress(transient=True, console=_stderr()) as progress:
        task = progress.add_task("batch", total=len(counts))
        for count in counts:
            many = [dataclasses.replace(unit, group=f"bench-{i}") for i in range(count)]
            times, cpu = [], []
            for _ in range(repeat):
                start, start_cpu = time.perf_counter(), time.process_time()
                plan = place(snapshot, views, many)
                times.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
            assert verify_plan(plan, snapshot, views, many) == []
            states = [u.state for u in plan.units]
            results.append(
                {
                    "suite": "batch",
                    "nodes": len(snapshot.node_names),
                    "prefilled": fill,
                    "units": count,
                    "unitGpus": 64,
                    "freeGpus": int(snapshot.free[:, snapshot.resource_index["nvidia.com/gpu"]].sum()),
                    "repeat": repeat,
                    "seconds": round(statistics.median(times), 3),
                    "max_seconds": round(max(times), 3),
                    "cpu_seconds": round(statistics.median(cpu), 3),
                    "placed": states.count("Placed"),
                    "minimumPlaced": states.count("MinimumPlaced"),
                    "unschedulable": states.count("Unschedulable"),
                }
            )
            progress.advance(task)
    return results


def _stderr():
    from rich.console import Console

    return Console(stderr=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=["latency", "batch", "quality", "contention", "all"], default="all")
    parser.add_argument("--batch", default="100,400,1000", help="units per plan for the batch suite (5,000 nodes, 50%% used)")
    parser.add_argument("--sizes", default="1000,5000,20000,65536", help="node counts for the latency suite")
    parser.add_argument("--fills", default="0,0.5,0.9", help="pre-filled GPU fractions for the latency suite")
    parser.add_argument("--repeat", type=int, default=200, help="decisions timed per latency case")
    parser.add_argument("--instances", type=int, default=60, help="random instances for the quality suite")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    results: list[dict] = []
    if args.suite in ("latency", "all"):
        sizes = [int(s) for s in args.sizes.split(",")]
        fills = [float(f) for f in args.fills.split(",")]
        results += latency(sizes, fills, args.repeat, args.seed)
    if args.suite in ("batch", "all"):
        results += batch(5000, 0.5, [int(c) for c in args.batch.split(",")], args.seed)
    if args.suite in ("quality", "all"):
        from quality import run_quality

        results += run_quality(args.seed, args.instances)
    if args.suite in ("contention", "all"):
        from quality import run_contention

        results += run_contention(args.seed)
    for result in results:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
