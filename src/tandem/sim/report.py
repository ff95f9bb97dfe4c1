"""Files a person opens after `tandem simulate`: summary.json, PNG plots and index.html."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402

from tandem.sim.runner import Result  # noqa: E402
from tandem.sim.summary import GROUP_KEYS  # noqa: E402

PLOTS = {
    "functional.png": "Functional units over time",
    "ratio.png": "Ready fraction of the desired count, per role",
    "partial.png": "GPUs held by non-functional units, and allocated",
    "topology.png": "Placement topology quality: from-replicas next to a counterpart (affinity satisfied), per group",
}


def write_report(out: Path, runs: dict[str, tuple[Result, dict[str, Any]]], title: str) -> list[Path]:
    """Write summary.json, the plots and index.html for one run per policy; returns the files."""
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "summary.json"]
    summary = {policy: figures for policy, (_, figures) in runs.items()}
    files[0].write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    files += _plots(out, runs)
    index = out / "index.html"
    index.write_text(_html(title, runs), encoding="utf-8")
    files.append(index)
    return files


def _plots(out: Path, runs: dict[str, tuple[Result, dict[str, Any]]]) -> list[Path]:
    written = []
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
                points = [
                    (s.at, s.ready[group][role] / s.desired[group][role])
                    for s in result.samples
                    if group in s.ready and s.desired[group].get(role)
                ]
                ax.step([p[0] for p in points], [p[1] for p in points], where="post", label=f"{group} {role}")
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


def _decorate(ax, title: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")


def _save(figure, path: Path, written: list[Path]) -> None:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    written.append(path)


def _html(title: str, runs: dict[str, tuple[Result, dict[str, Any]]]) -> str:
    rows = []
    keys = list(GROUP_KEYS)
    for policy, (_, figures) in runs.items():
        for group, values in figures["groups"].items():
            cells = "".join(f"<td>{html.escape(str(values.get(k)))}</td>" for k in keys)
            rows.append(f"<tr><td>{html.escape(policy)}</td><td>{html.escape(group)}</td>{cells}</tr>")
    header = "".join(f"<th>{html.escape(k)}</th>" for k in ["policy", "group", *keys])
    images = "".join(
        f'<figure><img src="{name}" alt="{html.escape(caption)}"><figcaption>{html.escape(caption)}</figcaption></figure>'
        for name, caption in PLOTS.items()
    )
    first_policy = next(iter(runs))
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
<h2>Summary</h2><table><tr>{header}</tr>{''.join(rows)}</table>
<h2>Over time</h2>{images}
<h2>Event log ({html.escape(first_policy)}, first 400 lines)</h2><pre>{log}</pre>
</body></html>
"""
