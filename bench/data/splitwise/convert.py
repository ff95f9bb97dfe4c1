"""Splitwise's profiling rows (perf_model_llama2-70b_h100.csv, verbatim) as the plain
measured-rows CSV `tandem profile fit` reads (measured.csv). Run from anywhere:

    python bench/data/splitwise/convert.py > bench/data/splitwise/measured.csv

One output row per input row, in input order: tp = tensor_parallel, prompt =
prompt_size, batch = batch_size, ttft_ms = prompt_time (the prefill of batch_size
prompts together), itl_ms = token_time (the mean decode step over the token_size - 1
steps after the first token), context = prompt_size + token_size / 2 (each request's
mean KV length over those steps).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

SOURCE = Path(__file__).with_name("perf_model_llama2-70b_h100.csv")
COLUMNS = ("model", "gpu", "tp", "prompt", "batch", "context", "ttft_ms", "itl_ms")


def converted(text: str) -> str:
    out = [",".join(COLUMNS)]
    for row in csv.DictReader(text.splitlines()):
        prompt, tokens = int(row["prompt_size"]), int(row["token_size"])
        out.append(
            ",".join(
                (
                    row["model"],
                    row["hardware"],
                    row["tensor_parallel"],
                    str(prompt),
                    row["batch_size"],
                    str(prompt + tokens // 2),
                    f"{float(row['prompt_time']):.4f}",
                    f"{float(row['token_time']):.4f}",
                )
            )
        )
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(converted(SOURCE.read_text(encoding="utf-8")))
