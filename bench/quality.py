"""How good are the engine's plans? Measured against an exact optimum and two baselines.

- `run_quality(seed, count)`: seeded random small instances; for each, the engine, the
  exact MIP optimum (HiGHS; both orders, see `tandem.reference.exact`) and the two
  baselines (`tandem.reference.baselines`): functional units and affinity satisfied.
  One row per instance, then a summary row (ratios engine / exact).
  Besides, `exact-lex` (the reference that sees extras, below): the engine's share of
  its complete replicas (`replicaShare`) and units `Placed` by each policy.
- `run_contention(seed)`: scenarios with more minimum demand than capacity; per policy,
  functional units and GPUs held by units that are not functional.
- `run_fits_whole(seed, count)`: instances where every unit fits whole by construction
  (`tandem.reference.instances.fits_whole_instance`); the engine's share of `exact-lex`'s
  replicas and the share of units it leaves `Placed` (goal: 100%). The generator's own
  packing is checked too (`wholeChecked`: every unit Placed, no violation).

Every plan is checked by `tandem.reference.instances.score`, whoever made it. Instances
where the engine is below target are written to /tmp as `tandem plan` input files.

Reference-quality notes: `exact-lex` is `solve(order="strict", objective="replicas")`,
solved lexicographically by sequential solves (each tier's optimum fixed before the
next): (1) units' minimums in placement order (never an earlier unit given up for later
ones: the engine's promise), (2) complete replicas placed, every role up to its desired
count, (3) Preferred affinity satisfied. It keeps extras in the ratio of the desired
counts, as the engine promises (docs/placement.md, Phase 2: no role's extras ahead of the
slowest role's fraction, rounded up; nothing the minimum phase placed taken back): without
that rule the optimum would place, say, 8 prefill beside 2 of 4 decode where the engine
stops at 4 : 2 by design, and the share would charge the engine for a promise it keeps.
The engine's one exception is mirrored: the `to` role of a Required affinity rule is not
held to the ratio (the minimum gang may need more `to` replicas than the minimum, and a
`to` replica a `from` replica depends on is never taken back); binding it too would cut
the optimum below plans the engine really makes (random-7: 17 replicas against the
engine's 20). So every plan the engine may produce is feasible for the reference, and
when both make the same units functional the share is at most 100%; where the engine
trims a Required rule's `to` role to the ratio anyway, the bound is looser than the
engine's promise and the share charges it for that. A share above 100% means the engine
made a different set of units functional (the lexicographic order puts an earlier unit's
minimum first), or an exact solve was not proven optimal (`proven`, `unproven` and then
`tiers` in the row). The minimums' places are free in the reference while the engine
fixes them before extras, so the reference is an upper bound, not always a plan the
engine could reach.

Run on its own: `python bench/quality.py [--seed 0] [--count 50] [--fits-whole 50]`
prints one JSON object per line on stdout and a progress bar on stderr.
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
from tandem.reference.instances import Instance, contention_scenarios, fits_whole_instance, random_instance, score, whole_plan

DUMP_DIR = Path("/tmp/tandem-quality")
MEAN_TARGET = 0.98
FLOOR = 0.90
REPLICA_TARGET = 0.98  # engine / exact-lex complete replicas, mean (issue 10)
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
    rows, instances = _rows("quality", seed, count, random_instance, lambda i: _quality_row(i, time_limit, polish_time_limit), progress)
    return rows + [_quality_summary(seed, rows, instances, dump_dir)]


def _rows(
    label: str, seed: int, count: int, make: Callable[[int], Instance], row: Callable[[Instance], dict[str, Any]], progress: bool
) -> tuple[list[dict[str, Any]], dict[str, Instance]]:
    """`row` of each instance `make` gives for seeds `seed*10000 + i`, with a progress bar."""
    rows, instances = [], {}
    with _progress(progress) as bar:
        task = bar.add_task(label, total=count)
        for i in range(count):
            instance = make(seed * 10000 + i)
            instances[instance.name] = instance
            bar.update(task, description=f"{label} {instance.name}")
            rows.append(row(instance))
            bar.advance(task)
    return rows, instances


def run_fits_whole(
    seed: int = 0,
    count: int = 50,
    *,
    time_limit: float = 20.0,
    progress: bool = True,
    dump_dir: Path | None = DUMP_DIR,
) -> list[dict[str, Any]]:
    """One row per "everything fits whole" instance (seeds `seed*10000 + i`), then a summary row."""
    rows, instances = _rows("fits-whole", seed, count, fits_whole_instance, lambda i: _fits_whole_row(i, time_limit), progress)
    return rows + [_fits_whole_summary(seed, rows, instances, dump_dir)]


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


def _exact(instance: Instance, order: str, time_limit: float, polish: float | None, objective: str = "functional") -> dict[str, Any]:
    result = solve(
        instance.snapshot, instance.views, instance.units, order=order, objective=objective, time_limit=time_limit, polish_time_limit=polish
    )
    out = {
        **score(instance, result.plan).as_dict(),
        "seconds": round(result.seconds, 4),
        "proven": result.proven,
        "status": result.status,
    }
    if objective == "replicas":
        out["unproven"] = [t.name for t in result.tiers if not t.proven and t.name != "tightness"]
        if out["unproven"]:
            out["tiers"] = [t.as_dict() for t in result.tiers]
    return out


def _lex(instance: Instance, time_limit: float) -> dict[str, Any]:
    """The reference that sees extras: minimums in order, then replicas, then affinity.

    Without the cosmetic tightness solve: no figure here counts nodes."""
    return _exact(instance, "strict", time_limit, None, objective="replicas")


def _policies(instance: Instance, time_limit: float, polish: float | None, *, lex: bool = False) -> dict[str, dict[str, Any]]:
    s, v, u = instance.snapshot, instance.views, instance.units
    out = {"engine": _measure(instance, lambda: place(s, v, u))}
    for order in ("none", "strict"):
        out[f"exact-{order}"] = _exact(instance, order, time_limit, polish)
    if lex:
        out["exact-lex"] = _lex(instance, time_limit)
    for name, policy in BASELINES.items():
        out[name] = _measure(instance, lambda policy=policy: policy(s, v, u))
    return out


def _describe(instance: Instance) -> dict[str, Any]:
    return {
        "instance": instance.name,
        "shape": instance.notes.get("shape"),
        "nodes": instance.node_count,
        "units": len(instance.units),
        "freeGpus": instance.notes["free_gpus"] if "free_gpus" in instance.notes else _free_gpus(instance),
        "minimumGpus": instance.notes["minimum_gpus"] if "minimum_gpus" in instance.notes else _minimum_gpus(instance),
    }


def _quality_row(instance: Instance, time_limit: float, polish: float | None) -> dict[str, Any]:
    policies = _policies(instance, time_limit, polish, lex=True)
    engine = policies["engine"]["functional"]
    ratios = {order: _ratio(engine, policies[f"exact-{order}"]["functional"]) for order in ("none", "strict")}
    share = _ratio(policies["engine"]["replicas"], policies["exact-lex"]["replicas"])
    return {"bench": "quality", **_describe(instance), "ratio": ratios, "replicaShare": share, "policies": policies}


def _fits_whole_row(instance: Instance, time_limit: float) -> dict[str, Any]:
    s, v, u = instance.snapshot, instance.views, instance.units
    policies = {"engine": _measure(instance, lambda: place(s, v, u)), "exact-lex": _lex(instance, time_limit)}
    certificate = score(instance, whole_plan(instance))
    engine, lex = policies["engine"], policies["exact-lex"]
    return {
        "bench": "fits-whole",
        **_describe(instance),
        "wholeGpus": instance.notes.get("whole_gpus"),
        "wholeChecked": not certificate.errors and certificate.valid == certificate.placed == len(u),
        "replicaShare": _ratio(engine["replicas"], lex["replicas"]),
        "placedShare": _ratio(engine["placed"], len(u)),
        "exactAllPlaced": lex["placed"] == len(u),
        "policies": policies,
    }


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
    shares = _shares(rows)
    return {
        "bench": "quality-summary",
        "seed": seed,
        "instances": len(rows),
        "engineVsExact": versus,
        "targetMet": bool(rows) and none["mean"] >= MEAN_TARGET and none["below90"] == 0,
        "engineVsLex": shares,
        "lexTargetMet": bool(rows) and shares["mean"] >= REPLICA_TARGET,
        "units": sum(row["units"] for row in rows),
        "placed": {p: sum(row["policies"][p]["placed"] for row in rows) for p in policies},
        "replicas": {p: sum(row["policies"][p]["replicas"] for row in rows) for p in policies},
        "desiredReplicas": sum(row["policies"]["engine"]["desiredReplicas"] for row in rows),
        "engineShortOfLex": [{"instance": row["instance"], "replicaShare": row["replicaShare"]} for row in rows if row["replicaShare"] < 1.0],
        "lexReproducers": _dump([instances[row["instance"]] for row in rows if row["replicaShare"] < REPLICA_TARGET], dump_dir),
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


def _fits_whole_summary(
    seed: int, rows: list[dict[str, Any]], instances: Mapping[str, Instance], dump_dir: Path | None
) -> dict[str, Any]:
    units = sum(row["units"] for row in rows)
    placed = {p: sum(row["policies"][p]["placed"] for row in rows) for p in ("engine", "exact-lex")}
    short = [row for row in rows if row["placedShare"] < 1.0 or row["replicaShare"] < 1.0]
    shares = _shares(rows)
    return {
        "bench": "fits-whole-summary",
        "seed": seed,
        "instances": len(rows),
        "units": units,
        "engineVsLex": shares,
        "placed": placed,
        "placedPercent": {p: round(100 * n / units, 2) if units else None for p, n in placed.items()},
        "targetMet": bool(rows) and shares["mean"] >= REPLICA_TARGET and placed["engine"] == units,
        "replicas": {p: sum(row["policies"][p]["replicas"] for row in rows) for p in ("engine", "exact-lex")},
        "desiredReplicas": sum(row["policies"]["engine"]["desiredReplicas"] for row in rows),
        "wholeChecked": all(row["wholeChecked"] for row in rows),
        "exactAllPlaced": sum(row["exactAllPlaced"] for row in rows),
        "errors": {p: sum(len(row["policies"][p]["errors"]) for row in rows) for p in ("engine", "exact-lex")},
        "seconds": {p: round(sum(row["policies"][p]["seconds"] for row in rows), 3) for p in ("engine", "exact-lex")},
        "engineShort": [
            {"instance": row["instance"], "placed": row["policies"]["engine"]["placed"], "units": row["units"], "replicaShare": row["replicaShare"]}
            for row in short
        ],
        "reproducers": _dump([instances[row["instance"]] for row in short], dump_dir),
    }


def _shares(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The engine's share of exact-lex's complete replicas over instances."""
    shares = [row["replicaShare"] for row in rows]
    return {
        "mean": round(statistics.fmean(shares), 4) if shares else None,
        "min": min(shares) if shares else None,
        "below98": sum(r < REPLICA_TARGET for r in shares),
        "above100": sum(r > 1.0 for r in shares),
        "proven": sum(row["policies"]["exact-lex"]["proven"] for row in rows),
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
    parser.add_argument("--fits-whole", type=int, default=50, help="'everything fits whole' instances (0: skip)")
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per exact solve")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    progress = not args.no_progress
    for row in run_quality(args.seed, args.count, time_limit=args.time_limit, progress=progress):
        print(json.dumps(row), flush=True)
    for row in run_contention(args.seed, args.contention_random, time_limit=args.time_limit, progress=progress):
        print(json.dumps(row), flush=True)
    if args.fits_whole > 0:
        for row in run_fits_whole(args.seed, args.fits_whole, time_limit=args.time_limit, progress=progress):
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
