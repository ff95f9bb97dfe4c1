"""The report's plots, as SVG files a person reads without a glossary.

The same colour means the same group on every plot (and beside its name in the tables);
a role is a line style (prefill solid, decode dashed), a run a hatch or a grey line.
Latencies are in milliseconds, shares in percent, counts start at 0. Every plot over time
spans the whole run and marks the scenario's events as numbered dotted lines: each marker
is an SVG group with the id `event-N-P` (event N, panel P), so a test can find them.
Byte-identical for the same inputs: fixed SVG ids (`svg.hashsalt`), no date.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import matplotlib
import numpy as np

matplotlib.use("Agg")  # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from tandem.sim.runner import Result  # noqa: E402
from tandem.sim.scenario_events import ScenarioEvent  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Runs = dict[str, tuple[Result, dict[str, Any]]]

# Style: matplotlib's tab10 for groups (in sorted order), line styles for roles, greys and
# dashes for runs, hatches for runs in bar charts.
GROUP_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
ROLE_STYLES = {"prefill": "-", "decode": "--", "router": ":"}
OTHER_ROLE_STYLE = "-."
RUN_STYLES: tuple[tuple[str, Any], ...] = (("#111111", "-"), ("#777777", "--"), ("#111111", ":"), ("#777777", "-."), ("#444444", (0, (5, 1, 1, 1))))
HATCHES = ("", "//", "..", "xx", "\\\\", "++", "--", "oo")
EVENT_COLOUR = "#555555"
LEGEND_GROUPS = 10  # groups named in a legend; the rest are counted


@dataclass(frozen=True)
class Plot:
    """One figure of the report: its file, caption, and whether it runs over time."""

    name: str
    caption: str
    over_time: bool


@dataclass(frozen=True)
class Context:
    """What every plot needs besides the runs."""

    events: Sequence[ScenarioEvent]
    duration_s: float
    colours: dict[str, str]  # group -> colour
    cluster_gpus: int


def group_colours(groups: Sequence[str]) -> dict[str, str]:
    """A colour per group, by sorted name: the same on every plot and in the tables."""
    return {group: GROUP_COLOURS[index % len(GROUP_COLOURS)] for index, group in enumerate(sorted(groups))}


def short_name(group: str) -> str:
    """`serving/llama-70b` -> `llama-70b`: the namespace says nothing on a plot."""
    return group.split("/", 1)[-1]


def write_plots(out: Path, runs: Runs, context: Context, show_partial: bool) -> list[tuple[Path, Plot]]:
    """Every plot of the report that has something to show, in page order."""
    drawn: list[tuple[Path, Plot]] = []
    # fixed SVG ids (the salt), text as paths (the same glyphs on every machine)
    with plt.rc_context({"svg.hashsalt": "tandem-report", "svg.fonttype": "path", "font.size": 9}):
        serving = any(result.serving for result, _ in runs.values())
        seeded = any(_seed_count(figures) > 1 for _, figures in runs.values())
        makers: list[tuple[Plot, Callable[[], Figure]]] = []
        if show_partial:
            makers.append((Plot("partial.svg", "GPUs held by units that cannot serve (a role below its minimum placed) over time, per run", True), lambda: _partial(runs, context)))
        if serving:
            makers += [
                (Plot("serving_slo.svg", "SLO attainment and goodput per GPU, per group (colour) and run (hatch)", False), lambda: _serving_slo(runs, context)),
                (Plot("serving_latency.svg", "TTFT p90 and ITL p90 (ms) of the requests arriving in each 30 s, with each group's SLO target as a dashed line of its colour", True), lambda: _serving_latency(runs, context)),
                (Plot("serving_replicas.svg", "Ready prefill (solid) and decode (dashed) replicas per group, the autoscaler's changes as dots, and the requests arriving per second", True), lambda: _serving_replicas(runs, context)),
                (Plot("serving_utilisation.svg", "GPU utilisation of the serving replicas: the share of the Ready serving GPUs computing", True), lambda: _serving_utilisation(runs, context)),
                (Plot("serving_replica_load.svg", f"Per group and role ({next(iter(runs))}): prefill queue depth and decode KV-cache use of each replica (thin) and their mean (thick)", True), lambda: _replica_load(runs, context)),
            ]
            if seeded:
                makers.append((Plot("serving_seeds.svg", "Across seeds: each run's mean (dot) with its 95% interval (bar) and every seed (grey), per group; every axis starts at zero, so a difference looks as large as it is", False), lambda: _seeds(runs, context)))
        makers += [
            (Plot("functional.svg", "Functional units per group (every role at its minimum Ready) over time", True), lambda: _functional(runs, context)),
            (Plot("ratio.svg", "Ready share of the desired count, per group (colour) and role (line style): the prefill:decode ratio as it was kept", True), lambda: _ratio(runs, context)),
            (Plot("allocated.svg", "GPUs held by each group's bound pods over time (stacked), against the cluster's GPUs", True), lambda: _allocated(runs, context)),
            (Plot("topology.svg", "Placement topology quality at the end: the share of from-replicas next to a counterpart (affinity satisfied), per group and run", False), lambda: _topology(runs, context)),
        ]
        for plot, make in makers:
            figure = make()
            path = out / plot.name
            _save(figure, path)
            drawn.append((path, plot))
    return drawn


def _seed_count(figures: dict[str, Any]) -> int:
    return len(figures.get("across_seeds", {}).get("seeds", []))


# --- plots over time -------------------------------------------------------------------


def _partial(runs: Runs, context: Context) -> Figure:
    figure, ax = plt.subplots(figsize=(12, 3.4))
    for index, (name, (result, _)) in enumerate(runs.items()):
        colour, style = RUN_STYLES[index % len(RUN_STYLES)]
        times = [s.at for s in result.samples]
        values = [sum(s.partial_gpus.values()) for s in result.samples]
        ax.step(times, values, where="post", color=colour, linestyle=style, linewidth=1.6, label=name)
    _over_time(ax, context, 0, "GPUs held by non-functional units", "GPUs")
    _count_axis(ax)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), title="run", title_fontsize=8)
    return figure


def _functional(runs: Runs, context: Context) -> Figure:
    figure, axes = _panels(len(runs), height=3.4)
    top = 0.0
    for panel, (ax, (name, (result, _))) in enumerate(zip(axes, runs.items())):
        for group in sorted({g for s in result.samples for g in s.functional}):
            points = [(s.at, s.functional[group]) for s in result.samples if group in s.functional]
            ax.step([p[0] for p in points], [p[1] for p in points], where="post", color=context.colours[group], linewidth=1.5)
            top = max([top, *(p[1] for p in points)])
        _over_time(ax, context, panel, name, "functional units")
    _count_axes(axes, top)
    _group_legend(figure, axes[-1], context, [g for g in context.colours])
    return figure


def _ratio(runs: Runs, context: Context) -> Figure:
    figure, axes = _panels(len(runs), height=3.4)
    roles: set[str] = set()
    top = 100.0
    for panel, (ax, (name, (result, _))) in enumerate(zip(axes, runs.items())):
        for group in sorted({g for s in result.samples for g in s.ready}):
            for role in sorted({r for s in result.samples for r in s.ready.get(group, {})}):
                roles.add(role)
                ratios = [
                    (s.at, 100.0 * s.ready[group][role] / s.desired[group][role])
                    for s in result.samples
                    if group in s.ready and s.desired[group].get(role)
                ]
                ax.step([p[0] for p in ratios], [p[1] for p in ratios], where="post", color=context.colours[group], linestyle=_role_style(role), linewidth=1.2)
                top = max([top, *(p[1] for p in ratios)])
        _over_time(ax, context, panel, name, "Ready / desired (%)")
    for ax in axes:
        ax.set_ylim(0, top * 1.05)
    _group_legend(figure, axes[-1], context, list(context.colours), sorted(roles))
    return figure


def _allocated(runs: Runs, context: Context) -> Figure:
    figure, axes = _panels(len(runs), height=3.4)
    top = float(context.cluster_gpus)
    for panel, (ax, (name, (result, _))) in enumerate(zip(axes, runs.items())):
        sampled = np.array([s.at for s in result.samples] + [context.duration_s])
        times = _grid(sampled, context.duration_s)
        below = np.zeros(len(times))
        for group in context.colours:
            held = np.array([s.gpus.get(group, 0) for s in result.samples] + [result.samples[-1].gpus.get(group, 0) if result.samples else 0], dtype=float)
            held = _at(sampled, held, times)
            if not held.any():
                continue
            # many groups' areas as one picture inside the SVG: vectors would weigh megabytes
            ax.fill_between(times, below, below + held, step="post", color=context.colours[group], alpha=0.75, linewidth=0, rasterized=len(context.colours) > LEGEND_GROUPS)
            below = below + held
        top = max(top, float(below.max()))
        if context.cluster_gpus:
            ax.axhline(context.cluster_gpus, color="black", linewidth=0.8)
            ax.annotate(f"cluster: {context.cluster_gpus:,} GPUs", xy=(0.005, context.cluster_gpus), xycoords=("axes fraction", "data"), xytext=(0, -10), textcoords="offset points", fontsize=7)
        _over_time(ax, context, panel, name, "GPUs held")
    _count_axes(axes, top)
    _group_legend(figure, axes[-1], context, list(context.colours))
    return figure


def _serving_latency(runs: Runs, context: Context) -> Figure:
    names = list(runs)
    figure, grid = plt.subplots(2, len(names), figsize=(max(12, 6 * len(names)), 6.4), squeeze=False)
    groups: list[str] = []
    shared = False
    for column, name in enumerate(names):
        for row, (metric, title) in enumerate((("ttft_s", "TTFT p90"), ("itl_s", "ITL p90"))):
            ax = grid[row][column]
            top = 0.0
            by_target: dict[float, list[str]] = {}  # groups sharing a target share its line
            for key, served in sorted(runs[name][0].serving.items()):
                groups.append(key)
                target = (served.ttft_slo_s if metric == "ttft_s" else served.itl_slo_s) * 1000.0
                by_target.setdefault(target, []).append(key)
                centres, p90 = _binned_p90(served.arrival_s, getattr(served, metric), 30.0)
                ax.plot(centres, [v * 1000.0 for v in p90], color=context.colours[key], linewidth=1.2)
                top = max([top, target, *(v * 1000.0 for v in p90)])
            for order, (target, keys) in enumerate(sorted(by_target.items())):
                shared = shared or len(keys) > 1
                colour = context.colours[keys[0]] if len(keys) == 1 else "#333333"
                ax.axhline(target, color=colour, linestyle="--", linewidth=1.2)
                right = order % 2 == 0  # labels of near targets alternate ends, so they do not overlap
                ax.annotate(
                    f"{', '.join(short_name(k) for k in keys)} SLO {_ms(target)}", xy=(1.0 if right else 0.0, target), xycoords=("axes fraction", "data"),
                    xytext=(-3 if right else 3, 2), textcoords="offset points", ha="right" if right else "left", va="bottom", fontsize=7, color=colour,
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1},
                )
            targets = [(s.ttft_slo_s if metric == "ttft_s" else s.itl_slo_s) * 1000.0 for s in runs[name][0].serving.values()]
            if targets and top > 20 * max(targets):  # a linear axis would flatten the targets to its floor
                _over_time(ax, context, row * len(names) + column, f"{name}: {title} (ms, log scale: up to {top:,.0f} ms)", "milliseconds")
                ax.set_yscale("log")
                ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
            else:
                _over_time(ax, context, row * len(names) + column, f"{name}: {title} (ms)", "milliseconds")
                ax.set_ylim(0, top * 1.12 if top > 0 else 1)
    handles = [Line2D([], [], color=context.colours[g], linewidth=1.2, label=f"{short_name(g)} p90") for g in sorted(set(groups))]
    handles += [Line2D([], [], color=context.colours[g], linestyle="--", linewidth=1.2, label=f"{short_name(g)} SLO target") for g in sorted(set(groups))]
    if shared:
        handles.append(Line2D([], [], color="#333333", linestyle="--", linewidth=1.2, label="SLO target shared by several groups"))
    grid[0][-1].legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return figure


def _serving_replicas(runs: Runs, context: Context) -> Figure:
    names = list(runs)
    figure, grid = plt.subplots(2, len(names), figsize=(max(12, 6 * len(names)), 5.6), squeeze=False, height_ratios=(2, 1))
    groups: set[str] = set()
    for column, name in enumerate(names):
        result = runs[name][0]
        ax, rate = grid[0][column], grid[1][column]
        for key, timeline in sorted(result.serving_timeline.items()):
            if not timeline:
                continue
            groups.add(key)
            colour = context.colours[key]
            times = [t for t, *_ in timeline] + [context.duration_s]
            for index, role in ((1, "prefill"), (2, "decode")):
                values = [row[index] for row in timeline]
                ax.step(times, values + values[-1:], where="post", color=colour, linestyle=_role_style(role), linewidth=1.3)
            for at, desired in result.scale_events.get(key, []):
                ax.scatter([at] * len(desired), list(desired.values()), s=12, color=colour, edgecolor="black", linewidth=0.4, zorder=3)
            arrivals = result.serving[key].arrival_s
            if len(arrivals):
                edges = np.arange(0.0, float(arrivals[-1]) + 30.0, 30.0)
                counts, _ = np.histogram(arrivals, edges)
                rate.plot(edges[:-1] + 15.0, counts / 30.0, color=colour, linewidth=1)
        _over_time(ax, context, 2 * column, f"{name}: Ready replicas", "Ready replicas")
        _count_axis(ax)
        _over_time(rate, context, 2 * column + 1, f"{name}: requests arriving", "requests/s")
        rate.set_ylim(bottom=0)
    handles = [Line2D([], [], color=context.colours[g], linewidth=1.3, label=short_name(g)) for g in sorted(groups)]
    handles += [Line2D([], [], color="black", linestyle=_role_style(r), linewidth=1.3, label=r) for r in ("prefill", "decode")]
    if any(result.scale_events.get(g) for result, _ in runs.values() for g in groups):
        handles += [Line2D([], [], color="grey", marker="o", linestyle="", markersize=4, label="autoscaler change")]
    grid[0][-1].legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return figure


def _serving_utilisation(runs: Runs, context: Context) -> Figure:
    figure, ax = plt.subplots(figsize=(12, 3.4))
    handles = []
    for index, (name, (_, figures)) in enumerate(runs.items()):
        style = RUN_STYLES[index % len(RUN_STYLES)][1]
        for key, values in sorted(figures.get("serving", {}).items()):
            points = values["gpu_utilisation_over_time"]
            ax.plot([t for t, _ in points], [100.0 * u for _, u in points], color=context.colours[key], linestyle=style, linewidth=1)
    for key in sorted({k for _, figures in runs.values() for k in figures.get("serving", {})}):
        handles.append(Line2D([], [], color=context.colours[key], label=short_name(key)))
    if len(runs) > 1:
        handles += [Line2D([], [], color="black", linestyle=RUN_STYLES[i % len(RUN_STYLES)][1], label=name) for i, name in enumerate(runs)]
    _over_time(ax, context, 0, "GPU utilisation of the serving replicas", "busy (% of Ready GPUs)")
    ax.set_ylim(0, 105)
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return figure


def _replica_load(runs: Runs, context: Context) -> Figure:
    first = runs[next(iter(runs))][0]
    keys = sorted(first.serving)
    figure, grid = plt.subplots(max(len(keys), 1), 2, figsize=(12, 3.0 * max(len(keys), 1)), squeeze=False)
    for row, key in enumerate(keys):
        served = first.serving[key]
        colour = context.colours[key]
        samples = served.samples
        for column, (kind, values, title, unit, scale) in enumerate(
            (
                ("prefill", samples.queue_depth, "prefill: prompts queued per replica", "queued prompts", 1.0),
                ("decode", samples.kv_utilization, "decode: KV cache in use per replica", "KV cache used (%)", 100.0),
            )
        ):
            ax = grid[row][column]
            replicas = [i for i, k in enumerate(served.replica_kinds) if k == kind]
            chosen = np.isin(samples.replica, replicas)
            for replica in replicas:
                rows = np.flatnonzero(samples.replica == replica)
                ax.step(samples.at_s[rows], samples.queue_depth[rows] * scale if kind == "prefill" else samples.kv_utilization[rows] * scale, where="post", color=colour, alpha=0.3, linewidth=0.6)
            times, index = np.unique(samples.at_s[chosen], return_inverse=True)
            if times.size:
                picked = np.nan_to_num(values[chosen].astype(float)) * scale
                mean = np.bincount(index, weights=picked, minlength=times.size) / np.bincount(index, minlength=times.size)
                ax.step(times, mean, where="post", color=colour, linewidth=1.8)
            _over_time(ax, context, 2 * row + column, f"{short_name(key)} · {title} ({len(replicas)} replica{'' if len(replicas) == 1 else 's'})", unit)
            if kind == "prefill":
                _count_axis(ax)
                if times.size and not values[chosen].any():
                    ax.text(0.5, 0.5, "no prompt ever waited in a queue", transform=ax.transAxes, ha="center", va="center", fontsize=8, color="#444444")
            else:
                ax.set_ylim(bottom=0)
    handles = [Line2D([], [], color="black", alpha=0.3, linewidth=0.6, label="each replica"), Line2D([], [], color="black", linewidth=1.8, label="mean over replicas")]
    grid[0][-1].legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return figure


# --- bar charts -------------------------------------------------------------------------


def _bars(ax: Axes, runs: Runs, groups: list[str], value: Callable[[dict[str, Any], str], float | None], label: Callable[[float], str], missing: str, context: Context) -> None:
    """Bars per group (its colour), one per run (hatched), each labelled with its value."""
    names = list(runs)
    width = 0.8 / max(len(names), 1)
    top = max([v for name in names for g in groups if (v := value(runs[name][1], g)) is not None] or [0.0])
    for offset, name in enumerate(names):
        for index, group in enumerate(groups):
            x = index + (offset - (len(names) - 1) / 2) * width
            v = value(runs[name][1], group)
            if v is None:
                ax.text(x, 0, missing, rotation=90, ha="center", va="bottom", fontsize=7, color="#444444")
                continue
            ax.bar([x], [v], width=width * 0.92, color=context.colours[group], hatch=HATCHES[offset % len(HATCHES)], edgecolor="white" if not offset else "black", linewidth=0.5)
            if len(groups) * len(names) <= 24:  # more labels than that overlap: the axis tells
                ax.text(x, v + top * 0.01, label(v), ha="center", va="bottom", fontsize=7)
    many = len(groups) > 8
    ax.set_xticks(range(len(groups)), [short_name(g) for g in groups], fontsize=7 if many else 8, rotation=90 if many else 0)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.grid(alpha=0.3, axis="y")


def _run_legend(ax: Axes, runs: Runs) -> None:
    if len(runs) > 1:
        handles = [Patch(facecolor="white", edgecolor="black", hatch=HATCHES[i % len(HATCHES)], label=name) for i, name in enumerate(runs)]
        ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), title="run (hatch)", title_fontsize=8)


def _serving_slo(runs: Runs, context: Context) -> Figure:
    groups = sorted({g for _, figures in runs.values() for g in figures.get("serving", {})})
    figure, axes = plt.subplots(1, 2, figsize=(12, 3.6), squeeze=False)
    slo, goodput = axes[0]

    def attainment(figures: dict[str, Any], group: str) -> float | None:
        v = figures.get("serving", {}).get(group, {}).get("slo_attainment")
        return None if v is None else 100.0 * v

    def per_gpu(figures: dict[str, Any], group: str) -> float | None:
        v = figures.get("serving", {}).get(group, {}).get("goodput_rps_per_gpu")
        return None if v is None else float(v)

    _bars(slo, runs, groups, attainment, percent_label, "no request", context)
    slo.set_ylim(0, 110)
    slo.set_title("SLO met (TTFT and ITL), % of all requests", fontsize=10)
    slo.set_ylabel("% of requests")
    _bars(goodput, runs, groups, per_gpu, lambda v: f"{v:.3g}", "no GPU held", context)
    goodput.set_ylim(bottom=0)
    goodput.set_title("goodput: SLO-met requests/s per GPU held", fontsize=10)
    goodput.set_ylabel("requests/s per GPU")
    _run_legend(goodput, runs)
    return figure


def _topology(runs: Runs, context: Context) -> Figure:
    groups = sorted({g for _, figures in runs.values() for g in figures["groups"]})
    figure, ax = plt.subplots(figsize=(max(12.0, 0.25 * len(groups) * len(runs)), 3.4 if len(groups) <= 8 else 4.4))

    def satisfied(figures: dict[str, Any], group: str) -> float | None:
        v = figures["groups"].get(group, {}).get("affinity_satisfied_fraction")
        return None if v is None else 100.0 * v

    _bars(ax, runs, groups, satisfied, percent_label, "no affinity rule", context)
    ax.set_ylim(0, 110)
    ax.set_title("affinity satisfied at the end (% of from-replicas next to a counterpart)", fontsize=10)
    ax.set_ylabel("% of from-replicas")
    _run_legend(ax, runs)
    return figure


# (figure key, percentile or None, title, unit, scale) of the panels of serving_seeds.svg
_SEED_PANELS = (
    ("slo_attainment", None, "SLO met", "% of requests", 100.0),
    ("goodput_rps_per_gpu", None, "goodput per GPU", "requests/s per GPU", 1.0),
    ("ttft_s", "p90", "TTFT p90", "milliseconds", 1000.0),
    ("itl_s", "p90", "ITL p90", "milliseconds", 1000.0),
)


def _seeds(runs: Runs, context: Context) -> Figure:
    """Each run's mean with its 95% interval as an error bar, and every seed as a dot: a
    difference holds across seeds where two bars do not overlap."""
    names = list(runs)
    groups = sorted({g for _, figures in runs.values() for g in figures.get("across_seeds", {}).get("serving", {})})
    figure, axes = plt.subplots(2, 2, figsize=(max(12, 1.1 * len(names) * max(len(groups), 1) + 4), 7.2), squeeze=False)
    width = 0.8 / max(len(groups), 1)
    for ax, (key, quantile, title, unit, scale) in zip(axes.flat, _SEED_PANELS):
        top = 0.0
        for offset, group in enumerate(groups):
            xs: list[float] = []
            means: list[float] = []
            errors: list[list[float]] = [[], []]  # below and above each mean
            dots_x: list[float] = []
            dots_y: list[float] = []
            for index, name in enumerate(names):
                stat = runs[name][1].get("across_seeds", {}).get("serving", {}).get(group, {}).get(key)
                stat = stat.get(quantile) if (stat is not None and quantile) else stat
                if not stat or stat["mean"] is None:
                    continue
                x = index + (offset - (len(groups) - 1) / 2) * width
                mean = stat["mean"] * scale
                low, high = stat["ci95"] or [stat["mean"], stat["mean"]]
                xs.append(x)
                means.append(mean)
                errors[0].append(mean - low * scale)
                errors[1].append(high * scale - mean)
                measured = [v * scale for v in stat["values"] if v is not None]
                dots_x += [x] * len(measured)
                dots_y += measured
                top = max([top, high * scale, *measured])
            ax.errorbar(xs, means, yerr=errors, fmt="o", capsize=4, color=context.colours[group], label=short_name(group))
            ax.scatter(dots_x, dots_y, s=8, color="grey", alpha=0.6, zorder=3)
        ax.set_xticks(range(len(names)), names, fontsize=7, rotation=30 if len(names) > 3 else 0, ha="right" if len(names) > 3 else "center")
        ax.set_xlim(-0.6, len(names) - 0.4)
        ax.set_ylim(0, 105 if key == "slo_attainment" else (top * 1.12 if top > 0 else 1))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 100 else f"{v:g}"))
        ax.set_title(f"{title} (mean, 95% interval, each seed)", fontsize=10)
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3, axis="y")
    axes[0][1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), title="group", title_fontsize=8)
    return figure


# --- shared pieces ----------------------------------------------------------------------


def _panels(count: int, height: float) -> tuple[Figure, list[Axes]]:
    """One panel per run, side by side (two per row at most, so each stays readable)."""
    columns = min(count, 2)
    rows = (count + columns - 1) // columns
    figure, grid = plt.subplots(rows, columns, figsize=(12, height * rows), squeeze=False, sharey=True)
    axes = list(grid.flat)
    for spare in axes[count:]:
        spare.set_visible(False)
    return figure, axes[:count]


def _over_time(ax: Axes, context: Context, panel: int, title: str, ylabel: str) -> None:
    """The whole run on the x axis, the scenario's events marked, title and labels."""
    ax.set_xlim(0, context.duration_s)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel(ylabel)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10, pad=16 if context.events else 6)
    _mark_events(ax, context, panel)


