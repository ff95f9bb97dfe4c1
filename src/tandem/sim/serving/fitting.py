"""Fitting a GPU profile's engine constants to measured rows (`tandem profile fit`).

The roofline (`roofline.py`) has a handful of constants that belong to the serving stack
rather than to the GPU: how much of peak its GEMMs and attention reach, how much of HBM
bandwidth its reads reach, its per-step and per-layer overheads, and its all-reduce's
latency and bandwidth. Given measured prefill and decode times of one model on some
replica configurations, this finds the constants that minimise the squared log error of
the predictions, starting from (and gently pulled towards) a base profile's values, so
that a constant the rows say nothing about keeps the base value. Everything else of the
base profile (datasheet figures, memory, KV transfer) is kept.

The solver is a small Levenberg-Marquardt in numpy over the constants mapped to their
bounds by a logistic function: no optional dependency, deterministic (same rows, same
profile).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from tandem.errors import InputError, Problem
from tandem.sim.serving import roofline
from tandem.sim.serving.measured import Observation
from tandem.sim.serving.profiles import GpuProfile, ModelProfile

# The fitted constants and their bounds. `all_reduce_efficiency` is fitted as one value
# for every TP degree, so that a degree the rows do not hold is predicted from the others.
FITTED: dict[str, tuple[float, float]] = {
    "mfu": (0.02, 1.0),
    "mbu": (0.02, 1.0),
    "attention_efficiency": (0.02, 1.0),
    "iteration_overhead_us": (0.0, 200_000.0),
    "layer_overhead_us": (0.0, 2_000.0),
    "prefill_layer_overhead_us": (0.0, 2_000.0),
    "all_reduce_latency_us": (0.0, 2_000.0),
    "all_reduce_step_latency_us": (0.0, 1_000.0),
    "all_reduce_efficiency": (0.005, 1.0),
}
# Weight of the pull towards the base profile, per constant, in the logistic space:
# small beside a row's log error, enough to keep an unconstrained constant where it was.
PRIOR_WEIGHT = 0.01
MAX_ITERATIONS = 300
# A base value at a bound (an overhead of 0) starts, and is pulled towards, this share of
# the range inside it: at the bound itself the logistic map would put it infinitely far.
FLOOR = 1e-4


@dataclass(frozen=True)
class Residual:
    """One configuration's measured time (the mean of its repetitions) beside the prediction."""

    metric: str
    tp: int
    pp: int
    prompt: int
    batch: int
    context: int
    rows: int
    measured_s: float
    predicted_s: float

    @property
    def ratio(self) -> float:
        return self.predicted_s / self.measured_s

    def as_json(self) -> dict[str, Any]:
        head: dict[str, Any] = {"metric": self.metric, "tp": self.tp, "pp": self.pp, "prompt": self.prompt, "batch": self.batch}
        if self.metric == "itl":
            head["context"] = self.context
        return head | {
            "rows": self.rows,
            "measured_ms": round(self.measured_s * 1e3, 4),
            "predicted_ms": round(self.predicted_s * 1e3, 4),
            "error": round(self.ratio - 1, 4),
        }


@dataclass(frozen=True)
class Fit:
    gpu: GpuProfile
    residuals: tuple[Residual, ...]
    skipped: tuple[tuple[Observation, str], ...]  # rows the replica cannot hold, with the reason

    def constants(self) -> dict[str, Any]:
        return fitted_constants(self.gpu)


def fitted_constants(gpu: GpuProfile) -> dict[str, Any]:
    """The fitted constants of a profile, rounded for printing."""
    out: dict[str, Any] = {}
    for name in FITTED:
        value = gpu.all_reduce_efficiency_at(2) if name == "all_reduce_efficiency" else getattr(gpu, name)
        out[name] = _significant(value)
    return out


def predict(model: ModelProfile, gpu: GpuProfile, observation: Observation) -> float:
    """The roofline's time for what the observation measured, in seconds."""
    parallel = roofline.Parallel(observation.tp, observation.pp)
    if observation.metric == "ttft":
        tokens = observation.batch * observation.prompt
        return roofline.prefill_seconds(model, gpu, parallel, tokens, [observation.prompt] * observation.batch)
    return roofline.decode_step_seconds(model, gpu, parallel, observation.batch, observation.batch * observation.context)


