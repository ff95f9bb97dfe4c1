"""Roofline costs of serving one model on a replica of tensor- and pipeline-parallel GPUs.

Each forward pass is a sum over its layers of: the GEMMs (a smooth maximum of their
compute time and their weight-read time, so there is no sharp corner at the ridge),
attention (prefill: causal FLOPs; decode: the KV the batch reads), the norms' and
activation's memory traffic, two tensor-parallel all-reduces over NVLink, and a fixed
per-layer overhead; then the LM head for the tokens that need logits, pipeline hops, and
a fixed per-iteration overhead. Mixture-of-experts layers read only the experts the
batch's tokens are routed to. The constants are the GPU profile's, calibrated against
NVIDIA aiconfigurator's measured tables (`bench/fidelity.py`). Units: seconds, tokens,
bytes, Gbit/s for links. docs/serving.md states every formula with its sources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from tandem.errors import InputError, Problem
from tandem.sim.serving.profiles import GIB, GpuProfile, ModelProfile

# Activations travel between layers and GPUs in bf16.
ACTIVATION_BYTES = 2
# Peak activation memory per token of the largest forward pass, in hidden-size values:
# 4 + 6 / TP (aiconfigurator's memory model, the "4+6/TP" of its LLAMA coefficients).
ACTIVATION_VALUES_FIXED, ACTIVATION_VALUES_SHARDED = 4.0, 6.0
# Hidden-size values each token moves per layer outside the GEMMs: two fused
# residual-add + RMSNorm passes, each reading and writing the residual and the input.
NORM_VALUES_PER_LAYER = 8
# Intermediate-size values per token per layer of the SwiGLU activation: read gate and
# up, write their product.
ACTIVATION_FN_VALUES = 3


@dataclass(frozen=True)
class Parallel:
    """How a replica splits the model: `tp` GPUs share every layer (within one NVLink
    domain), `pp` stages of `tp` GPUs each hold a share of the layers, and a mixture of
    experts is split either by tensor parallelism (every GPU holds a slice of every
    expert) or by expert parallelism over the `tp` GPUs (each holds whole experts)."""

    tp: int
    pp: int = 1
    expert_parallel: bool = False

    @property
    def gpus(self) -> int:
        return self.tp * self.pp


def layout(model: ModelProfile, gpu: GpuProfile, gpus: int | Parallel) -> Parallel:
    """The replica's split. A bare GPU count uses tensor parallelism within a node (the
    largest degree that divides both the count and the attention heads, up to the node's
    GPUs) and pipeline stages across nodes, as vLLM is run on more than one node."""
    if isinstance(gpus, Parallel):
        parallel = gpus
        if parallel.tp < 1 or parallel.pp < 1:
            raise InputError(Problem("tp" if parallel.tp < 1 else "pp", "must be >= 1"))
        if model.attention_heads % parallel.tp:
            raise InputError(Problem("tp", f"{parallel.tp} does not divide the {model.attention_heads} attention heads of {model.name}"))
        if parallel.tp > gpu.gpus_per_node:
            raise InputError(
                Problem("tp", f"{parallel.tp} is more than the {gpu.gpus_per_node} GPUs of one {gpu.name} node: use pipeline stages (pp) across nodes")
            )
        if parallel.pp > model.layers:
            raise InputError(Problem("pp", f"{parallel.pp} stages for the {model.layers} layers of {model.name}"))
        if parallel.expert_parallel and not model.is_moe:
            raise InputError(Problem("expert_parallel", f"{model.name} has no experts"))
        return parallel
    if gpus < 1:
        raise InputError(Problem("gpus", f"must be >= 1, got {gpus}"))
    tp = max(d for d in range(1, min(gpus, gpu.gpus_per_node) + 1) if gpus % d == 0 and model.attention_heads % d == 0)
    return layout(model, gpu, Parallel(tp, gpus // tp))


# ------------------------------------------------------------------ building blocks


def smooth_max(a: float, b: float, exponent: float) -> float:
    """(a^p + b^p)^(1/p): the roofline's max without its corner. At the ridge (a = b) it is
    2^(1/p) x the max, as a kernel there is neither purely compute- nor memory-bound."""
    top = max(a, b)
    if top <= 0:
        return 0.0
    spread: float = ((a / top) ** exponent + (b / top) ** exponent) ** (1.0 / exponent)
    return top * spread


def experts_touched(model: ModelProfile, tokens: float) -> float:
    """Expected distinct experts `tokens` tokens are routed to, per layer, with uniform
    top-k routing: E x (1 - (1 - k/E)^tokens). 1 for a dense model."""
    if not model.is_moe:
        return 1.0
    untouched: float = (1.0 - model.experts_per_token / model.experts) ** tokens  # chance an expert gets none of them
    return model.experts * (1.0 - untouched)


def kv_bytes_per_token(model: ModelProfile) -> float:
    """KV-cache bytes one token occupies on the whole replica: 2 (K and V) x layers x kv_heads x head_dim x kv bytes."""
    return 2 * model.layers * model.kv_heads * model.head_dim * model.kv_bytes_per_value


def _kv_heads_per_gpu(model: ModelProfile, tp: int) -> float:
    """KV heads each tensor-parallel GPU holds: kv_heads / tp, but at least one (they are
    replicated when tp exceeds them)."""
    return max(model.kv_heads / tp, 1.0)


def all_reduce_latency_seconds(gpu: GpuProfile, tp: int) -> float:
    """An all-reduce's fixed time over `tp` GPUs: latency + log2(tp) steps x step latency."""
    return (gpu.all_reduce_latency_us + math.log2(tp) * gpu.all_reduce_step_latency_us) * 1e-6


