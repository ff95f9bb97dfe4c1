"""Placement benchmarks; prints one JSON object per case on stdout.

    python bench/placement.py                      # every suite
    python bench/placement.py --suite latency      # p50/p99 of one decision (1,000 to 65,536 nodes)
    python bench/placement.py --suite batch        # one plan for hundreds of units
    python bench/placement.py --suite quality      # engine vs exact vs baselines
    python bench/placement.py --suite contention   # more demand than capacity
    python bench/placement.py --suite latency --sizes 65536 --fills 0.9 --baseline /work/wt-speed-base/src
    python bench/placement.py --suite batch --batch 1000 --baseline /work/wt-speed-base/src

`--baseline SRC` measures the code under SRC (a worktree of the commit to compare with,
e.g. `git worktree add --detach ../base main`, then `--baseline ../base/src`) and this
code in one run: each side builds its world once in a worker process of its own (the
same script, its `PYTHONPATH` set to the side's sources), and the bench hands them turns
of `--turn` decisions (one plan for the batch), old and new alternately (which goes
first alternates too), so the machine's load falls on both alike. Each result line
names its side (`code`: `baseline` or `new`) and carries the load average (1 min) read
around every turn; a last line per case gives new / baseline.

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
import os
import statistics
import subprocess
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


def _percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def worker(kind: str, nodes: int, fill: float, pattern: str, units: int, seed: int) -> None:
    """One side of `--baseline`: build the world, then for each line `N` on stdin time N
    decisions (or N plans of `units` units) and answer one JSON line of wall and CPU times."""
    snapshot, views, demand, _ = build_world(nodes, fill, seed, pattern)
    if kind == "batch":
        (unit,) = demand
        demand = [dataclasses.replace(unit, group=f"bench-{i}") for i in range(units)]
    plan = place(snapshot, views, demand)  # warm-up, and the result we report
    assert verify_plan(plan, snapshot, views, demand) == []
    states = [u.state for u in plan.units]
    print(json.dumps({"ready": True, "states": {s: states.count(s) for s in sorted(set(states))}, "nodes": len(snapshot.node_names)}), flush=True)
    for line in sys.stdin:
        times, cpu = [], []
        for _ in range(int(line)):
            start, start_cpu = time.perf_counter(), time.process_time()
            place(snapshot, views, demand)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        print(json.dumps({"wall": times, "cpu": cpu}), flush=True)


def compare(kind: str, baseline_src: str, nodes: int, fill: float, pattern: str, units: int, seed: int, turns: int, per_turn: int) -> list[dict]:
    """The baseline's code and this code on one world, in alternating turns (see the docstring)."""
    sides = {"baseline": baseline_src, "new": str(Path(__file__).resolve().parents[1] / "src")}
    workers = {}
    for name, src in sides.items():
        env = dict(os.environ, PYTHONPATH=src)
        command = [sys.executable, __file__, "--worker", kind, "--sizes", str(nodes), "--fills", str(fill), "--pattern", pattern, "--batch", str(units), "--seed", str(seed)]
        workers[name] = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = {name: json.loads(w.stdout.readline()) for name, w in workers.items()}  # type: ignore[union-attr]
    wall: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    loads: list[float] = []
    try:
        for turn in range(turns):
            order = list(sides) if turn % 2 == 0 else list(reversed(sides))
            for name in order:
                loads.append(os.getloadavg()[0])
                workers[name].stdin.write(f"{per_turn}\n")  # type: ignore[union-attr]
                workers[name].stdin.flush()  # type: ignore[union-attr]
                answer = json.loads(workers[name].stdout.readline())  # type: ignore[union-attr]
                wall[name] += answer["wall"]
                cpu[name] += answer["cpu"]
            loads.append(os.getloadavg()[0])
    finally:
        for w in workers.values():
            w.stdin.close()  # type: ignore[union-attr]
            w.wait(60)
    results = []
    for name in sides:
        times, cpus = sorted(wall[name]), sorted(cpu[name])
        row: dict = {"suite": kind, "code": name, "src": sides[name], "nodes": ready[name]["nodes"], "prefilled": fill}
        if kind == "latency":
            row |= {"pattern": pattern, "decisions": len(times),
                    "p50_ms": round(statistics.median(times) * 1e3, 3), "p99_ms": round(_percentile(times, 0.99) * 1e3, 3),
                    "max_ms": round(times[-1] * 1e3, 3), "cpu_p50_ms": round(statistics.median(cpus) * 1e3, 3),
                    "cpu_p99_ms": round(_percentile(cpus, 0.99) * 1e3, 3)}
        else:
            row |= {"units": units, "plans": len(times), "seconds": round(statistics.median(times), 3),
                    "p90_seconds": round(_percentile(times, 0.9), 3), "max_seconds": round(times[-1], 3),
                    "cpu_seconds": round(statistics.median(cpus), 3)}
        row |= {"states": ready[name]["states"], "load_1min_min": round(min(loads), 2), "load_1min_max": round(max(loads), 2),
                "load_1min_mean": round(statistics.mean(loads), 2), "turns": turns}
        results.append(row)
    key = "p99_ms" if kind == "latency" else "seconds"
    results.append({"suite": kind, "code": "new/baseline", "nodes": results[0]["nodes"], key: round(results[1][key] / results[0][key], 3),
                    "same_states": ready["baseline"]["states"] == ready["new"]["states"]})
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
    parser.add_argument("--baseline", metavar="SRC", help="also run the code under SRC, in alternating turns (latency and batch)")
    parser.add_argument("--turns", type=int, default=10, help="with --baseline: turns per side")
    parser.add_argument("--turn", type=int, default=50, help="with --baseline: decisions per latency turn (a batch turn is one plan)")
    parser.add_argument("--pattern", default="packed,scattered", help="with --baseline: prefill patterns for the latency suite")
    parser.add_argument("--worker", choices=["latency", "batch"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, int(args.sizes), float(args.fills), args.pattern, int(args.batch), args.seed)
        return
    results: list[dict] = []
    if args.baseline:
        if args.suite in ("latency", "all"):
            for nodes in [int(s) for s in args.sizes.split(",")]:
                for fill in [float(f) for f in args.fills.split(",")]:
                    for pattern in args.pattern.split(",") if fill > 0 else ["packed"]:
                        for row in compare("latency", args.baseline, nodes, fill, pattern, 1, args.seed, args.turns, args.turn):
                            print(json.dumps(row), flush=True)
        if args.suite in ("batch", "all"):
            for count in [int(c) for c in args.batch.split(",")]:
                for row in compare("batch", args.baseline, 5000, 0.5, "packed", count, args.seed, args.turns, 1):
                    print(json.dumps(row), flush=True)
        return
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
