"""Files a person opens after `tandem simulate`: summary.json, SVG plots and index.html.

summary.json is the machine-readable record (its keys: sim/summary.py); index.html is the
human view of the same figures: column names with units, latencies in milliseconds,
shares in percent, a reason wherever a figure is missing, the scenario's events on every
plot over time, and a short "how to read this". Same inputs, byte-identical files.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Sequence

from tandem.sim.report_plots import Context, Plot, group_colours, write_plots
from tandem.sim.report_text import (
    DEFINITIONS,
    PLACEMENT_COLUMNS,
    count,
    interval,
    latency_triple,
    milliseconds,
    missing_reason,
    percent,
    placement_cell,
    seconds,
)
from tandem.sim.runner import Result, Scenario
from tandem.sim.scenario_events import ScenarioEvent, scenario_events

Runs = dict[str, tuple[Result, dict[str, Any]]]
MANY_EVENTS = 12  # more than this: captions point to the list instead of repeating it
Cell = tuple[str, str | None]  # (text, why it is missing)

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1300px; }
h2 { margin-top: 1.6em; } .lede { color: #444; }
.table-wrap { overflow-x: auto; max-width: 100%; margin: 0.5em 0 1em; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border: 1px solid #ccc; padding: 4px 8px; text-align: right; vertical-align: top; }
td { white-space: nowrap; }
th { background: #f4f4f4; font-weight: 600; text-align: left; max-width: 11em; }
td.name { text-align: left; white-space: nowrap; }
.why { display: block; color: #666; font-size: 11px; max-width: 16em; white-space: normal; text-align: left; }
.swatch { display: inline-block; width: 0.8em; height: 0.8em; margin-right: 0.35em; border-radius: 2px; vertical-align: baseline; }
.how { background: #f7f9fc; border: 1px solid #dde3ee; padding: 0.6em 1.2em; }
.how h2 { margin-top: 0.4em; }
.how dl { display: grid; grid-template-columns: minmax(12em, max-content) 1fr; gap: 0.25em 1em; }
.how dt { font-weight: 600; } .how dd { margin: 0; }
.headline { font-size: 17px; } ol.events li { margin: 0.15em 0; } ol.events.many { columns: 22em auto; column-gap: 3.5em; }
ol.events.many li { break-inside: avoid; }
figure { margin: 1.5em 0; } img { max-width: 100%; height: auto; } figcaption { color: #333; }
figcaption .marked { display: block; color: #666; font-size: 12px; }
pre { background: #f6f6f6; padding: 1em; max-height: 30em; overflow: auto; font-size: 12px; }
"""


def write_report(out: Path, runs: Runs, title: str, scenario: Scenario) -> list[Path]:
    """Write summary.json, the plots and index.html for one run per policy; `scenario` is
    the one run (its first seed): its events are marked on the plots. Returns the files."""
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "summary.json"]
    summary = {policy: figures for policy, (_, figures) in runs.items()}
    _write_text(files[0], json.dumps(summary, indent=2, sort_keys=True) + "\n")
    groups = sorted({g for _, figures in runs.values() for g in figures["groups"]} | {g for _, figures in runs.values() for g in figures.get("serving", {})})
    events = scenario_events(scenario)
    context = Context(events, scenario.duration_s, group_colours(groups), _cluster_gpus(scenario))
    totals = {name: sum(v["partial_gpu_seconds"] for v in figures["groups"].values()) for name, (_, figures) in runs.items()}
    show_partial = any(total > 0 for total in totals.values())
    plots = write_plots(out, runs, context, show_partial)
    files += [path for path, _ in plots]
    index = out / "index.html"
    _write_text(index, _html(title, runs, scenario, context, [plot for _, plot in plots], totals))  # last: a report with an index.html is whole
    files.append(index)
    return files


def _cluster_gpus(scenario: Scenario) -> int:
    return sum(int(n.get("status", {}).get("allocatable", {}).get("nvidia.com/gpu", 0)) for n in scenario.cluster if n.get("kind") == "Node")


