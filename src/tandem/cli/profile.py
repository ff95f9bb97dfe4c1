"""`tandem profile predict` and `tandem profile fit`: the serving model for one replica.

For a capacity planner and for checks against measurements: what the roofline of
`tandem.sim.serving` says one replica of a model on a GPU does (docs/serving.md has the
formulas and the fidelity table), and a GPU profile whose engine constants are fitted to
the user's own measured rows (docs/serving.md, "Fitting a profile to your measurements").
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Callable, TypeVar

import typer

from tandem.cli.guard import guard
from tandem.errors import InputError, Problem
from tandem.sim.serving import gpu_profile, model_profile
from tandem.sim.serving import fitting, roofline
from tandem.sim.serving.measured import Observation, parse_measured

profile_app = typer.Typer(help="The serving model's predictions for a model on a GPU.", no_args_is_help=True)

T = TypeVar("T")
_OPTIONS = {"tp": "--tp", "pp": "--pp", "expert_parallel": "--expert-parallel"}


@profile_app.command("predict")
def predict(
    model: Annotated[str, typer.Option("--model", help="A bundled model profile (e.g. llama-3.1-70b) or a profile file.", show_default=False)],
    gpu: Annotated[str, typer.Option("--gpu", help="A bundled GPU profile (e.g. h100-sxm) or a profile file.", show_default=False)],
    prompt: Annotated[int, typer.Option("--prompt", help="Prompt tokens of each request.", min=1, show_default=False)],
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel GPUs (within one node).", min=1)] = 1,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline stages (one per node).", min=1)] = 1,
    batch: Annotated[int, typer.Option("--batch", help="Prompts prefilled together; requests in a decode step.", min=1)] = 1,
    context: Annotated[
        int | None, typer.Option("--context", help="KV tokens per request in the decode step (default: --prompt).", min=1, show_default=False)
    ] = None,
    expert_parallel: Annotated[bool, typer.Option("--expert-parallel", help="Split a mixture of experts by expert, not by tensor.")] = False,
) -> None:
    """Print, as JSON, the time to prefill BATCH prompts together (TTFT at batch 1, before
    the KV transfer), one decode step at BATCH with CONTEXT each (ITL/TPOT), the prefill
    and decode throughput, and the replica's KV capacity in tokens."""

    def run() -> None:
        the_model = _option("--model", lambda: model_profile(model))
        the_gpu = _option("--gpu", lambda: gpu_profile(gpu))
        try:
            parallel = roofline.layout(the_model, the_gpu, roofline.Parallel(tp, pp, expert_parallel))
        except InputError as exc:
            raise InputError([Problem(_OPTIONS.get(p.path, "--tp"), p.message) for p in exc.problems]) from None
        each = prompt if context is None else context
        capacity = _option("--tp", lambda: roofline.kv_capacity_tokens(the_model, the_gpu, parallel))  # more GPUs make it fit
        prefill = roofline.prefill_seconds(the_model, the_gpu, parallel, batch * prompt, [prompt] * batch)
        step = roofline.decode_step_seconds(the_model, the_gpu, parallel, batch, batch * each)
        out = {
            "model": the_model.name,
            "gpu": the_gpu.name,
            "tp": parallel.tp,
            "pp": parallel.pp,
            "expert_parallel": parallel.expert_parallel,
            "prompt": prompt,
            "batch": batch,
            "context": each,
            "prefill_s": prefill,
            "decode_step_s": step,
            "prefill_tokens_per_s": batch * prompt / prefill,
            "decode_tokens_per_s": batch / step,
            "kv_capacity_tokens": capacity,
            "kv_fits": batch * each <= capacity,
            "params": the_model.params,
            "active_params": the_model.active_params,
        }
        sys.stdout.write(json.dumps(out, indent=2) + "\n")

    guard(run)


@profile_app.command("fit")
def fit(
    measured: Annotated[
        list[Path],
        typer.Argument(help="Measured rows: a CSV (tp,prompt,batch,context,ttft_ms,itl_ms,...), vllm bench serve --save-result JSON, or genai-perf's profile export (JSON or CSV).", show_default=False),
    ],
    model: Annotated[str, typer.Option("--model", help="The model the rows measured: a bundled model profile or a profile file.", show_default=False)],
    gpu: Annotated[str, typer.Option("--gpu", help="The base GPU profile (bundled or a file): its datasheet figures are kept, its engine constants are the fit's start.", show_default=False)],
    output: Annotated[Path, typer.Option("--output", "-o", help="The fitted GPU profile to write (.yaml).", show_default=False)],
    tp: Annotated[int | None, typer.Option("--tp", help="TP degree of benchmark files that do not record it.", min=1, show_default=False)] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", help="Concurrency of benchmark files that do not record it.", min=1, show_default=False)
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="The fitted profile's name (default: the output file's stem).", show_default=False)] = None,
) -> None:
    """Fit the GPU profile's engine constants (compute and memory efficiency, per-step and
    per-layer overheads, all-reduce latency and bandwidth) to measured prefill and decode
    times, write the profile (`--gpu PROFILE` and scenarios accept it) and print, as JSON
    lines, each configuration's measured and predicted time, then a summary."""

    def run() -> None:
        if output.suffix not in (".yaml", ".yml"):
            raise InputError(Problem("--output", f"must end in .yaml or .yml (scenarios take a profile file by that suffix), got {str(output)!r}"))
        the_model = _option("--model", lambda: model_profile(model))
        the_gpu = _option("--gpu", lambda: gpu_profile(gpu))
        observations: list[Observation] = []
        for path in measured:
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(Problem("", f"cannot read: {exc}", str(path))) from None
            observations += parse_measured(str(path), text, tp=tp, concurrency=concurrency)
        result = fitting.fit_profile(the_model, the_gpu, observations, name=name or output.stem)
        text = fitting.profile_text(result, model=the_model.name, base=the_gpu.name, sources=[p.name for p in measured])
        fitting.parse_profile_text(str(output), text)  # what is written reads back
        lines = [json.dumps({"skipped": o.where, "metric": o.metric, "tp": o.tp, "reason": why}) for o, why in result.skipped]
        lines += [json.dumps(r.as_json()) for r in result.residuals]
        stats = fitting.summary(result.residuals)
        lines.append(json.dumps({"summary": True, "profile": str(output), "rows": sum(r.rows for r in result.residuals)} | stats | {"constants": result.constants()}))
        _write(output, text)
        sys.stdout.write("\n".join(lines) + "\n")

    guard(run)


def _write(path: Path, text: str) -> None:
    """Write whole or not at all: a temporary file beside it, then a rename."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise InputError(Problem("--output", f"cannot write {str(path)!r}: {exc.strerror or exc}")) from None


def _option(name: str, load: Callable[[], T]) -> T:
    """Run `load`; an InputError it raises is reported against the option `name`."""
    try:
        return load()
    except InputError as exc:
        raise InputError([Problem(name, str(problem)) for problem in exc.problems]) from None
