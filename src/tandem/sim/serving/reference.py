"""The roofline against NVIDIA aiconfigurator's measured per-operation tables.

aiconfigurator (Apache-2.0, PyPI `aiconfigurator-core`, the `calibrate` extra) predicts
an engine's latency by looking up every operation of a forward pass (GEMMs, attention,
all-reduces, ...) in tables measured on real GPUs. It is the reference the bundled GPU
profiles are calibrated to and `bench/fidelity.py` compares with. Nothing else in tandem
imports it: without the extra, `unavailable()` says why and the rest still works.

Reference engine: vLLM, the newest table set aiconfigurator ships for the GPU, bf16
weights and KV cache, tensor parallelism only.
"""

from __future__ import annotations

import itertools
import logging
import math
import shutil
import tempfile
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from tandem.errors import InputError
from tandem.sim.serving import roofline
from tandem.sim.serving.profiles import GpuProfile, ModelProfile, gpu_profile, model_profile

if TYPE_CHECKING:  # the `calibrate` extra; untyped (Any) where it is absent
    from aiconfigurator_core.sdk import EngineHandle

BACKEND = "vllm"
PINNED = "0.12.0"  # the aiconfigurator-core release these figures were calibrated with
# tandem profile -> the name aiconfigurator knows (its bundled copy of the Hugging Face config)
MODELS = {
    "llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B",
    "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
    "mixtral-8x22b": "mistralai/Mixtral-8x22B-v0.1",
}
SYSTEMS = {"h100-sxm": "h100_sxm", "h200-sxm": "h200_sxm"}

# The fidelity grid the issue asks for.
GRID_MODELS = ("llama-3.1-8b", "llama-3.1-70b")
GRID_GPUS = ("h100-sxm", "h200-sxm")
GRID_TP = (1, 2, 4, 8)
GRID_PROMPTS = (128, 512, 2048, 8192)
GRID_BATCHES = (1, 4, 16, 64, 256)
TOLERANCE = 0.20


def unavailable() -> str | None:
    """Why the reference cannot be used here (one line), or None when it can."""
    try:
        import aiconfigurator_core  # noqa: F401
    except ImportError as exc:
        return f"aiconfigurator is not importable ({exc}): pip install -e '.[calibrate]' (aiconfigurator-core=={PINNED})"
    return None


@lru_cache(maxsize=None)
def _engine(model: str, gpu: str, tp: int) -> EngineHandle:
    """aiconfigurator's compiled estimator for the model on `tp` GPUs (cached: compiling loads the tables)."""
    import aiconfigurator_core
    from aiconfigurator_core.sdk import EngineHandle
    from aiconfigurator_core.sdk.common import DefaultHFModels

    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)  # its table-loading chatter
    moe = {"moe_tp_size": tp, "moe_ep_size": 1} if model_profile(model).is_moe else {}  # experts TP-sharded, vLLM's default
    name = MODELS[model]
    if name in DefaultHFModels:
        return EngineHandle.compile(name, SYSTEMS[gpu], BACKEND, tp_size=tp, **moe)
    # A config aiconfigurator ships but does not list: hand it over as a local model
    # directory, so that it never tries to download one.
    bundled = Path(aiconfigurator_core.__file__).parent / "model_configs" / f"{name.replace('/', '--')}_config.json"
    with tempfile.TemporaryDirectory() as folder:
        shutil.copyfile(bundled, Path(folder) / "config.json")
        return EngineHandle.compile(folder, SYSTEMS[gpu], BACKEND, tp_size=tp, **moe)


def reference_seconds(model: str, gpu: str, tp: int, prompt: int, batch: int) -> tuple[float, float]:
    """aiconfigurator's (prefill of `batch` prompts of `prompt` tokens together, one decode
    step of `batch` requests at a context of `prompt`), in seconds."""
    engine = _engine(model, gpu, tp)
    return engine.predict_prefill_latency(batch, prompt) / 1e3, engine.predict_decode_latency(batch, prompt) / 1e3


