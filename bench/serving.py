"""Serving benchmarks; prints one JSON object per case on stdout.

    python bench/serving.py [--traces DIR]

- `model`: wall time of the serving model alone replaying a synthetic load of 50,000
  requests over a simulated hour on 10 prefill + 10 decode replicas (Llama 3.1 70B,
  8 H100 each), replicas changing every 60 s and signals read every 15 s.
- `azure-conv`: each run of examples/scenarios/azure-conv.yaml (the Azure conversation
  trace at 6x; the first seed of every run of its compare list: each policy, both ratio modes, under the calibrated and the 30%-slower profile): wall time and the serving figures (`tandem simulate --compare` runs all the seeds).
- `affinity`: the same for examples/scenarios/azure-conv-affinity.yaml (with and without
  the prefill->decode affinity).
The two trace cases need the Azure trace: `--traces DIR` (default ../shared/traces, else
`tandem trace fetch azure-conv-2023` and $TANDEM_TRACES); they are skipped when it is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress

ROOT = Path(__file__).resolve().parents[1]

from tandem.placement import place  # noqa: E402
from tandem.sim.runner import simulate  # noqa: E402
from tandem.sim.scenario import load_scenario, with_variant  # noqa: E402
from tandem.sim.serving import ReplicaInfo, ServingModel, gpu_profile, model_profile  # noqa: E402
from tandem.sim.summary import summarize  # noqa: E402
from tandem.sim.traces import lookup, synthetic  # noqa: E402


def model_case() -> dict:
    trace = synthetic(seed=1, duration_s=3600.0, rate=50_000 / 3600.0, arrivals="gamma", burstiness=2.0)
    serving = ServingModel(model_profile("llama-3.1-70b"), gpu_profile("h100-sxm"), lambda a, b: 400.0, ttft_slo_s=1.0, itl_slo_s=0.05)
    serving.add_requests(trace.arrival_s, trace.input_tokens, trace.output_tokens)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for minute in range(60):
        count = int(rng.integers(8, 11))
        replicas = [ReplicaInfo(f"p{i}", "prefill", 0, 8, f"n{i}") for i in range(count)]
        replicas += [ReplicaInfo(f"d{i}", "decode", 0, 8, f"n{i}") for i in range(10)]
        serving.set_replicas(minute * 60.0, replicas)
        for quarter in range(4):
            serving.advance(minute * 60.0 + quarter * 15.0)
            serving.signals(minute * 60.0 + quarter * 15.0, 60.0)
    serving.advance(3600.0 + 600.0)
    seconds = time.perf_counter() - start
    results = serving.results()
    return {
        "suite": "serving",
        "case": "model",
        "requests": len(trace),
        "replicas": 20,
        "simulated_s": 3600,
        "wall_s": round(seconds, 2),
        "requests_per_wall_s": round(len(trace) / seconds),
        "completed": int(results.completed.sum()),
    }


def scenario_cases(name: str, traces: Path) -> list[dict]:
    path = ROOT / "examples" / "scenarios" / name
    trace_file = traces / lookup("azure-conv-2023").file_name
    candidates = [trace_file] + sorted(traces.glob("*conv*.csv"))
    trace = next((c for c in candidates if c.is_file()), None)
    if trace is None:
        return [{"suite": "serving", "case": name, "skipped": f"no Azure conversation trace in {traces}"}]
    scenario = load_scenario(
        str(path), path.read_text(), lambda rel: (str(path.parent / rel), (path.parent / rel).read_text()), lambda _: (str(trace), trace.read_text())
    )
    out = []
    for variant in scenario.variants:
        run = with_variant(scenario, variant)
        start = time.perf_counter()
        result = simulate(run, placer=place)
        seconds = time.perf_counter() - start
        for group, figures in summarize(run, result, rules_from=scenario)["serving"].items():
            out.append(
                {
                    "suite": "serving",
                    "case": name.removesuffix(".yaml"),
                    "run": variant.name,
                    "group": group,
                    "requests": figures["requests"],
                    "simulated_s": run.duration_s,
                    "wall_s": round(seconds, 2),
                    "slo_attainment": figures["slo_attainment"],
                    "goodput_rps_per_gpu": figures["goodput_rps_per_gpu"],
                    "ttft_s": figures["ttft_s"],
                    "itl_s": figures["itl_s"],
                    "kv_transfer_s": figures["kv_transfer_s"],
                    "gpu_utilisation": figures["gpu_utilisation"],
                    "mean_gpus": figures["mean_gpus"],
                    "scale_events": len(figures["scale_events"]),
                }
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = ROOT.parent / "shared" / "traces"
    if not default.is_dir():
        default = Path(os.environ.get("TANDEM_TRACES", Path.home() / ".cache" / "tandem" / "traces"))
    parser.add_argument("--traces", type=Path, default=default)
    args = parser.parse_args()
    cases = ["model", "azure-conv.yaml", "azure-conv-affinity.yaml"]
    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("serving", total=len(cases))
        for case in cases:
            rows = [model_case()] if case == "model" else scenario_cases(case, args.traces)
            for row in rows:
                print(json.dumps(row))
            sys.stdout.flush()
            bar.advance(task)


if __name__ == "__main__":
    main()
