"""The serving story of issue 28 as figures: sglang-router in front of tandem's pods through
scaling, a rollout and a lost decode (tests/e2e/router_story.py), repeated; one JSON object
per run on stdout, then one with the spread over the runs.

    python bench/router.py [--repeats 3]

Per run: requests sent and failed; TTFT and ITL medians through the router, one request at
a time, against `tandem profile predict`; how long the router kept sending to a pod after
its deletion began (`router_drop_ms`: the last serving request's arrival after the mark,
over every pod that went; the preStop sleep, 10 s x 0.05 = 500 ms here, must cover it);
how long a Ready pod waited for its first request (`ready_to_first_ms`); the seconds each
operation took until the router served its result. Needs kubectl and sglang-router.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from e2e import router_story  # noqa: E402


def figures(story: router_story.Story) -> dict[str, Any]:
    ttft, itl = router_story.medians(story.measured)
    drops = [max(a - p["deletingSince"] for a in router_story.arrivals(p)) for p in story.engines
             if p["deletingSince"] is not None and any(a > p["deletingSince"] for a in router_story.arrivals(p))]
    waits = [min(router_story.arrivals(p)) - max(p["readySince"], story.window[0]) for p in story.engines
             if p["readySince"] is not None and router_story.arrivals(p) and p["readySince"] > story.window[0]]
    return {
        "case": "sglang-pd-router",
        "pods": len(story.engines),
        "requests": len(story.outcomes),
        "failed": sum(1 for o in story.outcomes if not o.ok),
        "ttft_ms": round(ttft * 1e3, 2),
        "ttft_predicted_ms": round(story.predicted["prefill_s"] * 1e3, 2),
        "itl_ms": round(itl * 1e3, 3),
        "itl_predicted_ms": round(story.predicted["decode_step_s"] * 1e3, 3),
        "router_drop_ms": {"pods": len(drops), "max": round(max(drops, default=0.0) * 1e3, 1),
                           "median": round(statistics.median(drops) * 1e3, 1) if drops else 0.0},
        "ready_to_first_ms": {"pods": len(waits), "max": round(max(waits, default=0.0) * 1e3, 1),
                              "median": round(statistics.median(waits) * 1e3, 1) if waits else 0.0},
        "phases_s": {k: round(v, 2) for k, v in story.phases.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs = []
    for repeat in range(args.repeats):
        with tempfile.TemporaryDirectory() as work:
            runs.append(figures(router_story.run(Path(work))))
        print(json.dumps({**runs[-1], "repeat": repeat}), flush=True)

    def spread(key: str) -> dict[str, float]:
        values = [r[key] for r in runs]
        return {"min": min(values), "median": statistics.median(values), "max": max(values)}

    print(json.dumps({"case": "sglang-pd-router", "summary": True, "repeats": len(runs), "failed": sum(r["failed"] for r in runs),
                      "requests": sum(r["requests"] for r in runs), "ttft_ms": spread("ttft_ms"), "itl_ms": spread("itl_ms"),
                      "ttft_predicted_ms": runs[0]["ttft_predicted_ms"], "itl_predicted_ms": runs[0]["itl_predicted_ms"],
                      "router_drop_max_ms": max(r["router_drop_ms"]["max"] for r in runs),
                      "ready_to_first_max_ms": max(r["ready_to_first_ms"]["max"] for r in runs)}), flush=True)


if __name__ == "__main__":
    main()
