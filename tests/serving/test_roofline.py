"""Roofline formulas, profile data files and the closed-form decode batch timing.

Expected values are written out from the formulas in docs/serving.md with the profile
numbers, not through the functions under test.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from support.serving import H100, H100_BYTES_PER_S, H100_FLOPS, H200, KV70, L8, L70, W70
from tandem.errors import InputError
from tandem.sim.serving import (
    GPU_NAMES,
    MODEL_NAMES,
    decode_batch_limit,
    decode_step_seconds,
    decode_tokens_per_s_max,
    gpu_profile,
    kv_bytes_per_token,
    kv_capacity_tokens,
    kv_transfer_seconds,
    model_profile,
    prefill_seconds,
    prefill_tokens_per_s_max,
)
from tandem.sim.serving.batching import BatchRun


# ------------------------------------------------------------------ profiles


def test_shipped_profiles_are_listed_and_load():
    assert MODEL_NAMES == ("llama-3.1-70b", "llama-3.1-8b")
    assert GPU_NAMES == ("h100-sxm", "h200-sxm")
    assert (L70.layers, L70.hidden_size, L70.attention_heads, L70.kv_heads, L70.head_dim) == (80, 8192, 64, 8, 128)
    assert (L8.layers, L8.hidden_size, L8.attention_heads, L8.kv_heads, L8.head_dim) == (32, 4096, 32, 8, 128)
    assert (H100.peak_tflops, H100.hbm_bandwidth_tbps, H100.hbm_capacity_gb) == (989.4, 3.35, 80)
    assert (H200.peak_tflops, H200.hbm_bandwidth_tbps, H200.hbm_capacity_gb) == (989.4, 4.8, 141)
    for profile in (L70, L8, H100, H200):
        assert profile.source.strip()


@pytest.mark.parametrize("model", [L70, L8], ids=lambda m: m.name)
def test_params_match_the_architecture_of_the_config(model):
    """A Llama decoder: untied embeddings and LM head, q/k/v/o, SwiGLU MLP, two norms per layer, final norm."""
    h, kv_width = model.hidden_size, model.kv_heads * model.head_dim
    per_layer = h * model.attention_width + 2 * h * kv_width + model.attention_width * h + 3 * h * model.intermediate_size + 2 * h
    assert model.params == 2 * model.vocab_size * h + model.layers * per_layer + h
    assert model.attention_width == h  # head_dim = hidden_size / attention heads in both configs


def test_profiles_load_from_a_path(tmp_path: Path):
    path = tmp_path / "gpu.yaml"
    path.write_text(
        "name: tiny\nsource: test\npeakTflops: 10\nhbmBandwidthTBps: 1\nhbmCapacityGB: 8\nmfu: 1\nmbu: 1\nusableHbmFraction: 1\n"
    )
    gpu = gpu_profile(path)
    assert gpu.flops == 10e12 and gpu.bytes_per_s == 1e12 and gpu.usable_bytes == 8e9


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("mbu: 1.5", "mbu", "less than or equal to 1"),
        ("mfu: 0", "mfu", "greater than 0"),
        ("hbmCapacityGB: -80", "hbmCapacityGB", "greater than 0"),
        ("peakTflops: fast", "peakTflops", "valid number"),
        ("hbmBandwidthTbps: 3.35", "hbmBandwidthTbps", "unknown field"),
    ],
)
def test_a_bad_gpu_file_names_the_field(tmp_path: Path, text: str, where: str, message: str):
    good = {
        "name": "x",
        "source": "s",
        "peakTflops": "989.4",
        "hbmBandwidthTBps": "3.35",
        "hbmCapacityGB": "80",
        "mfu": "0.5",
        "mbu": "0.7",
        "usableHbmFraction": "0.9",
    }
    key, _, value = text.partition(": ")
    good[key] = value
    path = tmp_path / "bad.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in good.items()))
    with pytest.raises(InputError) as caught:
        gpu_profile(path)
    assert str(caught.value).startswith(f"{path}: {where}: ")
    assert message in str(caught.value)


def test_a_bad_model_file_says_what_and_where(tmp_path: Path):
    path = tmp_path / "model.yaml"
    path.write_text(
        "name: m\nsource: s\nparams: 1000\nlayers: 2\nhiddenSize: 64\nattentionHeads: 8\nkvHeads: 3\nheadDim: 8\n"
        "weightBytesPerParam: 2\nkvBytesPerValue: 2\n"
    )
    with pytest.raises(InputError) as caught:
        model_profile(path)
    assert str(caught.value) == f"{path}: kvHeads: must divide attentionHeads (8), got 3"
    path.write_text("name: m\nsource: s\n")
    with pytest.raises(InputError) as caught:
        model_profile(path)
    assert f"{path}: params: required field is missing" in str(caught.value)
    path.write_text("name: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        model_profile(path)


def test_an_unknown_name_lists_the_shipped_ones():
    with pytest.raises(InputError, match="unknown model 'llama-9'.*llama-3.1-70b, llama-3.1-8b"):
        model_profile("llama-9")
    with pytest.raises(InputError, match="unknown GPU 'b200'.*h100-sxm, h200-sxm"):
        gpu_profile("b200")


# ------------------------------------------------------------------ formulas


def test_kv_bytes_per_token():
    assert kv_bytes_per_token(L70) == 327_680 == KV70
    assert kv_bytes_per_token(L8) == 2 * 32 * 8 * 128 * 2 == 131_072


def test_prefill_is_compute_bound_for_long_prompts_and_weight_bound_for_short_ones():
    tokens = 4000
    compute = (2 * 70553706496 * tokens + 2 * 80 * 8192 * tokens**2) / (8 * H100_FLOPS)
    assert prefill_seconds(L70, H100, 8, tokens) == pytest.approx(compute, rel=1e-12)
    weights = W70 / (8 * H100_BYTES_PER_S)
    assert prefill_seconds(L70, H100, 8, 10) == pytest.approx(weights, rel=1e-12)
    # a batch of prompts pays attention per prompt, so it is cheaper than one prompt of the sum
    batch = (2 * 70553706496 * 4000 + 2 * 80 * 8192 * (1000**2 * 4)) / (8 * H100_FLOPS)
    assert prefill_seconds(L70, H100, 8, 4000, [1000] * 4) == pytest.approx(batch, rel=1e-12)
    assert prefill_seconds(L70, H100, 8, 4000, [1000] * 4) < prefill_seconds(L70, H100, 8, 4000)
    with pytest.raises(ValueError):
        prefill_seconds(L70, H100, 8, 4000, [1000])


def test_decode_step_switches_from_compute_to_memory_as_context_grows():
    compute = 2 * 70553706496 * 256 / (8 * H100_FLOPS)
    assert decode_step_seconds(L70, H100, 8, 256, 256 * 10) == pytest.approx(compute, rel=1e-12)
    memory = (W70 + KV70 * 256 * 2000) / (8 * H100_BYTES_PER_S)
    assert memory > compute
    assert decode_step_seconds(L70, H100, 8, 256, 256 * 2000) == pytest.approx(memory, rel=1e-12)
    # one request: the weight read dominates
    assert decode_step_seconds(L70, H100, 8, 1, 1001) == pytest.approx((W70 + KV70 * 1001) / (8 * H100_BYTES_PER_S), rel=1e-12)


def test_kv_transfer_seconds():
    assert kv_transfer_seconds(L70, 1000, 400) == pytest.approx(1000 * KV70 * 8 / 400e9, rel=1e-12)
    assert kv_transfer_seconds(L70, 1000, 100) == pytest.approx(4 * kv_transfer_seconds(L70, 1000, 400), rel=1e-12)


def test_kv_capacity_and_models_that_do_not_fit():
    assert kv_capacity_tokens(L70, H100, 8) == math.floor((8 * 80e9 * 0.9 - W70) / KV70) == 1_327_186
    assert kv_capacity_tokens(L70, H200, 2) == math.floor((2 * 141e9 * 0.9 - W70) / KV70)
    with pytest.raises(InputError, match="llama-3.1-70b does not fit on 1 x h100-sxm: its weights take 141.1 GB"):
        kv_capacity_tokens(L70, H100, 1)
    assert decode_batch_limit(L70, H100, 8, 500, 256) == 256
    assert decode_batch_limit(L70, H100, 8, 100_000, 256) == 1_327_186 // 100_000


def test_throughput_ceilings():
    # four 2,000-token prompts fill an 8,192-token batch
    seconds = max((2 * 70553706496 * 8000 + 2 * 80 * 8192 * 4 * 2000**2) / (8 * H100_FLOPS), W70 / (8 * H100_BYTES_PER_S))
    assert prefill_tokens_per_s_max(L70, H100, 8, 2000, 8192) == pytest.approx(8000 / seconds, rel=1e-12)
    assert prefill_tokens_per_s_max(L70, H100, 8, 10_000, 8192) == pytest.approx(10_000 / prefill_seconds(L70, H100, 8, 10_000))
    # compute-bound decode: the ceiling is 1 / (2 x params / (gpus x peak x mfu)) whatever the batch
    per_token = 2 * 70553706496 / (8 * H100_FLOPS)
    assert decode_tokens_per_s_max(L70, H100, 8, 256, 101) == pytest.approx(1 / per_token, rel=1e-12)


@settings(max_examples=examples(200), deadline=None)
@given(
    batch=st.integers(1, 511),
    context=st.integers(1, 20_000),
    gpus=st.sampled_from([1, 2, 4, 8]),
)
def test_decode_ceiling_grows_with_batch_and_falls_with_context(batch, context, gpus):
    model = L8
    ceiling = decode_tokens_per_s_max(model, H200, gpus, batch, context)
    assert decode_tokens_per_s_max(model, H200, gpus, batch + 1, context) >= ceiling * (1 - 1e-12)
    assert decode_tokens_per_s_max(model, H200, gpus, batch, context + 1) <= ceiling * (1 + 1e-12)


# ------------------------------------------------------------------ closed-form batch timing


def _run(batch: int, context: int, base_scale: float) -> BatchRun:
    weight, per_token, per_request = 0.0075 * base_scale, 1.75e-8, 3.6e-5
    return BatchRun(
        start=3.0,
        batch=batch,
        context=context,
        base=weight + per_token * context,
        slope=per_token * batch,
        floor=per_request * batch,
    )


@settings(max_examples=examples(200), deadline=None)
@given(
    batch=st.integers(1, 512),
    context_each=st.integers(1, 30_000),
    base_scale=st.floats(0.01, 3.0),
    k=st.integers(0, 600),
)
def test_elapsed_is_the_sum_of_the_steps(batch, context_each, base_scale, k):
    run = _run(batch, batch * context_each, base_scale)
    assert run.elapsed(k) == pytest.approx(math.fsum(run.step(i) for i in range(k)), rel=1e-9, abs=1e-15)


@settings(max_examples=examples(200), deadline=None)
@given(
    batch=st.integers(1, 512),
    context_each=st.integers(1, 30_000),
    base_scale=st.floats(0.01, 3.0),
    limit=st.integers(1, 400),
    fraction=st.floats(0, 1.2),
)
def test_boundaries_found_by_search_agree_with_the_series(batch, context_each, base_scale, limit, fraction):
    run = _run(batch, batch * context_each, base_scale)
    t = run.start + fraction * run.elapsed(limit)
    done = run.done_by(t, limit)
    assert 0 <= done <= limit
    assert done == 0 or run.boundary(done) <= t
    assert done == limit or run.boundary(done + 1) > t
    first = run.first_boundary_from(t, limit)
    assert 1 <= first <= limit
    assert first == limit or run.boundary(first) >= t
    assert first == 1 or run.boundary(first - 1) < t
