"""The serving model against NVIDIA aiconfigurator; prints one JSON object per row on stdout.

    python bench/fidelity.py                      # the grid, then a summary row
    python bench/fidelity.py --models mixtral-8x7b mixtral-8x22b --tp 2 4 8
    python bench/fidelity.py --calibrate h100-sxm # fit the GPU profile's engine constants
    python bench/fidelity.py --fit                # held-out TP degrees of public measured rows

Each row is one replica configuration: tandem's predicted prefill time for `batch`
prompts of `prompt` tokens together (TTFT at batch 1) and decode step at `batch` with a
context of `prompt` (ITL), beside aiconfigurator's (vLLM, its measured per-operation
tables for the GPU) and the relative error. Rows whose weights or KV do not fit on the
replica are printed with the reason and not counted. The last row is the summary: the
share of rows within +-20% and the worst error of each metric. Goal: every row within.

Needs the `calibrate` extra (`pip install -e '.[calibrate]'`: aiconfigurator-core
0.12.0); without it, one line says so and nothing else runs (exit 0).

`--fit` needs nothing extra: it takes Splitwise's measured Llama-2-70B rows on DGX-H100
(bench/data/splitwise, PROVENANCE.md there), and for each TP degree they hold, fits a
profile (`tandem profile fit`'s code, from h100-sxm) to the other degrees and prints the
held-out degree's configurations, measured beside predicted, then that split's summary:
the geometric-mean error and the share of configurations within 0.5-2x. Goal: every
split within +-25% (geometric mean), every row within 0.5-2x.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tandem.sim.serving import fitting, reference
from tandem.sim.serving.measured import parse_measured
from tandem.sim.serving.profiles import gpu_profile, model_profile

FIT_DATA = Path(__file__).parent / "data" / "splitwise"
FIT_GOAL_GEOMEAN = 0.25


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(reference.GRID_MODELS), choices=sorted(reference.MODELS))
    parser.add_argument("--gpus", nargs="+", default=list(reference.GRID_GPUS), choices=sorted(reference.SYSTEMS))
    parser.add_argument("--tp", nargs="+", type=int, default=list(reference.GRID_TP))
    parser.add_argument("--calibrate", choices=sorted(reference.SYSTEMS), help="fit this GPU's profile constants and print them")
    parser.add_argument("--fit", action="store_true", help="fit profiles to public measured rows, report held-out TP degrees")
    args = parser.parse_args(argv)
    if args.fit:
        return held_out(FIT_DATA)
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


def held_out(folder: Path) -> int:
    """Each TP degree of the measured rows predicted by a profile fitted to the others."""
    model = model_profile(folder / "llama-2-70b.yaml")
    base = gpu_profile("h100-sxm")
    observations = parse_measured("measured.csv", (folder / "measured.csv").read_text(encoding="utf-8"))
    degrees = sorted({o.tp for o in observations})
    head = {"suite": "fidelity", "fit": "splitwise llama-2-70b dgx-h100", "base": base.name}
    met = True
    for degree in degrees:
        train = [o for o in observations if o.tp != degree]
        fit = fitting.fit_profile(model, base, train)
        test = [o for o in observations if o.tp == degree and not fitting.unfit_reason(model, base, o)]
        residuals = fitting.residual_table(model, fit.gpu, test)
        split = {"fitted_tp": sorted({o.tp for o in train}), "held_out_tp": degree}
        for residual in residuals:
            print(json.dumps(head | split | residual.as_json()), flush=True)
        stats = fitting.summary(residuals)
        goal = stats["all_geomean_error"] <= FIT_GOAL_GEOMEAN and stats["all_within_half_to_double"] == 1.0
        met = met and goal
        fitted = {"fitted_geomean_error": fitting.summary(fit.residuals)["all_geomean_error"], "constants": fit.constants()}
        print(json.dumps(head | split | {"summary": True} | stats | {"goal_met": goal} | fitted), flush=True)
    print(json.dumps(head | {"summary": True, "splits": len(degrees), "goal_met_by_every_split": met}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