def all_reduce_seconds(gpu: GpuProfile, tp: int, message_bytes: float) -> float:
    """One ring all-reduce of `message_bytes` over `tp` GPUs: latency(tp) + 2(tp-1)/tp x bytes /
    (NVLink bytes/s x efficiency(tp)); 0 without tensor parallelism."""
    if tp <= 1:
        return 0.0
    bus = gpu.nvlink_gbps * 1e9 * gpu.all_reduce_efficiency_at(tp)
    return all_reduce_latency_seconds(gpu, tp) + 2 * (tp - 1) / tp * message_bytes / bus


def _gemm_seconds(model: ModelProfile, gpu: GpuProfile, parallel: Parallel, tokens: float) -> float:
    """One layer's GEMMs over `tokens` tokens: smooth max of FLOPs / (tp x peak x mfu) and
    the weights they read / (tp x hbm x mbu); a mixture of experts reads only the experts touched."""
    compute_params = model.attention_params + model.experts_per_token * model.expert_params + model.router_params
    read_params = model.attention_params + experts_touched(model, tokens) * model.expert_params + model.router_params
    compute = 2.0 * tokens * compute_params / (parallel.tp * gpu.flops)
    memory = read_params * model.weight_bytes_per_param / (parallel.tp * gpu.bytes_per_s)
    return smooth_max(compute, memory, gpu.ridge_exponent)


def _lm_head_seconds(model: ModelProfile, gpu: GpuProfile, parallel: Parallel, tokens: float) -> float:
    """The LM head (vocab-parallel over tp) for the `tokens` that need logits."""
    compute = 2.0 * tokens * model.lm_head_params / (parallel.tp * gpu.flops)
    memory = model.lm_head_params * model.weight_bytes_per_param / (parallel.tp * gpu.bytes_per_s)
    return smooth_max(compute, memory, gpu.ridge_exponent)


def _pointwise_seconds(model: ModelProfile, gpu: GpuProfile, parallel: Parallel, tokens: float) -> float:
    """One layer's memory-bound kernels outside the GEMMs: the norms (replicated on every
    tp GPU) and the gated activation (sharded), bf16 values read and written."""
    values = NORM_VALUES_PER_LAYER * model.hidden_size + ACTIVATION_FN_VALUES * model.experts_per_token * model.intermediate_size / parallel.tp
    return tokens * values * ACTIVATION_BYTES / gpu.bytes_per_s