@dataclass(frozen=True)
class Row:
    model: str
    gpu: str
    tp: int
    prompt: int
    batch: int
    ttft_s: float = math.nan  # predicted
    itl_s: float = math.nan
    ref_ttft_s: float = math.nan
    ref_itl_s: float = math.nan
    skipped: str = ""  # why the row cannot be computed

    @property
    def ttft_error(self) -> float:
        return self.ttft_s / self.ref_ttft_s - 1

    @property
    def itl_error(self) -> float:
        return self.itl_s / self.ref_itl_s - 1

    def as_json(self) -> dict[str, Any]:
        head = {"model": self.model, "gpu": self.gpu, "tp": self.tp, "prompt": self.prompt, "batch": self.batch}
        if self.skipped:
            return head | {"skipped": self.skipped}
        return head | {
            "ttft_ms": round(self.ttft_s * 1e3, 3),
            "ttft_ref_ms": round(self.ref_ttft_s * 1e3, 3),
            "ttft_error": round(self.ttft_error, 4),
            "itl_ms": round(self.itl_s * 1e3, 4),
            "itl_ref_ms": round(self.ref_itl_s * 1e3, 4),
            "itl_error": round(self.itl_error, 4),
        }


def predict(model: ModelProfile, gpu: GpuProfile, tp: int, prompt: int, batch: int) -> tuple[float, float]:
    """tandem's (prefill of the batch, decode step at a context of `prompt` each), in seconds."""
    parallel = roofline.Parallel(tp)
    ttft = roofline.prefill_seconds(model, gpu, parallel, batch * prompt, [prompt] * batch)
    itl = roofline.decode_step_seconds(model, gpu, parallel, batch, batch * prompt)
    return ttft, itl


def fits(model: ModelProfile, gpu: GpuProfile, tp: int, prompt: int, batch: int) -> str:
    """Why the row cannot run on that replica ("" when it can): the weights, or the batch's KV, do not fit."""
    try:
        capacity = roofline.kv_capacity_tokens(model, gpu, roofline.Parallel(tp))
    except InputError:
        return "weights do not fit"
    if batch * (prompt + 1) > capacity:
        return f"KV of {batch} x {prompt + 1} tokens exceeds the {capacity} the replica holds"
    return ""


def rows(
    models: Sequence[str] = GRID_MODELS,
    gpus: Sequence[str] = GRID_GPUS,
    tps: Sequence[int] = GRID_TP,
    prompts: Sequence[int] = GRID_PROMPTS,
    batches: Sequence[int] = GRID_BATCHES,
    profiles: dict[str, GpuProfile] | None = None,
) -> Iterator[Row]:
    """Predicted vs reference over the grid; rows that do not fit on the replica are skipped, with the reason."""
    for name, gpu_name, tp, prompt, batch in itertools.product(models, gpus, tps, prompts, batches):
        model = model_profile(name)
        gpu = (profiles or {}).get(gpu_name) or gpu_profile(gpu_name)
        row = Row(name, gpu_name, tp, prompt, batch)
        reason = fits(model, gpu, tp, prompt, batch)
        if reason:
            yield replace(row, skipped=reason)
            continue
        ttft, itl = predict(model, gpu, tp, prompt, batch)
        ref_ttft, ref_itl = reference_seconds(name, gpu_name, tp, prompt, batch)
        yield replace(row, ttft_s=ttft, itl_s=itl, ref_ttft_s=ref_ttft, ref_itl_s=ref_itl)


def summary(all_rows: Sequence[Row]) -> dict[str, Any]:
    """Share of computed rows within the tolerance, and the worst errors with their rows."""
    done = [r for r in all_rows if not r.skipped]
    out: dict[str, Any] = {"summary": True, "rows": len(done), "skipped": len(all_rows) - len(done), "tolerance": TOLERANCE}
    for metric in ("ttft", "itl"):
        errors = [getattr(r, f"{metric}_error") for r in done]
        if not errors:
            continue
        worst = max(range(len(done)), key=lambda i: abs(errors[i]))
        out[f"{metric}_within"] = round(sum(abs(e) <= TOLERANCE for e in errors) / len(errors), 4)
        out[f"{metric}_worst_error"] = round(errors[worst], 4)
        w = done[worst]
        out[f"{metric}_worst_row"] = f"{w.model} {w.gpu} tp{w.tp} prompt {w.prompt} batch {w.batch}"
    return out


# ------------------------------------------------------------------ calibration

# The GPU-profile fields fitted to the end-to-end reference, with their bounds.
FITTED = {
    "mfu": (0.3, 1.0),
    "mbu": (0.4, 1.0),
    "attention_efficiency": (0.2, 1.0),
    "ridge_exponent": (1.0, 12.0),
    "layer_overhead_us": (0.0, 200.0),
    "prefill_layer_overhead_us": (0.0, 200.0),
    "iteration_overhead_us": (0.0, 2000.0),
}
# All-reduce messages fitted: 16 KiB (a decode step's) to 1 GiB (a long prefill's).
AR_SIZES = (1 << 14, 1 << 30)