def unfit_reason(model: ModelProfile, gpu: GpuProfile, observation: Observation) -> str:
    """Why the replica cannot hold the row ("" when it can): its weights, or the batch's KV."""
    try:
        capacity = roofline.kv_capacity_tokens(model, gpu, roofline.Parallel(observation.tp, observation.pp))
    except InputError as exc:
        return exc.problems[0].message
    need = observation.batch * (observation.context if observation.metric == "itl" else observation.prompt)
    if need > capacity:
        return f"the KV of {need} tokens exceeds the {capacity} a tp {observation.tp} pp {observation.pp} replica holds"
    return ""


def with_constants(gpu: GpuProfile, values: dict[str, float]) -> GpuProfile:
    """The profile with some fitted constants replaced (validated as a profile file would be)."""
    update: dict[str, Any] = {k: v for k, v in values.items() if k != "all_reduce_efficiency"}
    if "all_reduce_efficiency" in values:
        update["all_reduce_efficiency"] = {1: values["all_reduce_efficiency"]}
    return gpu.model_copy(update=update)


def fit_profile(model: ModelProfile, base: GpuProfile, observations: Sequence[Observation], *, name: str | None = None) -> Fit:
    """Fit `FITTED` to the observations; see the module's docstring."""
    for observation in observations:
        try:
            roofline.layout(model, base, roofline.Parallel(observation.tp, observation.pp))
        except InputError as exc:
            raise InputError(Problem("", f"{exc.problems[0].path} {exc.problems[0].message}", observation.where)) from None
    kept: list[Observation] = []
    skipped: list[tuple[Observation, str]] = []
    for observation in observations:
        reason = unfit_reason(model, base, observation)
        if reason:
            skipped.append((observation, reason))
        else:
            kept.append(observation)
    if not kept:
        raise InputError(Problem("", f"no measured row fits on its replica ({skipped[0][1]}, {skipped[0][0].where})"))
    configs = sorted({o.config for o in kept})
    index = {config: i for i, config in enumerate(configs)}
    examples = {o.config: o for o in kept}
    which = np.array([index[o.config] for o in kept])
    logs = np.log(np.array([o.seconds for o in kept]))
    keys = list(FITTED)
    lows = np.array([FITTED[k][0] for k in keys])
    highs = np.array([FITTED[k][1] for k in keys])
    start = np.array([_base_value(base, k) for k in keys])
    z0 = _to_free(np.clip(start, lows + FLOOR * (highs - lows), highs - FLOOR * (highs - lows)), lows, highs)
    weight = math.sqrt(len(kept) / len(configs))  # the prior counts like one row per configuration

    def candidate(z: np.ndarray) -> GpuProfile:
        return with_constants(base, dict(zip(keys, (float(v) for v in _to_bounded(z, lows, highs)))))

    def residuals(z: np.ndarray) -> np.ndarray:
        gpu = candidate(z)
        predicted = np.log(np.array([predict(model, gpu, examples[c]) for c in configs]))
        return np.concatenate([predicted[which] - logs, PRIOR_WEIGHT * weight * (z - z0)])

    z = _levenberg_marquardt(residuals, z0)
    gpu = candidate(z)
    if name is not None:
        gpu = gpu.model_copy(update={"name": name})
    return Fit(gpu, tuple(residual_table(model, gpu, kept)), tuple(skipped))


def residual_table(model: ModelProfile, gpu: GpuProfile, observations: Sequence[Observation]) -> list[Residual]:
    """Per configuration (in a sorted order): the geometric mean of its measured
    repetitions beside the prediction."""
    groups: dict[tuple[str, int, int, int, int, int], list[Observation]] = {}
    for observation in observations:
        groups.setdefault(observation.config, []).append(observation)
    out = []
    for config in sorted(groups):
        rows = groups[config]
        measured = math.exp(sum(math.log(o.seconds) for o in rows) / len(rows))
        first = rows[0]
        out.append(Residual(first.metric, first.tp, first.pp, first.prompt, first.batch, first.context, len(rows), measured, predict(model, gpu, first)))
    return out


def summary(residuals: Sequence[Residual]) -> dict[str, Any]:
    """Geometric-mean error (exp(mean |ln(predicted / measured)|) - 1) over the
    configurations, per metric and together, the worst one, and the share within 0.5-2x."""
    out: dict[str, Any] = {"configurations": len(residuals)}
    for metric in ("ttft", "itl", "all"):
        chosen = [r for r in residuals if metric in ("all", r.metric)]
        if not chosen:
            continue
        logs = [abs(math.log(r.ratio)) for r in chosen]
        worst = max(chosen, key=lambda r: abs(math.log(r.ratio)))
        out[f"{metric}_geomean_error"] = round(math.exp(sum(logs) / len(logs)) - 1, 4)
        out[f"{metric}_worst_ratio"] = round(worst.ratio, 4)
        out[f"{metric}_within_half_to_double"] = round(sum(0.5 <= r.ratio <= 2.0 for r in chosen) / len(chosen), 4)
    return out