def _communication_seconds(model: ModelProfile, gpu: GpuProfile, parallel: Parallel, tokens: float) -> float:
    """One layer's tensor-parallel traffic: an all-reduce of the activations after attention
    and one after the MLP; with expert parallelism the second is a dispatch and a combine
    all-to-all of each token's hidden state to its k experts' GPUs."""
    message = tokens * model.hidden_size * ACTIVATION_BYTES
    if not (parallel.expert_parallel and parallel.tp > 1):
        return 2 * all_reduce_seconds(gpu, parallel.tp, message)
    tp = parallel.tp
    sent = message * model.experts_per_token * (tp - 1) / tp / tp  # per GPU, the share routed off it
    all_to_all = all_reduce_latency_seconds(gpu, tp) + sent / (gpu.nvlink_gbps * 1e9 * gpu.all_reduce_efficiency_at(tp))
    return all_reduce_seconds(gpu, tp, message) + 2 * all_to_all


def _stage_hop_seconds(model: ModelProfile, gpu: GpuProfile, parallel: Parallel, tokens: float) -> float:
    """Handing `tokens` hidden states to the next pipeline stage (on another node): each tp
    rank sends its share through its own NIC."""
    message = tokens * model.hidden_size * ACTIVATION_BYTES / parallel.tp
    return gpu.transfer_latency_us * 1e-6 + message * 8 / (gpu.nic_gbps * 1e9 * gpu.nic_efficiency)


# ------------------------------------------------------------------ prefill


def prefill_flops(model: ModelProfile, prompt_lengths: Sequence[int]) -> float:
    """FLOPs of a prefill batch: 2 x (active non-embedding params) x tokens + the LM head
    for the last token of each prompt + causal attention 2 x layers x attention_width x sum(len^2).

    Embedding lookups are not FLOPs; only the last position of a prompt needs logits.
    Attention: QK^T and AV each 2 x len x len x width per layer, halved by the causal mask;
    query heads count (grouped-query attention saves KV memory, not attention FLOPs).
    """
    tokens = sum(prompt_lengths)
    squares = sum(length * length for length in prompt_lengths)
    per_token = model.layers * (model.attention_params + model.experts_per_token * model.expert_params + model.router_params)
    return 2.0 * per_token * tokens + 2.0 * model.lm_head_params * len(prompt_lengths) + 2.0 * model.layers * model.attention_width * squares


def prefill_seconds(
    model: ModelProfile,
    gpu: GpuProfile,
    gpus: int | Parallel,
    tokens: int,
    batch_prompt_lengths: Sequence[int] | None = None,
    *,
    attention_squares: float | None = None,
) -> float:
    """One prefill batch of whole prompts (`batch_prompt_lengths`, summing to `tokens`;
    without it the batch is one prompt of `tokens`):

    layers x (GEMMs(tokens) + attention(sum len^2) + norms and activation(tokens) + 2
    all-reduces(tokens) + layer overhead + prefill layer overhead) + LM head(prompts)
    + (pp - 1) stage hops + iteration overhead. Pipeline stages run one after another, so
    a batch's latency is not cut by pp.

    `attention_squares` replaces sum len^2 when part of a prompt's KV is already there (a
    prefix-cache hit or an earlier chunk, `p` tokens, then `c` new ones): its causal
    attention costs (p + c)^2 - p^2, the new queries against the whole context.
    """
    lengths = [tokens] if batch_prompt_lengths is None else list(batch_prompt_lengths)
    if sum(lengths) != tokens:
        raise ValueError(f"batch_prompt_lengths sum to {sum(lengths)}, not tokens={tokens}")
    parallel = layout(model, gpu, gpus)
    squares = float(sum(length * length for length in lengths)) if attention_squares is None else float(attention_squares)
    attention = 2.0 * model.attention_width * squares / (parallel.tp * gpu.peak_tflops * 1e12 * gpu.attention_efficiency)
    per_layer = (
        _gemm_seconds(model, gpu, parallel, tokens)
        + attention
        + _pointwise_seconds(model, gpu, parallel, tokens)
        + _communication_seconds(model, gpu, parallel, tokens)
        + (gpu.layer_overhead_us + gpu.prefill_layer_overhead_us) * 1e-6
    )
    hops = (parallel.pp - 1) * _stage_hop_seconds(model, gpu, parallel, tokens)
    return model.layers * per_layer + _lm_head_seconds(model, gpu, parallel, len(lengths)) + hops + gpu.iteration_overhead_us * 1e-6


