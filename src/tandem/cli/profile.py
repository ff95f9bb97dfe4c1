"""`tandem profile predict`: the serving model's figures for one replica, as JSON.

For a capacity planner and for checks against measurements: what the roofline of
`tandem.sim.serving` says one replica of a model on a GPU does (docs/serving.md has the
formulas and the fidelity table).
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Callable, TypeVar

import typer

from tandem.cli.guard import guard
from tandem.errors import InputError, Problem
from tandem.sim.serving import gpu_profile, model_profile
from tandem.sim.serving import roofline

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


def _option(name: str, load: Callable[[], T]) -> T:
    """Run `load`; an InputError it raises is reported against the option `name`."""
    try:
        return load()
    except InputError as exc:
        raise InputError([Problem(name, str(problem)) for problem in exc.problems]) from None
