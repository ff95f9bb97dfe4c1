"""`tandem simulate`: run a scenario in the simulated cluster and write the report."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from tandem.cli.files import read_sources
from tandem.cli.trace import default_directory, read_trace_text
from tandem.errors import InputError, Problem
from tandem.placement import place
from tandem.reference.baselines import independent, sequential
from tandem.sim.runner import Variant, simulate
from tandem.sim.scenario import load_scenario, with_variant
from tandem.sim.summary import across_seeds, summarize
from tandem.sim.traces import CatalogEntry, lookup

POLICIES = {"tandem": place, "independent": independent, "sequential": sequential}


def run_simulation(
    path: Path,
    policy: str,
    compare: bool,
    out: Path,
    console: Console,
    traces: Path | None = None,
    seeds: int | None = None,
    only: list[str] | None = None,
) -> dict:
    """Run the scenario once with `policy`, or, with `compare`, every run its `compare:`
    list names (the three placement policies when it names none; `only` some of them);
    each `seeds` times (default: the scenario's `seeds`), seed after seed. The plots
    show the first seed; summary.json and the report add every run's mean and 95%
    interval across the seeds."""
    try:  # plotting is an extra (`tandem[plot]`): the operator's image does not carry it
        from tandem.sim.report import write_report
    except ImportError as exc:
        raise InputError(Problem("", f"tandem simulate writes plots with matplotlib, which is not installed ({exc}): pip install 'tandem[plot]'")) from None
    (source, text), = read_sources([path])

    def read(relative: str) -> tuple[str, str]:
        (name, body), = read_sources([path.parent / relative])
        return name, body

    def read_trace(name: str) -> tuple[str, str]:
        entry = lookup(name)
        folder = traces if traces is not None else default_directory()
        found = _find_trace(folder, entry)
        if found is None:
            raise InputError(Problem("", f"{entry.file_name} is not in {folder}: run 'tandem trace fetch {name}' or pass --traces DIR"))
        return str(found), read_trace_text(found)

    scenario = load_scenario(source, text, read, read_trace)
    if compare:
        variants = scenario.variants or [Variant(p, placement=p) for p in POLICIES]
    else:
        variants = [Variant(policy, placement=policy)]
    if only:
        unknown = [name for name in only if name not in {v.name for v in variants}]
        if unknown:
            raise InputError(Problem("--run", f"no run named {unknown[0]!r} (runs: {', '.join(v.name for v in variants)})"))
        variants = [v for v in variants if v.name in only]
    count = seeds if seeds is not None else scenario.seeds
    runs: dict[str, tuple] = {}
    per_seed: dict[str, list] = {v.name: [] for v in variants}
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f} {task.fields[unit]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        overall = bar.add_task(f"{len(variants)} run(s) x {count} seed(s)", total=len(variants) * count, unit="runs")
        for replicate in range(count):
            seeded = scenario if replicate == 0 else load_scenario(source, text, read, read_trace, replicate)
            for variant in variants:
                task = bar.add_task(f"  {variant.name}, seed {seeded.seed}", total=seeded.duration_s, unit="simulated s")
                run = with_variant(seeded, variant)
                result = simulate(run, progress=_advancing(bar, task), placer=POLICIES[variant.placement])
                figures = summarize(run, result, rules_from=seeded)
                if replicate == 0:
                    runs[variant.name] = (result, figures)
                per_seed[variant.name].append((seeded, figures))
                bar.remove_task(task)
                bar.advance(overall)
    for name, (_, figures) in runs.items():
        figures["across_seeds"] = across_seeds(per_seed[name])
    files = write_report(out, runs, f"tandem simulate: {path.name}", scenario)
    _print_placement(runs, path, scenario.duration_s, console)
    if any(figures.get("serving") for _, figures in runs.values()):
        _print_serving(runs, console)
        if count > 1:
            _print_across_seeds(runs, count, console)
    console.print(f"report: {files[-1]}  (summary.json and plots beside it)")
    return {name: figures for name, (_, figures) in runs.items()}


def _find_trace(folder: Path, entry: CatalogEntry) -> Path | None:
    """The catalogue's file in `folder`: by its name, or else any file with its exact
    size and digest (a copy saved under another name is still the same trace)."""
    named = folder / entry.file_name
    if named.is_file():
        return named
    if entry.sha256 is None or not folder.is_dir():
        return None
    for candidate in sorted(folder.iterdir()):
        if candidate.is_file() and candidate.stat().st_size == entry.size_bytes:
            if hashlib.sha256(candidate.read_bytes()).hexdigest() == entry.sha256:
                return candidate
    return None


def _print_placement(runs: dict, path: Path, duration_s: float, console: Console) -> None:
    table = Table(title=f"{path.name} ({duration_s:g} s simulated)", header_style="bold")
    for column in ("run", "group", "first functional s", "target s", "available", "max ratio dev.", "partial GPU·s", "stalls", "affinity"):
        table.add_column(column, justify="left" if column in ("run", "group") else "right")
    for name, (_, figures) in runs.items():
        for group, v in figures["groups"].items():
            table.add_row(
                name,
                group,
                _fmt(v["time_to_first_functional_s"]),
                _fmt(v["time_to_target_s"]),
                f"{v['available_fraction']:.2f}",
                f"{v['max_ratio_deviation']:.2f}",
                f"{v['partial_gpu_seconds']:.0f}",
                str(v["stalls"]),
                _fmt(v["affinity_satisfied_fraction"]),
            )
    console.print(table)


def _print_serving(runs: dict, console: Console) -> None:
    table = Table(title="serving (requests of the trace)", header_style="bold")
    for column in ("run", "group", "requests", "TTFT p50/p90/p99 s", "ITL p50/p90/p99 ms", "SLO met", "goodput /GPU", "GPU util.", "mean GPUs", "scale events"):
        table.add_column(column, justify="left" if column in ("run", "group") else "right")
    for name, (_, figures) in runs.items():
        for group, v in figures.get("serving", {}).items():
            ttft, itl = v["ttft_s"], v["itl_s"]
            table.add_row(
                name,
                group,
                f"{v['completed']}/{v['requests']}",
                "/".join(_fmt(ttft[k], 2) for k in ("p50", "p90", "p99")),
                "/".join(_fmt(None if itl[k] is None else itl[k] * 1000, 1) for k in ("p50", "p90", "p99")),
                f"{v['slo_attainment']:.1%}",
                _fmt(v["goodput_rps_per_gpu"], 4),
                _fmt(v["gpu_utilisation"], 2),
                _fmt(v["mean_gpus"], 1),
                str(len(v["scale_events"])),
            )
    console.print(table)


def _print_across_seeds(runs: dict, count: int, console: Console) -> None:
    table = Table(title=f"serving across {count} seeds: mean ± 95% interval (Student t)", header_style="bold")
    for column in ("run", "group", "SLO met", "goodput /GPU", "TTFT p90 s", "TTFT p99 s", "ITL p90 ms", "mean GPUs"):
        table.add_column(column, justify="left" if column in ("run", "group") else "right")
    for name, (_, figures) in runs.items():
        for group, v in figures["across_seeds"]["serving"].items():
            table.add_row(
                name,
                group,
                _mean_ci(v["slo_attainment"], 100, 1, "%"),
                _mean_ci(v["goodput_rps_per_gpu"], 1, 4),
                _mean_ci(v["ttft_s"]["p90"], 1, 2),
                _mean_ci(v["ttft_s"]["p99"], 1, 2),
                _mean_ci(v["itl_s"]["p90"], 1000, 1),
                _mean_ci(v["mean_gpus"], 1, 1),
            )
    console.print(table)


def _mean_ci(stat: dict, scale: float, digits: int, suffix: str = "") -> str:
    """`mean ± half-width` of a `mean_ci` figure, scaled (shares as percent, seconds as ms)."""
    if stat["mean"] is None:
        return "-"
    mean = stat["mean"] * scale
    if stat["ci95"] is None:
        return f"{mean:.{digits}f}{suffix}"
    half = (stat["ci95"][1] - stat["ci95"][0]) / 2 * scale
    return f"{mean:.{digits}f} ± {half:.{digits}f}{suffix}"


def _advancing(bar: Progress, task: TaskID) -> Callable[[float], None]:
    """A simulation's progress callback: `task` completed up to the simulated time."""
    return lambda now: bar.update(task, completed=now)


def _fmt(value: float | None, digits: int | None = None) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if digits is not None else f"{value:g}"

