"""Roofline costs of serving one dense model on a replica of `gpus` identical GPUs.

A replica's work is bounded by compute (FLOPs / achievable FLOP/s) or by memory traffic
(bytes / achievable HBM bytes/s), whichever is slower; tensor parallelism is taken as
perfect (the `gpus` share both evenly, no communication cost). Units: seconds, tokens,
bytes, Gbit/s for links. Every formula is stated in docs/serving.md with its sources.
"""

from __future__ import annotations

import math
from typing import Sequence

from tandem.errors import InputError, Problem
from tandem.sim.serving.profiles import GpuProfile, ModelProfile


def kv_bytes_per_token(model: ModelProfile) -> float:
    """KV-cache bytes one token occupies: 2 (K and V) x layers x kv_heads x head_dim x kv_dtype_bytes."""
    return 2 * model.layers * model.kv_heads * model.head_dim * model.kv_bytes_per_value


def weight_read_seconds(model: ModelProfile, gpu: GpuProfile, gpus: int) -> float:
    """Reading every weight once: weight bytes / (gpus x hbm_bw x mbu)."""
    return model.weight_bytes / (gpus * gpu.bytes_per_s)


def prefill_flops(model: ModelProfile, prompt_lengths: Sequence[int]) -> float:
    """FLOPs of a prefill batch: 2 x params x tokens + 2 x layers x attention_width x sum(len^2).

    The first term is the weight GEMMs (a multiply-add per parameter per token); the second
    is causal attention, QK^T and AV each 2 x len x len x width per layer, halved by the
    causal mask. attention_width = attention_heads x head_dim (query heads: grouped-query
    attention saves KV memory, not attention FLOPs).
    """
    tokens = sum(prompt_lengths)
    squares = sum(length * length for length in prompt_lengths)
    return 2.0 * model.params * tokens + 2.0 * model.layers * model.attention_width * squares


def prefill_seconds(
    model: ModelProfile,
    gpu: GpuProfile,
    gpus: int,
    tokens: int,
    batch_prompt_lengths: Sequence[int] | None = None,
) -> float:
    """One prefill batch: max(compute, weight read).

    compute = prefill_flops(batch) / (gpus x peak x mfu); weight read = weight bytes /
    (gpus x hbm_bw x mbu). `batch_prompt_lengths` (summing to `tokens`) gives the attention
    term; without it the batch is one prompt of `tokens`.
    """
    lengths = [tokens] if batch_prompt_lengths is None else list(batch_prompt_lengths)
    if sum(lengths) != tokens:
        raise ValueError(f"batch_prompt_lengths sum to {sum(lengths)}, not tokens={tokens}")
    compute = prefill_flops(model, lengths) / (gpus * gpu.flops)
    return max(compute, weight_read_seconds(model, gpu, gpus))


def decode_step_seconds(model: ModelProfile, gpu: GpuProfile, gpus: int, batch: int, context_tokens: int) -> float:
    """One decode iteration producing one token for each of `batch` requests:

    max(memory, compute) with memory = (weight bytes + kv_bytes_per_token x context_tokens)
    / (gpus x hbm_bw x mbu) and compute = 2 x params x batch / (gpus x peak x mfu);
    `context_tokens` is the KV the whole batch reads (sum over its requests).
    """
    memory = (model.weight_bytes + kv_bytes_per_token(model) * context_tokens) / (gpus * gpu.bytes_per_s)
    compute = 2.0 * model.params * batch / (gpus * gpu.flops)
    return max(memory, compute)


def kv_transfer_seconds(model: ModelProfile, tokens: int, gbps: float) -> float:
    """Moving the KV of `tokens` over a link: tokens x kv_bytes_per_token x 8 / (gbps x 1e9)."""
    return tokens * kv_bytes_per_token(model) * 8 / (gbps * 1e9)


def kv_capacity_tokens(model: ModelProfile, gpu: GpuProfile, gpus: int) -> int:
    """Tokens of KV a replica holds: floor((gpus x hbm x usable_fraction - weight bytes) / kv_bytes_per_token).

    An InputError when the weights alone do not fit.
    """
    free = gpus * gpu.usable_bytes - model.weight_bytes
    if free <= 0:
        raise InputError(
            Problem(
                "",
                f"{model.name} does not fit on {gpus} x {gpu.name}: its weights take "
                f"{model.weight_bytes / 1e9:.1f} GB, the GPUs have {gpus * gpu.usable_bytes / 1e9:.1f} GB usable "
                f"({gpu.hbm_capacity_gb:g} GB x {gpu.usable_hbm_fraction:g} each)",
            )
        )
    return math.floor(free / kv_bytes_per_token(model))


def prefill_tokens_per_s_max(
    model: ModelProfile, gpu: GpuProfile, gpus: int, prompt_tokens: int, max_batch_tokens: int = 8192
) -> float:
    """Prompt tokens/s of a replica that always has work, for prompts of `prompt_tokens`:

    the full batch holds n = max(1, max_batch_tokens // prompt_tokens) prompts, and the
    ceiling is n x prompt_tokens / prefill_seconds(that batch).
    """
    count = max(1, max_batch_tokens // prompt_tokens)
    tokens = count * prompt_tokens
    return tokens / prefill_seconds(model, gpu, gpus, tokens, [prompt_tokens] * count)


def decode_batch_limit(
    model: ModelProfile, gpu: GpuProfile, gpus: int, reserved_tokens_per_request: int, max_decode_batch: int
) -> int:
    """The largest running batch: min(max_decode_batch, kv_capacity_tokens // reserved tokens per request)."""
    return min(max_decode_batch, kv_capacity_tokens(model, gpu, gpus) // reserved_tokens_per_request)


def decode_tokens_per_s_max(
    model: ModelProfile, gpu: GpuProfile, gpus: int, batch: int, context_tokens_per_request: int
) -> float:
    """Tokens/s of a replica running `batch` requests of `context_tokens_per_request` each:

    batch / decode_step_seconds(batch, batch x context). It grows with the batch (the weight
    read is shared) and falls with the context, so with the largest batch the replica
    can hold (`decode_batch_limit`) and the smallest context a request has (prompt + 1) it
    is a ceiling no run exceeds; once compute-bound it is 1 / (2 x params / (gpus x peak x mfu)).
    """
    return batch / decode_step_seconds(model, gpu, gpus, batch, batch * context_tokens_per_request)
