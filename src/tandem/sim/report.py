"""Files a person opens after `tandem simulate`: summary.json, PNG plots and index.html."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np

matplotlib.use("Agg")  # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402

from tandem.sim.runner import Result  # noqa: E402
from tandem.sim.summary import GROUP_KEYS  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PLOTS = {
    "functional.png": "Functional units over time",
    "ratio.png": "Ready fraction of the desired count, per role",
    "partial.png": "GPUs held by non-functional units, and allocated",
    "topology.png": "Placement topology quality: from-replicas next to a counterpart (affinity satisfied), per group",
}
SERVING_PLOTS = {
    "serving_slo.png": "SLO attainment and goodput per GPU, side by side",
    "serving_latency.png": "TTFT p90 and ITL p90 of the requests arriving in each 30 s, against the SLO",
    "serving_replicas.png": "Ready prefill and decode replicas over time (the autoscaler's changes as dots), and the request rate",
    "serving_utilisation.png": "GPU utilisation of the serving replicas over time (share of Ready serving GPUs computing)",
    "serving_replica_load.png": "Per replica (first run): prefill queue depth and decode KV-cache utilisation (allocated blocks) over time",
}
SEEDS_PLOT = {
    "serving_seeds.png": "Across seeds: mean and 95% interval (bar) and each seed (dots) of SLO attainment, goodput per GPU, TTFT p90 and ITL p90",
}
# Per-group serving figures shown in the HTML table, in order.
SERVING_COLUMNS = (
    "requests", "completed", "slo_attainment", "goodput_rps_per_gpu", "gpu_utilisation", "mean_gpus", "restarts",
    "preempted", "prefix_cache_hit_rate", "drained_replicas", "drain_requeued",
)


def write_report(out: Path, runs: dict[str, tuple[Result, dict[str, Any]]], title: str) -> list[Path]:
    """Write summary.json, the plots and index.html for one run per policy; returns the files."""
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "summary.json"]
    summary = {policy: figures for policy, (_, figures) in runs.items()}
    _write_text(files[0], json.dumps(summary, indent=2, sort_keys=True) + "\n")
    files += _plots(out, runs)
    if any(result.serving for result, _ in runs.values()):
        files += _serving_plots(out, runs)
        if _seeded(runs):
            files += _seeds_plot(out, runs)
    index = out / "index.html"
    _write_text(index, _html(title, runs))  # last: a report with an index.html is whole
    files.append(index)
    return files


def _plots(out: Path, runs: dict[str, tuple[Result, dict[str, Any]]]) -> list[Path]:
    written: list[Path] = []
    policies = list(runs)
    figure, axes = plt.subplots(1, len(policies), figsize=(6 * len(policies), 3.6), squeeze=False, sharey=True)
    for ax, policy in zip(axes[0], policies):
        result = runs[policy][0]
        for group in sorted({g for s in result.samples for g in s.functional}):
            points = [(s.at, s.functional[group]) for s in result.samples if group in s.functional]
            ax.step([p[0] for p in points], [p[1] for p in points], where="post", label=group)
        _decorate(ax, f"{policy}", "functional units")
    _save(figure, out / "functional.png", written)

    figure, axes = plt.subplots(1, len(policies), figsize=(6 * len(policies), 3.6), squeeze=False, sharey=True)
    for ax, policy in zip(axes[0], policies):
        result = runs[policy][0]
        for group in sorted({g for s in result.samples for g in s.ready}):
            for role in sorted({r for s in result.samples for r in s.ready.get(group, {})}):
                ratios = [
                    (s.at, s.ready[group][role] / s.desired[group][role])
                    for s in result.samples
                    if group in s.ready and s.desired[group].get(role)
                ]
                ax.step([p[0] for p in ratios], [p[1] for p in ratios], where="post", label=f"{group} {role}")
        _decorate(ax, f"{policy}", "Ready / desired")
    _save(figure, out / "ratio.png", written)

    figure, axes = plt.subplots(1, 2, figsize=(12, 3.6), squeeze=False)
    for policy in policies:
        result = runs[policy][0]
        axes[0][0].step([s.at for s in result.samples], [sum(s.partial_gpus.values()) for s in result.samples], where="post", label=policy)
        axes[0][1].step([s.at for s in result.samples], [s.allocated_gpus for s in result.samples], where="post", label=policy)
    _decorate(axes[0][0], "GPUs held by non-functional units", "GPUs")
    _decorate(axes[0][1], "GPUs allocated", "GPUs")
    _save(figure, out / "partial.png", written)

    groups = sorted({g for _, figures in runs.values() for g in figures["groups"]})
    figure, ax = plt.subplots(figsize=(max(6, 2.2 * len(groups)), 3.4))
    width = 0.8 / max(len(policies), 1)
    for offset, policy in enumerate(policies):
        values = [runs[policy][1]["groups"].get(g, {}).get("affinity_satisfied_fraction") for g in groups]
        xs = [i + offset * width for i in range(len(groups))]
        ax.bar(xs, [v if v is not None else 0 for v in values], width=width, label=policy)
    ax.set_xticks([i + width * (len(policies) - 1) / 2 for i in range(len(groups))], groups, fontsize=8)
    ax.set_ylim(0, 1.05)
    _decorate(ax, "affinity satisfied at the end (0 also where a group has no affinity)", "fraction")
    ax.set_xlabel("group")
    _save(figure, out / "topology.png", written)
    figure.clear()
    plt.close("all")
    return written


def _serving_plots(out: Path, runs: dict[str, tuple[Result, dict[str, Any]]]) -> list[Path]:
    written: list[Path] = []
    names = list(runs)
    groups = sorted({g for _, figures in runs.values() for g in figures.get("serving", {})})
    figure, axes = plt.subplots(1, 2, figsize=(12, 3.8), squeeze=False)
    width = 0.8 / max(len(names), 1)
    for offset, name in enumerate(names):
        serving = runs[name][1].get("serving", {})
        xs = [i + offset * width for i in range(len(groups))]
        axes[0][0].bar(xs, [serving.get(g, {}).get("slo_attainment") or 0 for g in groups], width=width, label=name)
        axes[0][1].bar(xs, [serving.get(g, {}).get("goodput_rps_per_gpu") or 0 for g in groups], width=width, label=name)
    for ax, title, unit in ((axes[0][0], "SLO attainment (TTFT and ITL met)", "share of requests"), (axes[0][1], "goodput per GPU", "requests/s per GPU")):
        ax.set_xticks([i + width * (len(names) - 1) / 2 for i in range(len(groups))], groups, fontsize=8)
        _decorate(ax, title, unit)
        ax.set_xlabel("group")
    _save(figure, out / "serving_slo.png", written)

    figure, axes = plt.subplots(2, len(names), figsize=(5.5 * len(names), 6.4), squeeze=False, sharey="row")
    for column, name in enumerate(names):
        for key, served in sorted(runs[name][0].serving.items()):
            for row, (metric, target) in enumerate((("ttft_s", served.ttft_slo_s), ("itl_s", served.itl_slo_s))):
                centres, p90 = _binned_p90(served.arrival_s, getattr(served, metric), 30.0)
                ax = axes[row][column]
                ax.plot(centres, p90, label=f"{key} p90")
                ax.axhline(target, color="red", linestyle="--", linewidth=1, label=f"SLO {target:g} s")
                ax.set_yscale("log")
                _decorate(ax, f"{name}: {metric.removesuffix('_s').upper()}", "seconds")
    _save(figure, out / "serving_latency.png", written)

    figure, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 3.6), squeeze=False, sharey=True)
    for ax, name in zip(axes[0], names):
        result = runs[name][0]
        rate_axis = ax.twinx()
        for key, timeline in sorted(result.serving_timeline.items()):
            if not timeline:
                continue
            times = [t for t, *_ in timeline] + [result.samples[-1].at if result.samples else timeline[-1][0]]
            for index, role in ((1, "prefill"), (2, "decode")):
                values = [row[index] for row in timeline]
                ax.step(times, values + values[-1:], where="post", label=f"{key} {role} Ready")
            for at, desired in result.scale_events.get(key, []):
                ax.scatter([at] * len(desired), list(desired.values()), s=9, color="black", zorder=3)
            arrivals = result.serving[key].arrival_s
            if len(arrivals):
                edges = np.arange(0.0, float(arrivals[-1]) + 30.0, 30.0)
                counts, _ = np.histogram(arrivals, edges)
                rate_axis.plot(edges[:-1] + 15.0, counts / 30.0, color="grey", alpha=0.5, linewidth=1)
        rate_axis.set_ylabel("requests/s (grey)", fontsize=8)
        _decorate(ax, name, "Ready replicas")
    _save(figure, out / "serving_replicas.png", written)

    figure, ax = plt.subplots(figsize=(12, 3.4))
    for name in names:
        for key, values in sorted(runs[name][1].get("serving", {}).items()):
            points = values["gpu_utilisation_over_time"]
            ax.plot([t for t, _ in points], [u for _, u in points], linewidth=1, label=f"{name}: {key}")
    ax.set_ylim(0, 1.05)
    _decorate(ax, "GPU utilisation of the serving replicas", "busy share")
    _save(figure, out / "serving_utilisation.png", written)

    first = runs[names[0]][0]
    figure, axes = plt.subplots(1, 2, figsize=(12, 3.6), squeeze=False)
    for key, served in sorted(first.serving.items()):
        samples = served.samples
        for replica, ident in enumerate(served.replica_ids):
            rows = np.flatnonzero(samples.replica == replica)
            label = ident.split("@")[0].removeprefix(key + "/")
            if served.replica_kinds[replica] == "prefill":
                axes[0][0].step(samples.at_s[rows], samples.queue_depth[rows], where="post", linewidth=0.8, label=label)
            else:
                axes[0][1].step(samples.at_s[rows], samples.kv_utilization[rows], where="post", linewidth=0.8, label=label)
    _decorate(axes[0][0], f"{names[0]}: prefill queue depth", "queued prompts")
    _decorate(axes[0][1], f"{names[0]}: decode KV-cache utilisation", "reserved / capacity")
    _save(figure, out / "serving_replica_load.png", written)
    plt.close("all")
    return written


def _seeded(runs: dict[str, tuple[Result, dict[str, Any]]]) -> bool:
    return any(figures.get("across_seeds", {}).get("serving") for _, figures in runs.values())


# (figure, percentile or None, title, unit, scale) of the panels of serving_seeds.png
_SEED_PANELS = (
    ("slo_attainment", None, "SLO attainment", "share of requests", 1.0),
    ("goodput_rps_per_gpu", None, "goodput per GPU", "requests/s per GPU", 1.0),
    ("ttft_s", "p90", "TTFT p90", "seconds", 1.0),
    ("itl_s", "p90", "ITL p90", "milliseconds", 1000.0),
)


def _seeds_plot(out: Path, runs: dict[str, tuple[Result, dict[str, Any]]]) -> list[Path]:
    """Each run's mean with its 95% interval as an error bar, and every seed as a dot: a
    difference holds across seeds where two bars do not overlap."""
    written: list[Path] = []
    names = list(runs)
    groups = sorted({g for _, figures in runs.values() for g in figures.get("across_seeds", {}).get("serving", {})})
    figure, axes = plt.subplots(2, 2, figsize=(max(10, 1.1 * len(names) * max(len(groups), 1) + 4), 7.2), squeeze=False)
    width = 0.8 / max(len(groups), 1)
    for ax, (key, quantile, title, unit, scale) in zip(axes.flat, _SEED_PANELS):
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
                low, high = (stat["ci95"] or [stat["mean"], stat["mean"]])
                xs.append(x)
                means.append(mean)
                errors[0].append(mean - low * scale)
                errors[1].append(high * scale - mean)
                measured = [v * scale for v in stat["values"] if v is not None]
                dots_x += [x] * len(measured)
                dots_y += measured
            ax.errorbar(xs, means, yerr=errors, fmt="o", capsize=4, label=group if len(groups) > 1 else None)
            ax.scatter(dots_x, dots_y, s=8, color="grey", alpha=0.6, zorder=3)
        ax.set_xticks(range(len(names)), names, fontsize=7, rotation=30, ha="right")
        _decorate(ax, f"{title} (mean, 95% interval, seeds)", unit)
        ax.set_xlabel("")
    _save(figure, out / "serving_seeds.png", written)
    plt.close("all")
    return written


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


def _decorate(ax: Axes, title: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")


def _save(figure: Figure, path: Path, written: list[Path]) -> None:
    figure.tight_layout()
    partial = _partial(path)
    try:
        figure.savefig(partial, dpi=110, format=path.suffix.lstrip("."))
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
        plt.close(figure)
    written.append(path)


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


def _html(title: str, runs: dict[str, tuple[Result, dict[str, Any]]]) -> str:
    rows = []
    keys = list(GROUP_KEYS)
    for policy, (_, figures) in runs.items():
        for group, values in figures["groups"].items():
            cells = "".join(f"<td>{html.escape(str(values.get(k)))}</td>" for k in keys)
            rows.append(f"<tr><td>{html.escape(policy)}</td><td>{html.escape(group)}</td>{cells}</tr>")
    header = "".join(f"<th>{html.escape(k)}</th>" for k in ["policy", "group", *keys])
    serving_rows = []
    for name, (_, figures) in runs.items():
        for group, values in figures.get("serving", {}).items():
            serving_cells = [values.get(k) for k in SERVING_COLUMNS]
            serving_cells += ["/".join(_short(values[m][q]) for q in ("p50", "p90", "p99")) for m in ("ttft_s", "itl_s")]
            serving_cells.append(len(values["scale_events"]))
            serving_rows.append(
                f"<tr><td>{html.escape(name)}</td><td>{html.escape(group)}</td>"
                + "".join(f"<td>{html.escape(_short(c))}</td>" for c in serving_cells)
                + "</tr>"
            )
    serving = ""
    plots = dict(PLOTS)
    if serving_rows:
        columns = ["run", "group", *SERVING_COLUMNS, "ttft_s p50/p90/p99", "itl_s p50/p90/p99", "scale events"]
        serving_header = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        seeds = [figures.get("across_seeds", {}).get("seeds", []) for _, figures in runs.values()]
        first = f" (first seed, {seeds[0][0]})" if seeds and len(seeds[0]) > 1 else ""
        serving = f"<h2>Serving{html.escape(first)}</h2><table><tr>{serving_header}</tr>{''.join(serving_rows)}</table>"
        plots = {**SERVING_PLOTS, **PLOTS}
        if _seeded(runs):
            serving += _seeds_table(runs)
            plots = {**SEEDS_PLOT, **plots}
    images = "".join(
        f'<figure><img src="{name}" alt="{html.escape(caption)}"><figcaption>{html.escape(caption)}</figcaption></figure>'
        for name, caption in plots.items()
    )
    first_policy = next(iter(runs))  # the first run's log
    log = "\n".join(f"{at:9.1f}  {html.escape(line)}" for at, line in runs[first_policy][0].log[:400])
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; }} td, th {{ border: 1px solid #ccc; padding: 4px 8px; text-align: right; }}
td:first-child, td:nth-child(2), th {{ text-align: left; }} figure {{ margin: 1.5em 0; }} img {{ max-width: 100%; }}
pre {{ background: #f6f6f6; padding: 1em; max-height: 30em; overflow: auto; font-size: 12px; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
{serving}
<h2>Placement and coordination</h2><table><tr>{header}</tr>{''.join(rows)}</table>
<h2>Over time</h2>{images}
<h2>Event log ({html.escape(first_policy)}, first 400 lines)</h2><pre>{log}</pre>
</body></html>
"""


