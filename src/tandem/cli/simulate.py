"""`tandem simulate`: run a scenario in the simulated cluster and write the report."""

from __future__ import annotations

import hashlib
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tandem.cli.files import read_sources
from tandem.cli.trace import default_directory, read_trace_text
from tandem.errors import InputError, Problem
from tandem.placement import place
from tandem.reference.baselines import independent, sequential
from tandem.sim.runner import Variant, simulate
from tandem.sim.scenario import load_scenario, with_variant
from tandem.sim.summary import summarize
from tandem.sim.traces import CatalogEntry, lookup

POLICIES = {"tandem": place, "independent": independent, "sequential": sequential}


def run_simulation(path: Path, policy: str, compare: bool, out: Path, console: Console, traces: Path | None = None) -> dict:
    """Run the scenario once with `policy`, or, with `compare`, every run its `compare:`
    list names (the three placement policies when it names none)."""
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
    runs = {}
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f} s"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        for variant in variants:
            task = bar.add_task(f"simulating ({variant.name})", total=scenario.duration_s)
            run = with_variant(scenario, variant)
            result = simulate(run, progress=lambda now, task=task: bar.update(task, completed=now), placer=POLICIES[variant.placement])
            runs[variant.name] = (result, summarize(run, result, rules_from=scenario))
    files = write_report(out, runs, f"tandem simulate: {path.name}")
    _print_placement(runs, path, scenario.duration_s, console)
    if any(figures.get("serving") for _, figures in runs.values()):
        _print_serving(runs, console)
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


def _fmt(value, digits: int | None = None) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if digits is not None else f"{value:g}"