def _partial(path: Path) -> Path:
    return path.with_name(f".{path.name}.partial")


def _write_text(path: Path, text: str) -> None:
    """Write beside, then rename: an interrupted run (Ctrl-C) never leaves half a file."""
    partial = _partial(path)
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


# --- the page ---------------------------------------------------------------------------


def _html(title: str, runs: Runs, scenario: Scenario, context: Context, plots: list[Plot], totals: dict[str, float]) -> str:
    seeds = max(len(figures.get("across_seeds", {}).get("seeds", [])) for _, figures in runs.values()) or 1
    first_policy = next(iter(runs))  # the first run's log
    log = "\n".join(f"{at:9.1f}  {html.escape(line)}" for at, line in runs[first_policy][0].log[:400])
    serving = any(figures.get("serving") for _, figures in runs.values())
    parts = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="lede">{html.escape(_lede(runs, scenario, seeds))}</p>',
        _headline(runs, scenario, totals, next((p for p in plots if p.name == "partial.svg"), None), context.events),
        _how_to_read(runs, context),
        _events(context.events),
    ]
    if serving:
        parts.append(_serving_tables(runs, context, seeds))
        if seeds > 1:
            parts.append(_seeds_table(runs, context, seeds))
    parts.append(_placement_table(runs, context, scenario.duration_s))
    parts.append("<h2>Plots</h2>" + "".join(_figure(plot, context.events) for plot in plots if plot.name != "partial.svg"))
    parts.append(f"<h2>Event log ({html.escape(first_policy)}, first 400 lines)</h2><pre>{log}</pre>")
    body = "\n".join(parts)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>{html.escape(title)}</title>
<style>{STYLE}</style></head><body>
{body}
</body></html>
"""


def _lede(runs: Runs, scenario: Scenario, seeds: int) -> str:
    names = ", ".join(runs)
    runs_text = f"run: {names}" if len(runs) == 1 else f"{len(runs)} runs compared: {names}"
    seed_text = (
        f"one seed ({scenario.seed}): no intervals across seeds (--seeds N adds them)"
        if seeds == 1
        else f"{seeds} seeds from {scenario.seed}: tables and plots per run show the first seed, “Across {seeds} seeds” their mean and 95% interval"
    )
    return f"{scenario.duration_s:,.0f} s simulated · {runs_text} · {seed_text}"


def _headline(runs: Runs, scenario: Scenario, totals: dict[str, float], plot: Plot | None, events: Sequence[ScenarioEvent]) -> str:
    """The headline figure, GPUs held by units that cannot serve: plotted against the other
    runs when there are any, said in words when there is nothing to set it against."""
    out = ["<h2>Headline: GPUs held by units that cannot serve</h2>"]
    said = "; ".join(f"<b>{html.escape(name)}</b> {count(total)} GPU·s" for name, total in totals.items())
    if len(runs) > 1:
        out.append(f'<p class="headline">GPU-seconds held by non-functional units (a role below its minimum placed) over the run: {said}.</p>')
        if plot is not None:
            out.append(_figure(plot, events))
        else:
            out.append("<p>Every run held 0: no plot, a flat line at 0 says nothing more.</p>")
    else:
        (name, total), = totals.items()
        out.append(
            f'<p class="headline">{said} held by non-functional units (a role below its minimum placed) over the {scenario.duration_s:,.0f} s'
            + (": no GPU ever waited in a half-placed unit." if total == 0 else ".")
            + "</p><p>No comparison was run, so there is nothing to set this against: "
            "<code>tandem simulate SCENARIO --compare</code> runs the same scenario with the scenario's <code>compare:</code> runs, or with "
            "the independent (each role its own gang) and sequential placement baselines, and plots them side by side here.</p>"
        )
        if plot is not None:
            out.append(_figure(plot, events))
    return "\n".join(out)


def _how_to_read(runs: Runs, context: Context) -> str:
    items = "".join(f"<dt>{html.escape(term)}</dt><dd>{html.escape(text)}</dd>" for term, text in DEFINITIONS)
    example = _availability_example(runs)
    notes = (
        "Colours are groups, the same on every plot and beside the group's name in the tables. Latencies are in milliseconds, "
        "shares in percent. Numbered dotted lines on the plots over time are the scenario's events, listed below."
    )
    return f'<section class="how"><h2>How to read this</h2><p>{html.escape(notes)}</p><dl>{items}</dl>{example}</section>'


def _availability_example(runs: Runs) -> str:
    """The page's own case of a group functional for most of the run yet 0% available."""
    name, (result, figures) = next(iter(runs.items()))
    for group, values in figures["groups"].items():
        if values["available_fraction"] == 0 and values["time_to_first_functional_s"] is not None:
            most = max((s.functional.get(group, 0) for s in result.samples), default=0)
            units = _units_wanted(result, group)
            wanted = f" of its {units}" if units else ""
            return (
                f"<p>Here ({html.escape(name)}), <b>{html.escape(group)}</b> had a functional unit {seconds(values['time_to_first_functional_s'])} after it "
                f"arrived, yet is 0% available: at most {most}{wanted} units were functional at once, never all of them.</p>"
            )
    return ""