def _seeds_table(runs: dict[str, tuple[Result, dict[str, Any]]]) -> str:
    """Every run's serving figures across its seeds, as mean ± half the 95% interval."""
    columns = ["run", "group", "seeds", "slo_attainment", "goodput_rps_per_gpu", "mean_gpus", "ttft_s p50", "ttft_s p90", "ttft_s p99", "itl_s p50", "itl_s p90", "itl_s p99"]
    rows = []
    count = 0
    for name, (_, figures) in runs.items():
        across = figures.get("across_seeds", {})
        count = max(count, len(across.get("seeds", [])))
        for group, values in across.get("serving", {}).items():
            cells = [len(across["seeds"])] + [_interval(values[k]) for k in ("slo_attainment", "goodput_rps_per_gpu", "mean_gpus")]
            cells += [_interval(values[m][q]) for m in ("ttft_s", "itl_s") for q in ("p50", "p90", "p99")]
            rows.append(
                f"<tr><td>{html.escape(name)}</td><td>{html.escape(group)}</td>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>"
            )
    header = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    note = "mean ± half of the 95% interval (Student t) over the seeds; a difference holds where two intervals do not overlap"
    return f"<h2>Across {count} seed(s)</h2><p>{html.escape(note)}</p><table><tr>{header}</tr>{''.join(rows)}</table>"


def _interval(stat: dict[str, Any]) -> str:
    if stat["mean"] is None:
        return "-"
    if stat["ci95"] is None:
        return _short(stat["mean"])
    return f"{_short(stat['mean'])} ± {(stat['ci95'][1] - stat['ci95'][0]) / 2:.2g}"


def _short(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