# ------------------------------------------------------------------ the solver


def _base_value(gpu: GpuProfile, key: str) -> float:
    if key == "all_reduce_efficiency":
        table = gpu.all_reduce_efficiency
        return float(math.exp(sum(math.log(v) for v in table.values()) / len(table)))
    return float(getattr(gpu, key))


def _to_free(x: np.ndarray, lows: np.ndarray, highs: np.ndarray) -> np.ndarray:
    share = (x - lows) / (highs - lows)
    return np.asarray(np.log(share / (1.0 - share)))


def _to_bounded(z: np.ndarray, lows: np.ndarray, highs: np.ndarray) -> np.ndarray:
    return np.asarray(lows + (highs - lows) / (1.0 + np.exp(-np.clip(z, -40.0, 40.0))))


def _levenberg_marquardt(residuals: Any, z: np.ndarray) -> np.ndarray:
    """Minimise |residuals(z)|^2: Gauss-Newton steps damped by mu (Marquardt's scaling),
    a forward-difference Jacobian; stops when a step no longer lowers the cost."""
    r = residuals(z)
    cost = float(r @ r)
    mu = 1e-2
    for _ in range(MAX_ITERATIONS):
        step = 1e-6 * np.maximum(1.0, np.abs(z))
        jacobian = np.empty((r.size, z.size))
        for j in range(z.size):
            shifted = z.copy()
            shifted[j] += step[j]
            jacobian[:, j] = (residuals(shifted) - r) / step[j]
        normal = jacobian.T @ jacobian
        gradient = jacobian.T @ r
        improved = False
        while mu < 1e10:
            damped = normal + mu * (np.diag(np.diag(normal)) + 1e-9 * np.eye(z.size))
            delta = np.linalg.solve(damped, -gradient)
            trial = z + delta
            r_trial = residuals(trial)
            trial_cost = float(r_trial @ r_trial)
            if trial_cost < cost:
                improved = True
                converged = cost - trial_cost <= 1e-12 * max(cost, 1e-30)
                z, r, cost = trial, r_trial, trial_cost
                mu = max(mu / 3.0, 1e-12)
                break
            mu *= 4.0
        if not improved or converged:
            break
    return z


def _significant(value: float, digits: int = 5) -> float:
    """`value` to `digits` significant figures: a profile file is read by people."""
    if value == 0 or not math.isfinite(value):
        return float(value)
    return float(f"{value:.{digits}g}")


def profile_text(fit: Fit, *, model: str, base: str, sources: Sequence[str]) -> str:
    """The fitted profile as a YAML document `gpu_profile` reads back: the base profile's
    fields with the fitted constants, and comments saying what was fitted to what."""
    import yaml

    document = fit.gpu.model_dump(by_alias=True)
    for name in FITTED:
        alias = GpuProfile.model_fields[name].alias or name
        document[alias] = {1: _significant(fit.gpu.all_reduce_efficiency_at(1))} if name == "all_reduce_efficiency" else _significant(getattr(fit.gpu, name))
    files = ", ".join(sources)
    document["source"] = f"engine constants fitted by `tandem profile fit` to {files} for {model}; every other figure from the {base} profile: {fit.gpu.source.strip()}"
    rows = sum(r.rows for r in fit.residuals)
    stats = summary(fit.residuals)
    header = [
        f"# Fitted by `tandem profile fit` to {rows} measured rows of {model} ({files}),",
        f"# starting from the {base} profile; fitted: {', '.join(FITTED)}.",
        f"# Geometric-mean error over the {stats['configurations']} configurations: {stats['all_geomean_error']:.1%};",
        f"# worst predicted / measured: {stats['all_worst_ratio']:.3f}. Every other field is the base profile's.",
    ]
    return "\n".join(header) + "\n" + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


def parse_profile_text(source: str, text: str) -> GpuProfile:
    """The profile a `profile_text` document describes (as `gpu_profile` would read it)."""
    from tandem.sim.serving.profiles import parse_profile

    return parse_profile(GpuProfile, source, text)