def all_reduce_table(gpu: str) -> dict[int, list[tuple[float, float]]]:
    """aiconfigurator's measured vLLM custom all-reduce (CUDA graph) latencies: by TP degree, (bytes, seconds)."""
    import pandas as pd  # a dependency of aiconfigurator-core

    import aiconfigurator_core

    base = Path(aiconfigurator_core.__file__).parent / "systems" / "data" / SYSTEMS[gpu] / "comm" / BACKEND
    version = max((p.name for p in base.iterdir() if p.is_dir()), key=_version_key)
    table = pd.read_parquet(base / version / "custom_allreduce_perf.parquet")
    table = table[table["backend"] == "vllm_graph"]
    out: dict[int, list[tuple[float, float]]] = {}
    for degree, size, latency in zip(table["num_gpus"], table["message_size"], table["latency"]):
        nbytes = 2.0 * size  # message_size counts bf16 elements
        if AR_SIZES[0] <= nbytes <= AR_SIZES[1]:
            out.setdefault(int(degree), []).append((nbytes, latency / 1e3))
    return out


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in text.replace("rc", ".").split("."))


def fit_all_reduce(gpu: GpuProfile) -> dict[str, Any]:
    """Latency and per-degree efficiency of `all_reduce_seconds` that best match the measured
    table in log space (least squares over messages of 16 KiB to 1 GiB)."""
    import numpy as np
    from scipy.optimize import least_squares

    table = all_reduce_table(gpu.name)
    degrees = sorted(table)

    def residuals(x: np.ndarray) -> np.ndarray:
        candidate = gpu.model_copy(update={"all_reduce_latency_us": x[0], "all_reduce_efficiency": dict(zip(degrees, x[1:]))})
        return np.array(
            [math.log(roofline.all_reduce_seconds(candidate, d, size) / seconds) for d in degrees for size, seconds in table[d]]
        )

    start = [gpu.all_reduce_latency_us] + [gpu.all_reduce_efficiency_at(d) for d in degrees]
    bounds = ([0.0] + [0.05] * len(degrees), [100.0] + [1.0] * len(degrees))
    fit = least_squares(residuals, start, bounds=bounds)
    return {"all_reduce_latency_us": float(fit.x[0]), "all_reduce_efficiency": {d: float(v) for d, v in zip(degrees, fit.x[1:])}}


def calibrate(gpu_name: str, models: Sequence[str] = GRID_MODELS) -> dict[str, Any]:
    """Fit the profile's engine constants to aiconfigurator over the fidelity grid.

    First the all-reduce to the measured communication table, then the compute, memory and
    overhead constants (`FITTED`) to the end-to-end prefill and decode times of every row
    that fits, minimising the squared log error and then, softly, the worst one.
    """
    import numpy as np
    from scipy.optimize import least_squares

    gpu = gpu_profile(gpu_name)
    gpu = gpu.model_copy(update=fit_all_reduce(gpu))
    points = []
    for name, tp, prompt, batch in itertools.product(models, GRID_TP, GRID_PROMPTS, GRID_BATCHES):
        model = model_profile(name)
        if not fits(model, gpu, tp, prompt, batch):
            points.append((model, tp, prompt, batch, *reference_seconds(name, gpu_name, tp, prompt, batch)))
    keys = list(FITTED)

    def residuals(x: np.ndarray) -> np.ndarray:
        candidate = gpu.model_copy(update=dict(zip(keys, x)))
        out = []
        for model, tp, prompt, batch, ref_ttft, ref_itl in points:
            ttft, itl = predict(model, candidate, tp, prompt, batch)
            out += [math.log(ttft / ref_ttft), math.log(itl / ref_itl)]
        errors = np.array(out)
        return np.concatenate([errors, [3.0 * np.max(np.abs(errors))]])  # keep the worst row in check

    start = [min(max(getattr(gpu, k), FITTED[k][0]), FITTED[k][1]) for k in keys]
    fit = least_squares(residuals, start, bounds=([FITTED[k][0] for k in keys], [FITTED[k][1] for k in keys]))
    fitted = gpu.model_copy(update=dict(zip(keys, fit.x)))
    return {
        "gpu": gpu_name,
        "points": len(points),
        **{k: round(float(getattr(fitted, k)), 4) for k in keys},
        "all_reduce_latency_us": round(fitted.all_reduce_latency_us, 3),
        "all_reduce_efficiency": {d: round(v, 4) for d, v in fitted.all_reduce_efficiency.items()},
    }
