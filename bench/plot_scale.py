"""Plot what a pass costs against the cluster's size, from the benches' JSON lines.

    python bench/controller.py > controller.jsonl
    python bench/simulate.py > simulate.jsonl
    python bench/plot_scale.py controller.jsonl simulate.jsonl --out docs/performance.png

Four panels, nodes on a log axis: the operator-side pass (`bench/controller.py`: the
steady pass, the pass placing a new group p50 and p99), the cost of one event (pod
status, node heartbeat, NotReady), the simulator (`bench/simulate.py` scale rows: ms per
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", help="JSON lines from bench/controller.py and bench/simulate.py")
    parser.add_argument("--out", default="docs/performance.png")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = rows(args.files)
    fig, axes = plt.subplots(1, 4, figsize=(19, 4.4))

    def draw(ax, case: str, figure: str, label: str, marker: str = "o") -> None:
        sizes, mid, low, high = series(data, case, figure)
        if sizes:
            ax.errorbar(sizes, mid, yerr=[[m - lo for m, lo in zip(mid, low)], [hi - m for m, hi in zip(mid, high)]], marker=marker, capsize=3, label=label)

    ax = axes[0]
    draw(ax, "steady", "ms_p50", "steady pass, p50")
    draw(ax, "new-group", "ms_p50", "pass placing a new group, p50", "s")
    draw(ax, "new-group", "ms_p99", "pass placing a new group, p99 (max of 20)", "^")
    ax.axhline(20, color="grey", ls=":", lw=1)
    ax.axhline(50, color="grey", ls="--", lw=1)
    ax.set_title("operator pass (bench/controller.py)")
    ax.set_ylabel("ms")

    ax = axes[1]
    draw(ax, "event", "us_per_pod_status", "pod status")
    draw(ax, "event", "us_per_node_heartbeat", "node heartbeat", "s")
    draw(ax, "event", "us_per_node_not_ready", "node NotReady", "^")
    ax.axhline(50, color="grey", ls="--", lw=1)
    ax.set_title("one event, observed and in the snapshot")
    ax.set_ylabel("µs per event")

    ax = axes[2]
    draw(ax, "scale", "ms_per_pass_beyond_idle", "ms per pass beyond the idle cluster")
    draw(ax, "scale", "ms_per_pass", "ms per pass, idle cluster included", "s")
    ax.set_title("simulator, the same events at every size")
    ax.set_ylabel("ms per pass")
    ax.set_ylim(bottom=0)

    ax = axes[3]
    draw(ax, "memory", "peak_rss_mb", "bench/controller.py peak RSS", "D")
    ax.axhline(2048, color="grey", ls="--", lw=1)
    ax.set_title("memory (store, caches, memo, snapshot)")
    ax.set_ylabel("MB")

    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("nodes")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    axes[0].set_yscale("log")
    axes[1].set_yscale("log")
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(args.out)


if __name__ == "__main__":
    main()
