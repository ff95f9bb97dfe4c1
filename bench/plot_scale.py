"""Plot what a pass costs against the cluster's size, from the benches' JSON lines.

    python bench/controller.py > controller.jsonl
    python bench/simulate.py > simulate.jsonl
    python bench/plot_scale.py controller.jsonl simulate.jsonl --out docs/performance.png

Four panels, nodes on a log axis: the operator-side pass (`bench/controller.py`: the
steady pass, the pass placing a new group p50 and p99), the cost of one event (pod
status, node heartbeat, NotReady in a batch and alone), the simulator (`bench/simulate.py` scale rows: ms per
pass, and beyond the idle cluster), and peak memory. Dashed lines are issue 15's goals. Several rows of
the same case and size (repeated runs) are drawn as their median with a bar from the
lowest to the highest. Needs the `plot` extra (matplotlib).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable


def rows(paths: Iterable[str]) -> list[dict[str, Any]]:
    out = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            line = line.strip()
            if line.startswith("{"):
                out.append(json.loads(line))
    return out


def series(data: list[dict[str, Any]], case: str, figure: str, size: str = "nodes") -> tuple[list[int], list[float], list[float], list[float]]:
    """(sizes, medians, lows, highs) of `figure` over the rows of `case`."""
    by_size: dict[int, list[float]] = defaultdict(list)
    for row in data:
        if row.get("case") == case and row.get(figure) is not None and row.get(size) is not None:
            by_size[int(row[size])].append(float(row[figure]))
    sizes = sorted(by_size)
    return sizes, [statistics.median(by_size[n]) for n in sizes], [min(by_size[n]) for n in sizes], [max(by_size[n]) for n in sizes]


# (title, unit, log scale, issue 15's goals, [(case, figure, label)]) per panel.
PANELS = (
    ("operator pass (bench/controller.py)", "ms", True, (20, 50), [
        ("steady", "ms_p50", "steady pass, p50"),
        ("new-group", "ms_p50", "pass placing a new group, p50"),
        ("new-group", "ms_p99", "pass placing a new group, p99 (max of 20)"),
    ]),
    ("one event, observed and in the snapshot", "µs per event", True, (50,), [
        ("event", "us_per_pod_status", "pod status"),
        ("event", "us_per_node_heartbeat", "node heartbeat"),
        ("event", "us_per_node_not_ready", "node NotReady (batch of 100)"),
        ("event", "us_per_node_not_ready_alone", "node NotReady alone"),
    ]),
    ("simulator, the same events at every size", "ms per pass", False, (), [
        ("scale", "ms_per_pass_beyond_idle", "ms per pass beyond the idle cluster"),
        ("scale", "ms_per_pass", "ms per pass, idle cluster included"),
    ]),
    ("memory (store, caches, memo, snapshot)", "MB", False, (2048,), [
        ("memory", "peak_rss_mb", "bench/controller.py peak RSS"),
    ]),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", help="JSON lines from bench/controller.py and bench/simulate.py")
    parser.add_argument("--out", default="docs/performance.png")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = rows(args.files)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(19, 4.4))

    for ax, (title, unit, log, goals, lines) in zip(axes, PANELS):
        for (case, figure, label), marker in zip(lines, "os^D"):
            sizes, mid, low, high = series(data, case, figure)
            if sizes:
                error = [[m - lo for m, lo in zip(mid, low)], [hi - m for m, hi in zip(mid, high)]]
                ax.errorbar(sizes, mid, yerr=error, marker=marker, capsize=3, label=label)
        for goal in goals:
            ax.axhline(goal, color="grey", ls="--", lw=1)
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.set_xscale("log")
        ax.set_xlabel("nodes")
        ax.set_yscale("log" if log else "linear")
        if not log:
            ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(args.out)


if __name__ == "__main__":
    main()