def _mark_events(ax: Axes, context: Context, panel: int) -> None:
    """A dotted line per scenario event (SVG id `event-N-P`) and its number above the axes;
    numbers of events closer than 2.5% of the run share one label ("1–3")."""
    span = max(context.duration_s, 1e-9)
    clusters: list[list[ScenarioEvent]] = []
    for event in context.events:
        line = ax.axvline(event.at, color=EVENT_COLOUR, linestyle=(0, (1, 2)), linewidth=0.9, zorder=1)
        line.set_gid(f"event-{event.number}-{panel}")
        if clusters and event.at - clusters[-1][-1].at < 0.025 * span:
            clusters[-1].append(event)
        else:
            clusters.append([event])
    for cluster in clusters:
        numbers = [e.number for e in cluster]
        text = str(numbers[0]) if len(numbers) == 1 else f"{numbers[0]}–{numbers[-1]}"
        at = (cluster[0].at + cluster[-1].at) / 2
        ax.annotate(text, xy=(at, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom", fontsize=7, color=EVENT_COLOUR, annotation_clip=False)


# Points of a stacked area plot at most: one a pixel or so of a 12-inch figure, so a run
# with thousands of samples and many groups stays a small file.
AREA_POINTS = 1200


def _grid(times: np.ndarray, end: float) -> np.ndarray:
    """The sample times, or an even grid over the run when there are more than AREA_POINTS."""
    return times if len(times) <= AREA_POINTS else np.linspace(0.0, end, AREA_POINTS)


def _at(times: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """A step series (each value holds from its time to the next) read at the grid's times."""
    if grid is times:
        return values
    index = np.searchsorted(times, grid, side="right") - 1
    return np.where(index >= 0, values[np.clip(index, 0, len(values) - 1)], 0.0)


def _count_axis(ax: Axes) -> None:
    """A count never goes below 0, and its ticks are whole numbers."""
    _count_axes([ax], ax.get_ylim()[1])


def _count_axes(axes: Sequence[Axes], top: float) -> None:
    """Panels sharing a count axis: 0 to a little above the largest value of any (at least
    1), whole numbers: a line at its maximum stays clear of the frame."""
    for ax in axes:
        ax.set_ylim(0, max(top * 1.08, 1.08))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))


def _role_style(role: str) -> Any:
    return ROLE_STYLES.get(role, OTHER_ROLE_STYLE)


def _group_legend(figure: Figure, ax: Axes, context: Context, groups: list[str], roles: Sequence[str] = ()) -> None:
    """Colours are groups, line styles roles: one short legend for the figure."""
    handles: list[Artist] = [Patch(color=context.colours[g], label=short_name(g)) for g in groups[:LEGEND_GROUPS]]
    if len(groups) > LEGEND_GROUPS:  # a legend a person can still read: colours repeat past ten groups anyway
        handles.append(Patch(color="white", label=f"… {len(groups) - LEGEND_GROUPS} more (colours repeat every {len(GROUP_COLOURS)})"))
    handles += [Line2D([], [], color="black", linestyle=_role_style(r), label=r) for r in roles]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))