# ------------------------------------------------------------------ decode


def decode_step_parts(model: ModelProfile, gpu: GpuProfile, gpus: int | Parallel, batch: int) -> tuple[float, float]:
    """(fixed seconds, seconds per context token) of one decode iteration of `batch`
    requests, which takes fixed + per_token x (KV tokens the whole batch reads).

    With pp stages the batch runs as m = min(pp, batch) micro-batches of batch/m requests
    that keep the stages busy; an iteration (every request one token) is then
    layers x layer_time(batch/m) + the LM head of the last stage + hops + overhead: the
    weights are read once per micro-batch, and with fewer requests than stages the idle
    stages are the pipeline bubble. The KV read is linear in the context, so the whole
    step is; attention costs the larger of its KV read and its FLOPs per context token.
    """
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    parallel = layout(model, gpu, gpus)
    micro = min(parallel.pp, batch)
    each = batch / micro
    per_layer = (
        _gemm_seconds(model, gpu, parallel, each)
        + _pointwise_seconds(model, gpu, parallel, each)
        + _communication_seconds(model, gpu, parallel, each)
        + gpu.layer_overhead_us * 1e-6
    )
    heads = _kv_heads_per_gpu(model, parallel.tp)
    kv_read = 2 * heads * model.head_dim * model.kv_bytes_per_value / gpu.bytes_per_s
    attention_flops = 4 * (model.attention_heads / parallel.tp) * model.head_dim / (gpu.peak_tflops * 1e12 * gpu.attention_efficiency)
    per_context_token = model.layers * max(kv_read, attention_flops) / micro
    lm_heads = micro if micro == parallel.pp else 1  # the last stage's share when every stage is busy
    fixed = (
        model.layers * per_layer
        + lm_heads * _lm_head_seconds(model, gpu, parallel, each)
        + parallel.pp * (_stage_hop_seconds(model, gpu, parallel, each) if parallel.pp > 1 else 0.0)
        + gpu.iteration_overhead_us * 1e-6
    )
    return fixed, per_context_token


def decode_step_seconds(model: ModelProfile, gpu: GpuProfile, gpus: int | Parallel, batch: int, context_tokens: int) -> float:
    """One decode iteration producing one token for each of `batch` requests that together
    read `context_tokens` of KV: fixed + per_token x context (`decode_step_parts`)."""
    fixed, per_token = decode_step_parts(model, gpu, gpus, batch)
    return fixed + per_token * context_tokens


def weight_read_seconds(model: ModelProfile, gpu: GpuProfile, gpus: int | Parallel) -> float:
    """Reading the weights a one-request decode step reads (all layers' attention and its
    experts, the LM head; not the embeddings) once: the memory floor of a decode step."""
    parallel = layout(model, gpu, gpus)
    read = model.layers * (model.attention_params + experts_touched(model, 1) * model.expert_params + model.router_params) + model.lm_head_params
    return read * model.weight_bytes_per_param / (parallel.tp * gpu.bytes_per_s)


# ------------------------------------------------------------------ KV transfer


def kv_transfer_gbps(gpu: GpuProfile, ranks: int, link_gbps: float, sharing: int = 1, same_node: bool = False) -> float:
    """Gbit/s one KV transfer gets: min(ranks x NIC Gbit/s x NIC efficiency, the link's
    Gbit/s / the transfers sharing it). `ranks` tensor-parallel ranks send in parallel,
    each through its own NIC; on one node the link is NVLink and no NIC is used."""
    share = link_gbps / max(1, sharing)
    if same_node:
        return share
    return min(ranks * gpu.nic_gbps * gpu.nic_efficiency, share)


def kv_transfer_seconds(
    model: ModelProfile, tokens: int, gbps: float, *, latency_s: float = 0.0, overlap_s: float = 0.0
) -> float:
    """Seconds from the end of prefill until the prompt's KV has arrived:

    latency + max(S / (layers x R), S / R - overlap x (1 - 1/layers)), S = tokens x KV
    bytes, R = gbps. Layer by layer streaming: each layer's KV is sent as soon as prefill
    has computed it, so a transfer that starts with a prefill of `overlap_s` seconds hides
    behind it and only the last layer's share (or what the link could not keep up with)
    is left. overlap 0: the whole transfer.
    """
    size = tokens * kv_bytes_per_token(model) * 8 / (gbps * 1e9)
    layers = model.layers
    return latency_s + max(size / layers, size - overlap_s * (1 - 1 / layers))


