"""How good are the engine's plans? Measured against an exact optimum and two baselines.

- `run_quality(seed, count)`: seeded random small instances; for each, the engine, the
  exact MIP optimum (HiGHS; both orders, see `tandem.reference.exact`) and the two
  baselines (`tandem.reference.baselines`): functional units and affinity satisfied.
  One row per instance, then a summary row (ratios engine / exact).
- `run_contention(seed)`: scenarios with more minimum demand than capacity; per policy,
  functional units and GPUs held by units that are not functional.

Every plan is checked by `tandem.reference.instances.score`, whoever made it. Instances
where the engine is below target are written to /tmp as `tandem plan` input files.

Run on its own: `python bench/quality.py [--seed 0] [--count 50]` prints one JSON object
per line on stdout and a progress bar on stderr.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tandem.placement import Plan, place
from tandem.reference.baselines import independent, sequential
from tandem.reference.exact import solve
from tandem.reference.instances import Instance, contention_scenarios, random_instance, score

DUMP_DIR = Path("/tmp/tandem-quality")
MEAN_TARGET = 0.98
FLOOR = 0.90
BASELINES: dict[str, Callable[..., Plan]] = {"independent": independent, "sequential": sequential}


def run_quality(
    seed: int = 0,
    count: int = 50,
    *,
    time_limit: float = 20.0,
    polish_time_limit: float = 2.0,
    progress: bool = True,
    dump_dir: Path | None = DUMP_DIR,
) -> list[dict[str, Any]]:
    """One row per instance (seeds `seed*10000 + i`), then a summary row."""
    rows, instances = [], {}
    with _progress(progress) as bar:
        task = bar.add_task("quality", total=count)
        for i in range(count):
            instance = random_instance(seed * 10000 + i)
            instances[instance.name] = instance
            bar.update(task, description=f"quality {instance.name}")
            rows.append(_quality_row(instance, time_limit, polish_time_limit))
            bar.advance(task)
    return rows + [_quality_summary(seed, rows, instances, dump_dir)]


def run_contention(
    seed: int = 0,
    random_count: int = 8,
    *,
    time_limit: float = 20.0,
    progress: bool = True,
    dump_dir: Path | None = DUMP_DIR,
) -> list[dict[str, Any]]:
    """One row per contention scenario, then a summary row."""
    rows, instances = [], {}
    with _progress(progress) as bar:
        scenarios = contention_scenarios(seed, random_count)
        task = bar.add_task("contention", total=len(scenarios))
        for instance in scenarios:
            instances[instance.name] = instance
            bar.update(task, description=f"contention {instance.name}")
            rows.append(_contention_row(instance, time_limit))
            bar.advance(task)
    return rows + [_contention_summary(seed, rows, instances, dump_dir)]


# ----------------------------------------------------------------------------- rows


def _measure(instance: Instance, run: Callable[[], Plan]) -> dict[str, Any]:
    started = time.perf_counter()
    plan = run()
    seconds = time.perf_counter() - started
    return {**score(instance, plan).as_dict(), "seconds": round(seconds, 4)}


def _exact(instance: Instance, order: str, time_limit: float, polish: float | None) -> dict[str, Any]:
    result = solve(instance.snapshot, instance.views, instance.units, order=order, time_limit=time_limit, polish_time_limit=polish)
    return {
        **score(instance, result.plan).as_dict(),
        "seconds": round(result.seconds, 4),
        "proven": result.proven,
        "status": result.status,
    }


def _policies(instance: Instance, time_limit: float, polish: float | None) -> dict[str, dict[str, Any]]:
    s, v, u = instance.snapshot, instance.views, instance.units
    out = {"engine": _measure(instance, lambda: place(s, v, u))}
    for order in ("none", "strict"):
        out[f"exact-{order}"] = _exact(instance, order, time_limit, polish)
    for name, policy in BASELINES.items():
        out[name] = _measure(instance, lambda policy=policy: policy(s, v, u))
    return out


def _describe(instance: Instance) -> dict[str, Any]:
    return {
        "instance": instance.name,
        "shape": instance.notes.get("shape"),
        "nodes": instance.node_count,
        "units": len(instance.units),
        "freeGpus": instance.notes.get("free_gpus", _free_gpus(instance)),
        "minimumGpus": instance.notes.get("minimum_gpus", _minimum_gpus(instance)),
    }


def _quality_row(instance: Instance, time_limit: float, polish: float | None) -> dict[str, Any]:
    policies = _policies(instance, time_limit, polish)
    engine = policies["engine"]["functional"]
    ratios = {order: _ratio(engine, policies[f"exact-{order}"]["functional"]) for order in ("none", "strict")}
    return {"bench": "quality", **_describe(instance), "ratio": ratios, "policies": policies}


def _contention_row(instance: Instance, time_limit: float) -> dict[str, Any]:
    policies = _policies(instance, time_limit, None)
    engine = policies["engine"]
    checks = {
        "engineAtLeastBaselines": all(engine["functional"] >= policies[b]["functional"] for b in BASELINES),
        "engineAtLeastBaselinesValid": all(engine["valid"] >= policies[b]["valid"] for b in BASELINES),
        "engineIdleGpusZero": engine["idleGpus"] == 0,
    }
    return {"bench": "contention", **_describe(instance), **checks, "policies": policies}


def _ratio(engine: int, exact: int) -> float:
    return 1.0 if exact == 0 else round(engine / exact, 4)


# ----------------------------------------------------------------------------- summaries


def _quality_summary(seed: int, rows: list[dict[str, Any]], instances: Mapping[str, Instance], dump_dir: Path | None) -> dict[str, Any]:
    policies = list(rows[0]["policies"]) if rows else []
    versus = {}
    for order in ("none", "strict"):
        ratios = [row["ratio"][order] for row in rows]
        versus[order] = {
            "mean": round(statistics.fmean(ratios), 4) if ratios else None,
            "min": min(ratios) if ratios else None,
            "below90": sum(r < FLOOR for r in ratios),
            "proven": sum(row["policies"][f"exact-{order}"]["proven"] for row in rows),
        }
    short = [row for row in rows if min(row["ratio"].values()) < 1.0]
    worst = [row for row in short if min(row["ratio"].values()) < FLOOR] or short[:1]
    reproducers = _dump([instances[row["instance"]] for row in worst], dump_dir)
    none = versus["none"]
    return {
        "bench": "quality-summary",
        "seed": seed,
        "instances": len(rows),
        "engineVsExact": versus,
        "targetMet": bool(rows) and none["mean"] >= MEAN_TARGET and none["below90"] == 0,
        "meanAffinity": {p: _mean(row["policies"][p]["affinity"] for row in rows) for p in policies},
        "functional": {p: sum(row["policies"][p]["functional"] for row in rows) for p in policies},
        "valid": {p: sum(row["policies"][p]["valid"] for row in rows) for p in policies},
        "idleGpus": {p: sum(row["policies"][p]["idleGpus"] for row in rows) for p in policies},
        "errors": {p: sum(len(row["policies"][p]["errors"]) for row in rows) for p in policies},
        "seconds": {p: round(sum(row["policies"][p]["seconds"] for row in rows), 3) for p in policies},
        "engineShort": [{"instance": row["instance"], **row["ratio"]} for row in short],
        "reproducers": reproducers,
    }


def _contention_summary(
    seed: int, rows: list[dict[str, Any]], instances: Mapping[str, Instance], dump_dir: Path | None
) -> dict[str, Any]:
    policies = list(rows[0]["policies"]) if rows else []
    failing = [row for row in rows if not (row["engineAtLeastBaselines"] and row["engineIdleGpusZero"])]
    return {
        "bench": "contention-summary",
        "seed": seed,
        "scenarios": len(rows),
        "functional": {p: sum(row["policies"][p]["functional"] for row in rows) for p in policies},
        "valid": {p: sum(row["policies"][p]["valid"] for row in rows) for p in policies},
        "idleGpus": {p: sum(row["policies"][p]["idleGpus"] for row in rows) for p in policies},
        "engineAtLeastBaselines": all(row["engineAtLeastBaselines"] for row in rows),
        "engineAtLeastBaselinesValid": all(row["engineAtLeastBaselinesValid"] for row in rows),
        "engineIdleGpusZero": all(row["engineIdleGpusZero"] for row in rows),
        "failing": [row["instance"] for row in failing],
        "reproducers": _dump([instances[row["instance"]] for row in failing], dump_dir),
    }


def _dump(instances: Sequence[Instance], dump_dir: Path | None) -> list[str]:
    """Write instances as `tandem plan` input files; their paths."""
    if dump_dir is None:
        return []
    return [str(instance.dump(dump_dir)) for instance in instances]


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.fmean(present), 4) if present else None


def _free_gpus(instance: Instance) -> int:
    gpu = instance.snapshot.resource_index.get("nvidia.com/gpu")
    if gpu is None:
        return 0
    usable = next(iter(instance.views.values())).usable
    return int(instance.snapshot.free[usable, gpu].sum())


def _minimum_gpus(instance: Instance) -> int:
    total = 0
    for unit in instance.units:
        for role in unit.roles:
            per = int(role.leader.requests.get("nvidia.com/gpu", 0)) + (role.pods_per_replica - 1) * int(
                role.worker.requests.get("nvidia.com/gpu", 0)
            )
            total += role.minimum * per // 1000
    return total


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=not enabled,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=50, help="random instances for the quality bench")
    parser.add_argument("--contention-random", type=int, default=8, help="random contention scenarios besides the hand-made ones")
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per exact solve")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    progress = not args.no_progress
    for row in run_quality(args.seed, args.count, time_limit=args.time_limit, progress=progress):
        print(json.dumps(row), flush=True)
    for row in run_contention(args.seed, args.contention_random, time_limit=args.time_limit, progress=progress):
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
