"""Plan hashes: a fingerprint of every plan over the worlds the placement benches use.

A change meant to leave plans alone (a refactor, a speed-up) must leave every plan
byte-identical. This builds 591 worlds with the benches' own generators, places each
with `tandem.placement.place`, and hashes a canonical serialisation of the whole plan
(every unit's state, message, domain, code and every pod's node; sorted-key JSON, then
sha256):

- 410 random instances (`random_instance`, the quality bench's seeds `seed*10000 + i`):
  50 of seed 0 (the bench set), 100 of seed 1, 130 each of seeds 2 and 3;
- 150 fits-whole instances (`fits_whole_instance`): 50 of seed 0, 100 of seed 1;
- 24 contention scenarios (`contention_scenarios` of seeds 0 and 1, eight random each);
- four latency worlds (`bench/placement.py`, seed 7): 1,000 and 4,096 nodes, 90% of
  the GPUs used, packed and scattered;
- the batch (`bench/placement.py`, seed 7): 100, 400 and 1,000 units on 5,000 nodes.

    python bench/plan_hashes.py                      # one JSON object per plan on stdout
    python bench/plan_hashes.py --save bench/plan_hashes.json
    python bench/plan_hashes.py --check bench/plan_hashes.json   # exit 1 naming the plans that differ
    python bench/plan_hashes.py --only quality-0,batch --check bench/plan_hashes.json

A progress bar goes to stderr. `--only` takes set names (`quality-0` ... `quality-3`,
`fits-whole-0`, `fits-whole-1`, `contention-0`, `contention-1`, `latency`, `batch`);
`--check` then compares those cases alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

sys.path.insert(0, str(Path(__file__).resolve().parent))

import placement as placement_bench  # noqa: E402  (bench/placement.py: the latency and batch worlds)

from tandem.placement import Plan, UnitDemand, place  # noqa: E402
from tandem.reference.instances import Instance, contention_scenarios, fits_whole_instance, random_instance  # noqa: E402
from tandem.topology import ClusterSnapshot, TopologyView  # noqa: E402

World = tuple[ClusterSnapshot, dict[str, TopologyView], Sequence[UnitDemand]]


@dataclasses.dataclass(frozen=True)
class Case:
    """One world to plan: built only when its turn comes (some are large)."""

    name: str
    group: str  # the set it belongs to, for `--only`
    build: Callable[[], World]


def cases() -> list[Case]:
    """Every world, in a fixed order. Random and fits-whole cases are named by the seed
    their generator takes, contention scenarios by their position in their set."""
    out: list[Case] = []
    for seed, count in ((0, 50), (1, 100), (2, 130), (3, 130)):
        group = f"quality-{seed}"
        out += [Case(f"{group}/{s}", group, lambda s=s: _instance_world(random_instance(s))) for s in range(seed * 10000, seed * 10000 + count)]
    for seed, count in ((0, 50), (1, 100)):
        group = f"fits-whole-{seed}"
        out += [Case(f"{group}/{s}", group, lambda s=s: _instance_world(fits_whole_instance(s))) for s in range(seed * 10000, seed * 10000 + count)]
    for seed in (0, 1):
        group = f"contention-{seed}"
        scenarios = _Scenarios(seed)
        out += [Case(f"{group}/{k}", group, lambda k=k, scenarios=scenarios: _instance_world(scenarios.get(k))) for k in range(CONTENTION_PER_SEED)]
    for nodes in (1000, 4096):
        for pattern in ("packed", "scattered"):
            out.append(Case(f"latency/{nodes}-{pattern}", "latency", lambda n=nodes, p=pattern: placement_bench.build_world(n, 0.9, 7, p)[:3]))
    for count in (100, 400, 1000):
        out.append(Case(f"batch/{count}", "batch", lambda c=count: _batch_world(c)))
    return out


# The hand-made contention scenarios and eight random ones (`contention_scenarios`' default).
CONTENTION_PER_SEED = 12


class _Scenarios:
    """The contention scenarios of one seed, made together once asked for."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._made: list[Instance] | None = None

    def get(self, k: int) -> Instance:
        if self._made is None:
            self._made = contention_scenarios(self.seed)
            assert len(self._made) == CONTENTION_PER_SEED
        return self._made[k]


def _instance_world(instance: Instance) -> World:
    return instance.snapshot, dict(instance.views), instance.units


def _batch_world(count: int) -> World:
    """The batch bench's world: `count` copies of its unit, as `bench/placement.py` makes them."""
    snapshot, views, units, _ = placement_bench.build_world(5000, 0.5, 7, "packed")
    (unit,) = units
    return snapshot, views, [dataclasses.replace(unit, group=f"bench-{i}") for i in range(count)]


def canonical(value: Any) -> Any:
    """The value as plain JSON data: dataclasses by field, pydantic models by their JSON
    dump, mappings with string keys, sequences as lists. Anything else is an error, so a
    new kind of field in a plan cannot slip out of the hash."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(key): canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"no canonical form for {type(value).__name__}")


def plan_hash(plan: Plan) -> str:
    """sha256 of the plan's canonical form as sorted-key JSON."""
    text = json.dumps(canonical(plan), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def hashes(selected: Sequence[Case], progress: bool = True) -> Iterator[dict[str, Any]]:
    """One record per case: name, sizes, states, hash."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True, disable=not progress) as bar:
        task = bar.add_task("plans", total=len(selected))
        for case in selected:
            bar.update(task, description=case.name)
            snapshot, views, units = case.build()
            plan = place(snapshot, views, units)
            states = [unit.state for unit in plan.units]
            yield {
                "name": case.name,
                "nodes": len(snapshot.node_names),
                "units": len(units),
                "placed": states.count("Placed"),
                "minimumPlaced": states.count("MinimumPlaced"),
                "unschedulable": states.count("Unschedulable"),
                "hash": plan_hash(plan),
            }
            bar.advance(task)


def differences(records: Sequence[dict[str, Any]], saved: dict[str, str]) -> list[str]:
    """Names of the cases whose hash is not the saved one (or that were never saved)."""
    return [record["name"] for record in records if saved.get(record["name"]) != record["hash"]]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", type=Path, help="write {name: hash} of every case to FILE")
    parser.add_argument("--check", type=Path, help="compare with FILE; exit 1 naming the plans that differ")
    parser.add_argument("--only", default="", help="comma-separated set names (default: every set)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    selected = cases()
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {case.group for case in selected}
        if unknown:
            parser.error(f"unknown sets: {', '.join(sorted(unknown))}")
        selected = [case for case in selected if case.group in wanted]
    if args.save and args.only:
        parser.error("--save writes every case: leave out --only")
    records = []
    for record in hashes(selected, progress=not args.no_progress):
        print(json.dumps(record), flush=True)
        records.append(record)
    if args.save:
        args.save.write_text(json.dumps({r["name"]: r["hash"] for r in records}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    if args.check:
        differ = differences(records, json.loads(args.check.read_text(encoding="utf-8")))
        if differ:
            print(f"{len(differ)} of {len(records)} plans differ from {args.check}: {', '.join(differ)}", file=sys.stderr)
            return 1
        print(f"all {len(records)} plans as in {args.check}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