def _units_wanted(result: Result, group: str) -> int | None:
    namespace, name = group.split("/")
    found = [g for g in result.store.snapshot().list("InferenceGroup", namespace) if g["metadata"]["name"] == name]
    return int(found[0]["spec"].get("replicas", 1)) if found else None


def _events(events: Sequence[ScenarioEvent]) -> str:
    if not events:
        return "<h2>Scenario events</h2><p>The scenario schedules no event: nothing is marked on the plots.</p>"
    items = "".join(f'<li value="{e.number}"><b>{seconds(e.at)}</b> — {html.escape(e.text)}</li>' for e in events)
    columns = ' class="events many"' if len(events) > MANY_EVENTS else ' class="events"'
    return f"<h2>Scenario events</h2><p>Marked on every plot over time as numbered dotted lines.</p><ol{columns}>{items}</ol>"


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(rows_cells) + "</tr>" for rows_cells in rows)
    return f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _name_cells(run: str, group: str, context: Context) -> list[str]:
    colour = context.colours.get(group, "#999999")
    return [f'<td class="name">{html.escape(run)}</td>', f'<td class="name"><span class="swatch" style="background:{colour}"></span>{html.escape(group)}</td>']


def _cell(cell: Cell) -> str:
    text, why = cell
    return f"<td>{html.escape(text)}" + (f'<span class="why">{html.escape(why)}</span>' if why else "") + "</td>"


def _serving_tables(runs: Runs, context: Context, seeds: int) -> str:
    first = f" (first seed, {next(iter(runs.values()))[1]['across_seeds']['seeds'][0]})" if seeds > 1 else ""
    requests, capacity = [], []
    for name, (_, figures) in runs.items():
        for group, v in figures.get("serving", {}).items():
            slo = v["slo"]
            requests.append(
                _name_cells(name, group, context)
                + [
                    _cell((f"{count(v['completed'])} / {count(v['requests'])}", None)),
                    _cell((percent(v["slo_attainment"]), None)),
                    _cell(("n/a", "the group held no GPU while requests arrived") if v["goodput_rps_per_gpu"] is None else (f"{v['goodput_rps_per_gpu']:.3g}", None)),
                    _cell(latency_triple(v["ttft_s"])),
                    _cell(latency_triple(v["itl_s"])),
                    _cell((f"{milliseconds(slo['ttft_s'])} / {milliseconds(slo['itl_s'])}", None)),
                ]
            )
            capacity.append(
                _name_cells(name, group, context)
                + [
                    _cell((f"{v['mean_gpus']:,.1f}", None)),
                    _cell(("n/a", "no serving replica was Ready") if v["gpu_utilisation"] is None else (percent(v["gpu_utilisation"]), None)),
                    _cell((count(len(v["scale_events"])), None)),
                    _cell((count(v["drained_replicas"]), None)),
                    _cell((count(v["drain_requeued"]), None)),
                    _cell((count(v["restarts"]), None)),
                    _cell((count(v["preempted"]), None)),
                    _cell(("n/a", "nothing was prefilled") if v["prefix_cache_hit_rate"] is None else (percent(v["prefix_cache_hit_rate"]), None)),
                ]
            )
    requests_header = [
        "Run", "Group", "Requests completed / arrived", "SLO met (% of all requests)", "Goodput (SLO-met requests/s per GPU)",
        "TTFT p50 / p90 / p99 (ms)", "ITL p50 / p90 / p99 (ms)", "SLO targets: TTFT / ITL (ms)",
    ]
    capacity_header = [
        "Run", "Group", "Mean GPUs held", "GPU busy (% of Ready GPU time)", "Autoscaler changes", "Replicas drained",
        "Requests sent back by a drain", "Requests restarted (lost work)", "Requests preempted (KV cache)", "Prefix-cache hits (% of prompt tokens)",
    ]
    return (
        f"<h2>Serving{html.escape(first)}</h2><h3>Requests and latency</h3>{_table(requests_header, requests)}"
        f"<h3>Capacity and disruption</h3>{_table(capacity_header, capacity)}"
    )