def _binned_p90(times: np.ndarray, values: np.ndarray, width: float) -> tuple[list[float], list[float]]:
    """p90 of `values` (NaN left out) per `width`-second bin of `times`."""
    if len(times) == 0:
        return [], []
    bins = np.floor(times / width).astype(np.int64)
    centres, p90 = [], []
    for b in np.unique(bins):
        chosen = values[bins == b]
        chosen = chosen[~np.isnan(chosen)]
        if chosen.size:
            centres.append(float(b * width + width / 2))
            p90.append(float(np.percentile(chosen, 90)))
    return centres, p90


def _ms(value: float) -> str:
    return f"{value:,.0f} ms" if value >= 100 else f"{value:.3g} ms"


def percent_label(value: float) -> str:
    """A share already in percent, with the decimals that tell 99.96% from 99.97%."""
    return f"{value:.2f}%" if 99 < value < 100 else f"{value:.1f}%"


def _save(figure: Figure, path: Path) -> None:
    """Write beside, then rename: an interrupted run never leaves half a plot."""
    figure.tight_layout()
    partial = path.with_name(f".{path.name}.partial")
    try:
        figure.savefig(partial, format="svg", metadata={"Date": None}, dpi=150)  # dpi: of rasterized areas only
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
        plt.close(figure)
