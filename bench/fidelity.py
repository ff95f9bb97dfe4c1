"""The serving model against NVIDIA aiconfigurator; prints one JSON object per row on stdout.

    python bench/fidelity.py                      # the grid, then a summary row
    python bench/fidelity.py --models mixtral-8x7b mixtral-8x22b --tp 2 4 8
    python bench/fidelity.py --calibrate h100-sxm # fit the GPU profile's engine constants

Each row is one replica configuration: tandem's predicted prefill time for `batch`
prompts of `prompt` tokens together (TTFT at batch 1) and decode step at `batch` with a
context of `prompt` (ITL), beside aiconfigurator's (vLLM, its measured per-operation
tables for the GPU) and the relative error. Rows whose weights or KV do not fit on the
replica are printed with the reason and not counted. The last row is the summary: the
share of rows within +-20% and the worst error of each metric. Goal: every row within.

Needs the `calibrate` extra (`pip install -e '.[calibrate]'`: aiconfigurator-core
0.12.0); without it, one line says so and nothing else runs (exit 0).
"""

from __future__ import annotations

import argparse
import json
import sys

from tandem.sim.serving import reference


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(reference.GRID_MODELS), choices=sorted(reference.MODELS))
    parser.add_argument("--gpus", nargs="+", default=list(reference.GRID_GPUS), choices=sorted(reference.SYSTEMS))
    parser.add_argument("--tp", nargs="+", type=int, default=list(reference.GRID_TP))
    parser.add_argument("--calibrate", choices=sorted(reference.SYSTEMS), help="fit this GPU's profile constants and print them")
    args = parser.parse_args(argv)
    reason = reference.unavailable()
    if reason:
        print(json.dumps({"suite": "fidelity", "unavailable": reason}))
        return 0
    if args.calibrate:
        print(json.dumps({"suite": "fidelity", "calibrated": reference.calibrate(args.calibrate, args.models)}))
        return 0
    rows = []
    for row in reference.rows(args.models, args.gpus, args.tp):
        rows.append(row)
        print(json.dumps({"suite": "fidelity"} | row.as_json()), flush=True)
    print(json.dumps({"suite": "fidelity"} | reference.summary(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
