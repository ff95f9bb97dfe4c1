"""`tandem simulate`: run a scenario in the simulated cluster and write the report."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tandem.cli.files import read_sources
from tandem.placement import place
from tandem.reference.baselines import independent, sequential
from tandem.sim.report import write_report
from tandem.sim.runner import simulate
from tandem.sim.scenario import load_scenario
from tandem.sim.summary import summarize

POLICIES = {"tandem": place, "independent": independent, "sequential": sequential}


def run_simulation(path: Path, policies: list[str], out: Path, console: Console) -> dict:
    (source, text), = read_sources([path])

    def read(relative: str) -> tuple[str, str]:
        (name, body), = read_sources([path.parent / relative])
        return name, body

    scenario = load_scenario(source, text, read)
    runs = {}
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:.0f}/{task.total:.0f} s"), TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        for policy in policies:
            task = bar.add_task(f"simulating ({policy})", total=scenario.duration_s)
            result = simulate(scenario, progress=lambda now, task=task: bar.update(task, completed=now), placer=POLICIES[policy])
            runs[policy] = (result, summarize(scenario, result))
    files = write_report(out, runs, f"tandem simulate: {path.name}")
    table = Table(title=f"{path.name} ({scenario.duration_s:g} s simulated)", header_style="bold")
    for column in ("policy", "group", "first functional s", "target s", "available", "max ratio dev.", "partial GPU·s", "stalls", "affinity"):
        table.add_column(column, justify="left" if column in ("policy", "group") else "right")
    for policy, (_, figures) in runs.items():
        for group, v in figures["groups"].items():
            table.add_row(
                policy,
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
    console.print(f"report: {files[-1]}  (summary.json and plots beside it)")
    return {policy: figures for policy, (_, figures) in runs.items()}


def _fmt(value) -> str:
    return "-" if value is None else f"{value:g}"