def _seeds_table(runs: Runs, context: Context, seeds: int) -> str:
    """Every run's serving figures across its seeds, as mean ± half the 95% interval."""
    rows = []
    for name, (_, figures) in runs.items():
        across = figures.get("across_seeds", {})
        for group, v in across.get("serving", {}).items():
            cells = [
                interval(v["slo_attainment"], 100, 2, "%"),
                interval(v["goodput_rps_per_gpu"], 1, 4),
                interval(v["mean_gpus"], 1, 1),
            ]
            cells += [interval(v[m][q], 1000, 0 if (v[m][q]["mean"] or 0) >= 0.1 else 1) for m in ("ttft_s", "itl_s") for q in ("p50", "p90", "p99")]
            rows.append(_name_cells(name, group, context) + [_cell((count(len(across["seeds"])), None))] + [_cell(c) for c in cells])
    header = ["Run", "Group", "Seeds", "SLO met (%)", "Goodput (requests/s per GPU)", "Mean GPUs held"]
    header += [f"{m} {q} (ms)" for m in ("TTFT", "ITL") for q in ("p50", "p90", "p99")]
    note = "mean ± half of the 95% interval (Student t) over the seeds; a difference between two runs holds where their intervals do not overlap"
    return f"<h2>Across {seeds} seeds</h2><p>{html.escape(note)}</p>{_table(header, rows)}"


def _placement_table(runs: Runs, context: Context, duration_s: float) -> str:
    rows = []
    for name, (result, figures) in runs.items():
        for group, values in figures["groups"].items():
            cells = []
            for key, _ in PLACEMENT_COLUMNS:
                why = missing_reason(key, group, result, duration_s) if values.get(key) is None else ""
                cells.append(_cell(placement_cell(key, values.get(key), why)))
            rows.append(_name_cells(name, group, context) + cells)
    header = ["Run", "Group", *(label for _, label in PLACEMENT_COLUMNS)]
    return f"<h2>Placement and coordination</h2>{_table(header, rows)}"


def _figure(plot: Plot, events: Sequence[ScenarioEvent]) -> str:
    marked = ""
    alt = plot.caption
    if plot.over_time and events:
        listed = "; ".join(f"{e.number}: {seconds(e.at)} {e.short}" for e in events)
        shown = listed if len(events) <= MANY_EVENTS else f"{len(events)} of them, numbered as in Scenario events above"
        marked = f'<span class="marked">Dotted lines mark the scenario\'s events — {html.escape(shown)}.</span>'
        alt += f". Events marked: {listed}"
    return (
        f'<figure><img src="{plot.name}" alt="{html.escape(alt)}">'
        f"<figcaption>{html.escape(plot.caption)}{marked}</figcaption></figure>"
    )



