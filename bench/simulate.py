"""Simulator benchmarks; prints one JSON object per case on stdout.

    python bench/simulate.py [--sizes 128,512,1024,2048,8192] [--repeat 3] [--skip-large]

- `demo`: wall time of the bundled demo scenario (examples/scenarios/demo.yaml, 1,024
  GPUs, one simulated hour with serving load), `--repeat` times: each run's wall time, the
  reconcile passes and the event times.
- `scale`: the same workload on clusters of growing size (blocks of 4 racks of 8 hosts of
  8 GPUs): eight groups of two units (2 prefill + a 2-pod decode, 8 GPUs a pod) arriving
  over the first minute, one scaled to three units at 300 s, one rolled to a new image
  at 400 s, ten simulated minutes. The events are the same at every size, so a pass that
  costs what changed keeps its milliseconds as the cluster grows. The same cluster run
  with no group (`idle_*`: loading the nodes, the first pass that reads them all, the
  resyncs) is subtracted in `ms_per_pass_beyond_idle`: what the events cost.
- `large`: the bundled 16,384-GPU scenario (examples/scenarios/large.yaml: 2,048 nodes,
  64 groups, scale-ups, rolling updates, a rack failure, serving load), one simulated hour.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

ROOT = Path(__file__).resolve().parents[1]

from tandem.sim.runner import Change, Scenario, simulate  # noqa: E402
from tandem.sim.scenario import load_scenario  # noqa: E402
from tandem.topology.generate import generate_cluster  # noqa: E402


def bundled(name: str) -> Scenario:
    path = ROOT / "examples" / "scenarios" / name
    return load_scenario(str(path), path.read_text(), lambda rel: (str(path.parent / rel), (path.parent / rel).read_text()))


def timed(scenario: Scenario) -> tuple[float, Any]:
    start = time.perf_counter()
    result = simulate(scenario)
    return time.perf_counter() - start, result


def demo(repeat: int) -> dict:
    runs = [timed(bundled("demo.yaml")) for _ in range(repeat)]
    walls = [round(seconds, 2) for seconds, _ in runs]
    result = runs[-1][1]
    return {
        "suite": "simulate",
        "case": "demo",
        "nodes": 128,
        "gpus": 1024,
        "simulated_s": 3600.0,
        "runs": repeat,
        "wall_s": walls,
        "wall_s_median": round(statistics.median(walls), 2),
        "reconcile_passes": result.passes,
        "event_times": len(result.samples),
    }


def _group(name: str) -> dict[str, Any]:
    engine = {"spec": {"containers": [{"name": "e", "image": "engine:1", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}
    return {
        "apiVersion": "tandem.dev/v1alpha1",
        "kind": "InferenceGroup",
        "metadata": {"name": name, "namespace": "serving"},
        "spec": {
            "replicas": 2,
            "topology": {"pack": {"required": "block", "preferred": "rack"}},
            "roles": [
                {"name": "prefill", "replicas": 2, "minReplicas": 1, "template": engine},
                {"name": "decode", "replicas": 1, "podsPerReplica": 2, "topology": {"pack": {"required": "rack"}}, "template": engine},
            ],
        },
    }


def scale(nodes: int) -> dict:
    blocks = max(nodes // 32, 1)
    topology, node_objects = generate_cluster([("block", blocks), ("rack", 4), ("host", 8)], 8)
    groups = [_group(f"g{i}") for i in range(8)]
    rolled = copy.deepcopy(groups[1]["spec"]["roles"])
    for role in rolled:
        role["template"]["spec"]["containers"][0]["image"] = "engine:2"
    scenario = Scenario(
        cluster=[topology, *node_objects],
        arrivals=[(8.0 * i, g) for i, g in enumerate(groups)],
        changes=[Change(300.0, "serving", "g0", {"spec": {"replicas": 3}}), Change(400.0, "serving", "g1", {"spec": {"roles": rolled}})],
        duration_s=600.0,
        seed=1,
    )
    seconds, result = timed(scenario)
    idle_seconds, idle = timed(Scenario(cluster=scenario.cluster, arrivals=[], duration_s=scenario.duration_s, seed=1))
    writes = len(result.log)
    return {
        "suite": "simulate",
        "case": "scale",
        "nodes": len(node_objects),
        "gpus": 8 * len(node_objects),
        "groups": len(groups),
        "wall_s": round(seconds, 2),
        "reconcile_passes": result.passes,
        "ms_per_pass": round(1000 * seconds / max(result.passes, 1), 2),
        "log_lines": writes,
        "idle_wall_s": round(idle_seconds, 2),
        "idle_passes": idle.passes,
        "ms_per_pass_beyond_idle": round(1000 * (seconds - idle_seconds) / max(result.passes - idle.passes, 1), 2),
        "functional_units_at_end": sum(result.samples[-1].functional.values()),
    }


def large() -> dict:
    scenario = bundled("large.yaml")
    seconds, result = timed(scenario)
    return {
        "suite": "simulate",
        "case": "large",
        "nodes": 2048,
        "gpus": 16384,
        "groups": len(scenario.arrivals),
        "simulated_s": scenario.duration_s,
        "wall_s": round(seconds, 2),
        "reconcile_passes": result.passes,
        "ms_per_pass": round(1000 * seconds / max(result.passes, 1), 2),
        "functional_units_at_end": sum(result.samples[-1].functional.values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="128,512,1024,2048,8192", help="node counts for the scale case")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the demo")
    parser.add_argument("--skip-large", action="store_true", help="leave out the 16,384-GPU scenario (about two minutes)")
    args = parser.parse_args()
    cases: list[tuple[str, Any]] = [("demo", args.repeat)] + [("scale", int(n)) for n in args.sizes.split(",") if n]
    if not args.skip_large:
        cases.append(("large", None))
    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("simulate", total=len(cases))
        for name, arg in cases:
            bar.update(task, description=f"{name} {arg or ''}")
            row = demo(arg) if name == "demo" else scale(arg) if name == "scale" else large()
            print(json.dumps(row))
            sys.stdout.flush()
            bar.advance(task)


if __name__ == "__main__":
    main()
