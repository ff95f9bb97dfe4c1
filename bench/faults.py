"""The fault campaign (issue 16): seeded schedules of faults against the operator, with
invariants checked after every step. Prints JSON lines on stdout, a progress bar on stderr.

    python bench/faults.py [--schedules 1000] [--http 100] [--seed 0] [--jobs 2] [--out out/faults]
    python bench/faults.py --replay out/faults/schedule-memory-123.json

Each schedule (tests/support/faults/schedule.py) is a small cluster, one to three
InferenceGroups, user changes (scaling, ratio changes, rolling updates, deletes) and a
mixture of faults: node and rack loss, NotReady flaps, pods failing at start-up, the
controller crashing between two writes, 409 storms, 429 and 5xx answers (some after the
write went through), reads that lag writes, clock skew between two operator replicas and
leader failover mid-rollout. In some in-memory schedules groups carry `spec.autoscaling`
(each policy): every operator replica then runs the operator's autoscaler loop over the
pods' `/metrics` (vLLM texts from a scripted load, through the real scrape window and
parser), with metric faults: the source down, a pod missing from the scrape, a stale
series, a counter reset (issue 29). `--schedules` run over the in-memory store; `--http` more
(fewer, slower) through the Kubernetes adapter (`tandem.kube`) over HTTP against the local
API server (`tandem.apiserver`, in-process, over the same store, with its fault hook), with
watch streams cut, 410 Gone and 5xx answers besides. The invariants are in
tests/support/faults/invariants.py and docs/reliability.md.

One JSON line per failing schedule (its violations and where it was saved), then one per
world and one for the whole campaign: schedules run, steps (simulated seconds), passes,
violations (goal 0), wall time; `happened` counts the autoscaler's decisions, those on
missing data, its scale-ups, scale-downs and panics. A failing schedule is saved as JSON (seed and events);
`--replay FILE` plays it again, exactly (the same schedule gives the same outcome).
Exit status 1 when any invariant was violated.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.faults.campaign import run  # noqa: E402
from support.faults.schedule import Schedule, generate  # noqa: E402

# The autoscaler's held decisions (metric faults) are Warning lines by the hundred; each
# world keeps them in its own log, so they stay off the progress bar (workers import this too).
logging.getLogger("tandem.operator.autoscaler").setLevel(logging.ERROR)


def _one(job: tuple[int, str, float]) -> dict[str, Any]:
    """Run one seed's schedule (in a worker process); the schedule comes back if it failed."""
    seed, world, size = job
    schedule = generate(seed, world=world, size=size)
    started = time.perf_counter()
    outcome = run(schedule)
    result = outcome.to_json() | {"wall_s": time.perf_counter() - started, "faults": schedule.kinds()}
    if not outcome.ok:
        result["schedule"] = schedule.to_json()
    return result


def _results(jobs: list[tuple[int, str, float]], workers: int) -> Iterator[dict[str, Any]]:
    if workers <= 1:
        yield from map(_one, jobs)
        return
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        yield from pool.imap_unordered(_one, jobs, chunksize=1)


def campaign(world: str, seeds: list[int], size: float, workers: int, out: Path, progress: Progress) -> tuple[dict[str, Any], list[dict]]:
    task = progress.add_task(f"{world} schedules", total=len(seeds))
    started = time.perf_counter()
    results = []
    for result in _results([(seed, world, size) for seed in seeds], workers):
        results.append(result)
        progress.advance(task)
    results.sort(key=lambda r: r["seed"])
    failing = []
    for result in results:
        if result["violations"]:
            out.mkdir(parents=True, exist_ok=True)
            path = out / f"schedule-{world}-{result['seed']}.json"
            Schedule.from_json(result["schedule"]).save(path, violations=result["violations"])
            failing.append({"seed": result["seed"], "world": world, "saved": str(path), "violations": result["violations"]})
    by_invariant = Counter(v["invariant"] for r in results for v in r["violations"])
    faults = Counter(kind for r in results for kind in r["faults"])
    counts: Counter[str] = Counter()
    for r in results:
        counts.update(r["counts"])
    summary = {
        "bench": "faults",
        "world": world,
        "schedules": len(results),
        "steps": sum(r["steps"] for r in results),
        "passes": sum(r["passes"] for r in results),
        "violations": sum(len(r["violations"]) for r in results),
        "failing_schedules": len(failing),
        "by_invariant": dict(sorted(by_invariant.items())),
        "events": dict(sorted(faults.items())),
        "happened": dict(sorted(counts.items())),
        "wall_s": round(time.perf_counter() - started, 2),
        "slowest_schedule_s": round(max((r["wall_s"] for r in results), default=0.0), 3),
    }
    return summary, failing


def replay(path: Path) -> int:
    schedule = Schedule.load(path)
    started = time.perf_counter()
    outcome = run(schedule)
    print(json.dumps({"bench": "faults", "replay": str(path), **outcome.to_json(), "wall_s": round(time.perf_counter() - started, 2)}))
    return 0 if outcome.ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schedules", type=int, default=1000, help="schedules over the in-memory store")
    parser.add_argument("--http", type=int, default=100, help="schedules over HTTP (the Kubernetes adapter against an API server that injects faults)")
    parser.add_argument("--seed", type=int, default=0, help="the first seed (schedule i uses seed + i)")
    parser.add_argument("--size", type=float, default=1.0, help="scale each schedule's fault window (smaller: faster)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "faults", help="where failing schedules are saved")
    parser.add_argument("--replay", type=Path, help="replay one saved schedule and exit")
    args = parser.parse_args()
    if args.replay is not None:
        return replay(args.replay)
    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn())
    started = time.perf_counter()
    summaries = []
    with Progress(*columns, console=console, transient=False) as progress:
        for world, count in (("memory", args.schedules), ("http", args.http)):
            if count <= 0:
                continue
            seeds = list(range(args.seed, args.seed + count))
            # HTTP worlds are threads and sockets: fewer at once, so time-outs stay rare.
            workers = args.jobs if world == "memory" else max(1, min(args.jobs, 2))
            summary, failing = campaign(world, seeds, args.size, workers, args.out, progress)
            for line in failing:
                print(json.dumps(line), flush=True)
            print(json.dumps(summary), flush=True)
            summaries.append(summary)
    total = {
        "bench": "faults-total",
        "schedules": sum(s["schedules"] for s in summaries),
        "steps": sum(s["steps"] for s in summaries),
        "violations": sum(s["violations"] for s in summaries),
        "wall_s": round(time.perf_counter() - started, 2),
        "jobs": args.jobs,
        "cpus": os.cpu_count(),
    }
    print(json.dumps(total), flush=True)
    return 1 if total["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
