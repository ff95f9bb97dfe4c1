"""Simulator benchmarks; prints one JSON object per case on stdout.

    python bench/simulate.py

- `demo`: wall time of the bundled demo scenario (examples/scenarios/demo.yaml) under
  tandem, the events handled and reconcile passes run, and events per second.
- `scale`: the same controller on larger generated clusters (one group of many units
  arriving at once), to show how a pass grows with the cluster.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

ROOT = Path(__file__).resolve().parents[1]

from tandem.sim.runner import Scenario, simulate  # noqa: E402
from tandem.sim.scenario import load_scenario  # noqa: E402
from tandem.topology.generate import generate_cluster  # noqa: E402


def demo() -> dict:
    path = ROOT / "examples" / "scenarios" / "demo.yaml"
    scenario = load_scenario(str(path), path.read_text(), lambda rel: (str(path.parent / rel), (path.parent / rel).read_text()))
    start = time.perf_counter()
    result = simulate(scenario)
    seconds = time.perf_counter() - start
    events = len(result.samples)
    return {
        "suite": "simulate",
        "case": "demo",
        "gpus": 1024,
        "simulated_s": scenario.duration_s,
        "wall_s": round(seconds, 2),
        "event_times": events,
        "reconcile_passes": result.passes,
        "event_times_per_s": round(events / seconds, 1),
        "log_lines": len(result.log),
    }


def scale(hosts_per_rack: int, units: int) -> dict:
    topology, nodes = generate_cluster([("block", 4), ("rack", 4), ("host", hosts_per_rack)], 8)
    group = {
        "apiVersion": "tandem.dev/v1alpha1",
        "kind": "InferenceGroup",
        "metadata": {"name": "bench", "namespace": "serving"},
        "spec": {
            "replicas": units,
            "topology": {"pack": {"required": "block", "preferred": "rack"}},
            "roles": [
                {"name": "prefill", "replicas": 2, "template": {"spec": {"containers": [{"name": "e", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}},
                {"name": "decode", "replicas": 1, "podsPerReplica": 2, "topology": {"pack": {"required": "rack"}}, "template": {"spec": {"containers": [{"name": "e", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}},
            ],
        },
    }
    scenario = Scenario(cluster=[topology, *nodes], arrivals=[(0.0, group)], duration_s=600.0, seed=1)
    start = time.perf_counter()
    result = simulate(scenario)
    seconds = time.perf_counter() - start
    return {
        "suite": "simulate",
        "case": "scale",
        "nodes": len(nodes),
        "units": units,
        "pods": units * 4,
        "wall_s": round(seconds, 2),
        "reconcile_passes": result.passes,
        "ms_per_pass": round(1000 * seconds / max(result.passes, 1), 2),
        "functional_units_at_end": result.samples[-1].functional.get("serving/bench", 0),
    }


def main() -> None:
    cases = [("demo", None)] + [("scale", (hosts, units)) for hosts, units in ((8, 16), (32, 64), (64, 128))]
    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("simulate", total=len(cases))
        for name, args in cases:
            print(json.dumps(demo() if name == "demo" else scale(*args)))
            sys.stdout.flush()
            bar.advance(task)


if __name__ == "__main__":
    main()