# ------------------------------------------------------------------ memory and ceilings


def activation_bytes(model: ModelProfile, parallel: Parallel, max_batch_tokens: int) -> float:
    """Peak activation memory per GPU of a forward pass of `max_batch_tokens` tokens:
    2 bytes x tokens x hidden x (4 + 6/tp)."""
    values = ACTIVATION_VALUES_FIXED + ACTIVATION_VALUES_SHARDED / parallel.tp
    return ACTIVATION_BYTES * max_batch_tokens * model.hidden_size * values


def kv_capacity_tokens(model: ModelProfile, gpu: GpuProfile, gpus: int | Parallel, max_batch_tokens: int = 8192) -> int:
    """Tokens of KV a replica holds: per GPU, HBM x utilisation - weights/(tp x pp) -
    activations - reserved - communication buffers, over each GPU's KV bytes per token
    (2 x layers/pp x max(kv_heads/tp, 1) x head_dim x kv bytes).

    An InputError when the weights and the engine's own memory alone do not fit.
    """
    parallel = layout(model, gpu, gpus)
    weights = model.weight_bytes / parallel.gpus
    engine = activation_bytes(model, parallel, max_batch_tokens) + gpu.reserved_gib * GIB
    engine += gpu.comm_buffer_gib * GIB if parallel.tp > 1 else 0.0
    budget = gpu.hbm_bytes * gpu.memory_utilization
    free = budget - weights - engine
    if free <= 0:
        raise InputError(
            Problem(
                "",
                f"{model.name} does not fit on {parallel.gpus} x {gpu.name} (tp {parallel.tp}, pp {parallel.pp}): "
                f"each GPU needs {weights / GIB:.1f} GiB of weights and {engine / GIB:.1f} GiB for the engine, "
                f"and has {budget / GIB:.1f} GiB ({gpu.hbm_gib:g} GiB x {gpu.memory_utilization:g})",
            )
        )
    per_token = 2 * (model.layers / parallel.pp) * _kv_heads_per_gpu(model, parallel.tp) * model.head_dim * model.kv_bytes_per_value
    return math.floor(free / per_token)


def prefill_tokens_per_s_max(
    model: ModelProfile, gpu: GpuProfile, gpus: int | Parallel, prompt_tokens: int, max_batch_tokens: int = 8192
) -> float:
    """Prompt tokens/s of a replica that always has work, for prompts of `prompt_tokens`:

    the full batch holds n = max(1, max_batch_tokens // prompt_tokens) prompts, and the
    ceiling is n x prompt_tokens / prefill_seconds(that batch).
    """
    count = max(1, max_batch_tokens // prompt_tokens)
    tokens = count * prompt_tokens
    return tokens / prefill_seconds(model, gpu, gpus, tokens, [prompt_tokens] * count)


def decode_batch_limit(
    model: ModelProfile, gpu: GpuProfile, gpus: int | Parallel, reserved_tokens_per_request: int, max_decode_batch: int
) -> int:
    """The largest running batch: min(max_decode_batch, kv_capacity_tokens // reserved tokens per request)."""
    return min(max_decode_batch, kv_capacity_tokens(model, gpu, gpus) // reserved_tokens_per_request)


def decode_tokens_per_s_max(
    model: ModelProfile, gpu: GpuProfile, gpus: int | Parallel, batch: int, context_tokens_per_request: int
) -> float:
    """Tokens/s of a replica running `batch` requests of `context_tokens_per_request` each:

    batch / decode_step_seconds(batch, batch x context). It grows with the batch (the weight
    read and the overheads are shared) and falls with the context, so with the largest batch
    the replica can hold (`decode_batch_limit`) and the smallest context a request has
    (prompt + 1) it is a ceiling no run exceeds.
    """
    return batch / decode_step_seconds(model, gpu, gpus, batch, batch * context_tokens_per_request)
