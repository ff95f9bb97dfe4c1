"""Mutation fuzzing of every reader of user input; prints one JSON object per input kind.

    python bench/fuzz_inputs.py [--count 10000] [--seed 0] [--kinds inferencegroup,trace,...] [--failures DIR]

For each kind (InferenceGroup, ClusterTopology, node and pod dumps as kubectl prints them,
scenarios, traces, AdmissionReviews) it mutates real files (`tests/support/mutate.py`) and
reads each mutant as tandem reads that input (`tests/support/fuzz_targets.py`). A correct
answer is a result or a one-line input error (for the webhook: a verdict, or 400); a
traceback or no answer within 10 s is a failure, saved under `--failures` (default
out/fuzz) as the mutant's text, to replay with `tandem validate FILE` (or the reader of
that kind). Goal (issue 16): 10,000 inputs per kind, no failure.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.fuzz_targets import run, targets  # noqa: E402
from support.mutate import mutants  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kinds", default="")
    parser.add_argument("--failures", type=Path, default=ROOT / "out" / "fuzz")
    args = parser.parse_args(argv)
    chosen = targets()
    kinds = [k for k in args.kinds.split(",") if k] or list(chosen)
    failed_total = 0
    with Progress(console=Console(stderr=True), transient=True) as progress:
        for kind in kinds:
            target = chosen[kind]
            task = progress.add_task(kind, total=args.count)
            rng = random.Random(f"{args.seed}:{kind}")
            failures: list[str] = []
            slowest = 0.0
            start = time.perf_counter()
            for index in range(args.count):
                text = mutants(rng.choice(target.seeds), rng)
                began = time.perf_counter()
                problem = run(target, text)
                slowest = max(slowest, time.perf_counter() - began)
                if problem is not None:
                    failures.append(problem)
                    args.failures.mkdir(parents=True, exist_ok=True)
                    (args.failures / f"{kind}-{args.seed}-{index}.txt").write_text(text)
                    (args.failures / f"{kind}-{args.seed}-{index}.error").write_text(problem)
                progress.advance(task)
            progress.remove_task(task)
            failed_total += len(failures)
            print(json.dumps({"suite": "fuzz", "kind": kind, "inputs": args.count, "seed": args.seed, "failures": len(failures),
                              "wall_s": round(time.perf_counter() - start, 1), "slowest_s": round(slowest, 3),
                              "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                              "first_failure": failures[0].strip().splitlines()[-1] if failures else None}), flush=True)
    return 1 if failed_total else 0


if __name__ == "__main__":
    sys.exit(main())
