"""Roofline formulas, profile data files and the closed-form decode batch timing.

Expected values are written out from the formulas in docs/serving.md with the profile
numbers, not through the functions under test; properties check what must hold whatever
the numbers (monotone costs, a never-free all-reduce, MoE active < total).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from support.fuzz import examples
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
from tandem.sim.serving.profiles import GIB
from tandem.sim.serving.roofline import (
    Parallel,
    all_reduce_seconds,
    decode_step_parts,
    experts_touched,
    kv_transfer_gbps,
    layout,
    prefill_flops,
    smooth_max,
    weight_read_seconds,
)

L70, L8 = model_profile("llama-3.1-70b"), model_profile("llama-3.1-8b")
M7, M22 = model_profile("mixtral-8x7b"), model_profile("mixtral-8x22b")
H100, H200 = gpu_profile("h100-sxm"), gpu_profile("h200-sxm")
DATA = Path(__file__).resolve().parents[2] / "src" / "tandem" / "sim" / "serving" / "data"


# ------------------------------------------------------------------ profiles


def test_shipped_profiles_are_listed_and_load():
    assert MODEL_NAMES == ("llama-3.1-70b", "llama-3.1-8b", "mixtral-8x22b", "mixtral-8x7b")
    assert GPU_NAMES == ("h100-sxm", "h200-sxm")
    assert (L70.layers, L70.hidden_size, L70.attention_heads, L70.kv_heads, L70.head_dim) == (80, 8192, 64, 8, 128)
    assert (L8.layers, L8.hidden_size, L8.attention_heads, L8.kv_heads, L8.head_dim) == (32, 4096, 32, 8, 128)
    assert (M22.layers, M22.hidden_size, M22.experts, M22.experts_per_token, M22.intermediate_size) == (56, 6144, 8, 2, 16384)
    assert (H100.peak_tflops, H100.hbm_bandwidth_tbps, H100.hbm_gib, H100.nic_gbps) == (989.4, 3.35, 80, 400)
    assert (H200.peak_tflops, H200.hbm_bandwidth_tbps, H200.hbm_gib) == (989.4, 4.8, 141)
    assert H100.hbm_bytes == 80 * 2**30  # real bytes: "80 GB" of HBM is 80 GiB
    for profile in (L70, L8, M7, M22, H100, H200):
        assert profile.source.strip()


def test_every_number_of_a_shipped_gpu_profile_says_where_it_came_from():
    for name in GPU_NAMES:
        lines = (DATA / "gpus" / f"{name}.yaml").read_text().splitlines()
        fields = [line for line in lines if line and not line.startswith((" ", "#")) and ":" in line]
        for line in fields:
            key = line.split(":")[0]
            if key in ("name", "source"):
                continue
            assert "#" in line, f"{name}.yaml: {key} has no comment saying where it came from"


@pytest.mark.parametrize("model", [L70, L8, M7, M22], ids=lambda m: m.name)
def test_params_match_the_architecture_of_the_config(model):
    """Llama and Mixtral: untied embeddings and LM head, q/k/v/o, SwiGLU MLP (or E of them
    and a router), two norms per layer, final norm."""
    h, kv_width = model.hidden_size, model.kv_heads * model.head_dim
    mlp = model.experts * 3 * h * model.intermediate_size + (h * model.experts if model.experts > 1 else 0)
    per_layer = h * model.attention_width + 2 * h * kv_width + model.attention_width * h + mlp + 2 * h
    assert model.params == 2 * model.vocab_size * h + model.layers * per_layer + h
    assert model.attention_width == h  # head_dim = hidden_size / attention heads in all four


def test_moe_active_params_are_what_the_model_cards_state():
    assert M22.params == 140_620_634_112 and M22.active_params == 39_152_031_744  # "141B total, 39B active"
    assert M7.params == 46_702_792_704 and M7.active_params == 12_879_925_248  # "46.7B total, 12.9B active"
    assert L70.active_params == L70.params  # dense


@settings(max_examples=examples(100), deadline=None)
@given(experts=st.integers(2, 256), data=st.data())
def test_moe_active_is_less_than_total(experts, data):
    top_k = data.draw(st.integers(1, experts - 1))
    raw = _model_fields() | {"experts": experts, "expertsPerToken": top_k}
    raw["params"] = _implied(raw)
    model = model_profile_from(raw)
    assert model.active_params < model.params
    assert experts_touched(model, 1) == pytest.approx(top_k)
    assert experts_touched(model, 10**6) == pytest.approx(experts)


def _model_fields() -> dict:
    return {
        "name": "m", "source": "s", "layers": 4, "hiddenSize": 256, "attentionHeads": 8, "kvHeads": 2, "headDim": 32,
        "intermediateSize": 512, "vocabSize": 1000, "weightBytesPerParam": 2, "kvBytesPerValue": 2,
    }


def _implied(raw: dict) -> int:
    h, e = raw["hiddenSize"], raw.get("experts", 1)
    attention = 2 * h * raw["attentionHeads"] * raw["headDim"] + 2 * h * raw["kvHeads"] * raw["headDim"]
    mlp = e * 3 * h * raw["intermediateSize"] + (h * e if e > 1 else 0)
    return raw["layers"] * (attention + mlp + 2 * h) + 2 * raw["vocabSize"] * h + h


def model_profile_from(raw: dict, tmp: Path | None = None):
    from tandem.sim.serving import ModelProfile, parse_profile

    return parse_profile(ModelProfile, "model.yaml", yaml.safe_dump(raw))


def test_profiles_load_from_a_path(tmp_path: Path):
    raw = yaml.safe_load((DATA / "gpus" / "h100-sxm.yaml").read_text())
    raw |= {"name": "tiny", "peakTflops": 10, "hbmBandwidthTBps": 1, "hbmGiB": 8, "mfu": 1, "mbu": 1}
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump(raw))
    gpu = gpu_profile(path)
    assert gpu.flops == 10e12 and gpu.bytes_per_s == 1e12 and gpu.hbm_bytes == 8 * 2**30


@pytest.mark.parametrize(
    ("key", "value", "where", "message"),
    [
        ("mbu", "1.5", "mbu", "less than or equal to 1"),
        ("mfu", "0", "mfu", "greater than 0"),
        ("hbmGiB", "-80", "hbmGiB", "greater than 0"),
        ("peakTflops", "fast", "peakTflops", "valid number"),
        ("hbmCapacityGB", "80", "hbmCapacityGB", "unknown field"),
        ("allReduceEfficiency", "{}", "allReduceEfficiency", "at least one"),
        ("ridgeExponent", "0.5", "ridgeExponent", "greater than or equal to 1"),
    ],
)
def test_a_bad_gpu_file_names_the_field(tmp_path: Path, key: str, value: str, where: str, message: str):
    raw = yaml.safe_load((DATA / "gpus" / "h100-sxm.yaml").read_text())
    raw[key] = yaml.safe_load(value)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(InputError) as caught:
        gpu_profile(path)
    assert str(caught.value).startswith(f"{path}: {where}: ")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_bad_model_file_says_what_and_where(tmp_path: Path):
    path = tmp_path / "model.yaml"
    raw = _model_fields() | {"kvHeads": 3}
    raw["params"] = _implied(raw)
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(InputError) as caught:
        model_profile(path)
    assert str(caught.value) == f"{path}: kvHeads: must divide attentionHeads (8), got 3"
    path.write_text("name: m\nsource: s\n")
    with pytest.raises(InputError) as caught:
        model_profile(path)
    assert f"{path}: layers: required field is missing" in str(caught.value)
    raw = _model_fields() | {"experts": 4, "expertsPerToken": 5, "params": 1}
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(InputError, match="expertsPerToken: must be at most experts \\(4\\)"):
        model_profile(path)
    path.write_text("name: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        model_profile(path)


def test_a_model_the_profile_cannot_describe_is_refused_on_one_line(tmp_path: Path):
    """DeepSeek-V3's shapes in Mixtral's fields: 256 routed experts of 2,048, but also a
    shared expert, latent attention and dense first layers the profile has no field for,
    so its 671B do not add up."""
    raw = {
        "name": "deepseek-v3", "source": "huggingface.co/deepseek-ai/DeepSeek-V3 config.json", "layers": 61,
        "hiddenSize": 7168, "attentionHeads": 128, "kvHeads": 128, "headDim": 128, "intermediateSize": 2048,
        "vocabSize": 129280, "experts": 256, "expertsPerToken": 8, "params": 671_000_000_000,
        "weightBytesPerParam": 1, "kvBytesPerValue": 1,
    }
    path = tmp_path / "deepseek.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(InputError) as caught:
        model_profile(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: params: the shapes describe ")
    assert "cannot describe this model" in message and "\n" not in message


def test_an_unknown_name_lists_the_shipped_ones():
    with pytest.raises(InputError, match="unknown model 'llama-9'.*llama-3.1-70b, llama-3.1-8b"):
        model_profile("llama-9")
    with pytest.raises(InputError, match="unknown GPU 'b200'.*h100-sxm, h200-sxm"):
        gpu_profile("b200")


# ------------------------------------------------------------------ layout


def test_a_gpu_count_is_tensor_parallel_within_a_node_and_pipelined_across_nodes():
    assert layout(L70, H100, 8) == Parallel(8, 1)
    assert layout(L70, H100, 16) == Parallel(8, 2)  # the demo's decode replicas: leader + worker
    assert layout(L70, H100, 12) == Parallel(4, 3)  # 64 heads: TP 6 would not divide them
    assert layout(M22, H100, 32) == Parallel(8, 4)  # examples/mixtral.yaml's decode replicas
    with pytest.raises(InputError, match="tp: 16 is more than the 8 GPUs of one h100-sxm node"):
        layout(L70, H100, Parallel(16))
    with pytest.raises(InputError, match="tp: 3 does not divide the 64 attention heads"):
        layout(L70, H100, Parallel(3))
    with pytest.raises(InputError, match="pp: 81 stages for the 80 layers"):
        layout(L70, H100, Parallel(1, 81))
    with pytest.raises(InputError, match="expert_parallel: llama-3.1-70b has no experts"):
        layout(L70, H100, Parallel(8, 1, expert_parallel=True))


# ------------------------------------------------------------------ formulas, written out


def test_kv_bytes_per_token():
    assert kv_bytes_per_token(L70) == 327_680 == 2 * 80 * 8 * 128 * 2
    assert kv_bytes_per_token(L8) == 2 * 32 * 8 * 128 * 2 == 131_072


def test_smooth_max_has_no_corner_at_the_ridge():
    p = H100.ridge_exponent
    assert smooth_max(1.0, 1.0, p) == pytest.approx(2 ** (1 / p))  # at the ridge: neither bound alone
    assert smooth_max(1.0, 1e-6, p) == pytest.approx(1.0, rel=1e-9)  # far from it: the roofline
    assert smooth_max(0.0, 0.0, p) == 0.0
    # the slope changes smoothly across the ridge: no jump in the derivative
    h = 1e-6
    left = (smooth_max(1.0, 1.0, p) - smooth_max(1.0 - h, 1.0, p)) / h
    right = (smooth_max(1.0 + h, 1.0, p) - smooth_max(1.0, 1.0, p)) / h
    assert left == pytest.approx(right, rel=1e-4)


def test_all_reduce_of_the_profile():
    message = 1024 * 8192 * 2  # 1,024 tokens of llama-3.1-70b activations, bf16
    expected = H100.all_reduce_latency_us * 1e-6 + 2 * 7 / 8 * message / (450e9 * H100.all_reduce_efficiency[8])
    assert all_reduce_seconds(H100, 8, message) == pytest.approx(expected, rel=1e-12)
    assert all_reduce_seconds(H100, 1, message) == 0.0


@settings(max_examples=examples(200), deadline=None)
@given(tp=st.integers(2, 64), message=st.floats(0, 1e10), more=st.floats(0, 1e9))
def test_tensor_parallelism_never_makes_the_all_reduce_free(tp, message, more):
    for gpu in (H100, H200):
        seconds = all_reduce_seconds(gpu, tp, message)
        assert seconds >= gpu.all_reduce_latency_us * 1e-6 > 0
        assert all_reduce_seconds(gpu, tp, message + more) >= seconds


def test_prefill_of_the_documented_formula():
    """llama-3.1-8b, one 1,024-token prompt on one h100-sxm, every term of docs/serving.md by hand."""
    g, t = H100, 1024
    flops, hbm = 989.4e12 * g.mfu, 3.35e12 * g.mbu
    p = g.ridge_exponent
    layer_params = (2 * 4096 * 4096 + 2 * 4096 * 1024) + 3 * 4096 * 14336  # q/o, k/v; the SwiGLU MLP
    gemm = smooth_max(2 * t * layer_params / flops, layer_params * 2 / hbm, p)
    attention = 2 * 4096 * t**2 / (989.4e12 * g.attention_efficiency)
    pointwise = t * (8 * 4096 + 3 * 14336) * 2 / hbm
    overhead = (g.layer_overhead_us + g.prefill_layer_overhead_us) * 1e-6
    lm_head = smooth_max(2 * 1 * 128256 * 4096 / flops, 128256 * 4096 * 2 / hbm, p)
    expected = 32 * (gemm + attention + pointwise + overhead) + lm_head + g.iteration_overhead_us * 1e-6
    assert prefill_seconds(L8, H100, 1, t) == pytest.approx(expected, rel=1e-12)
    # a batch of prompts pays attention per prompt, so it is cheaper than one prompt of the sum
    assert prefill_seconds(L70, H100, 8, 4000, [1000] * 4) < prefill_seconds(L70, H100, 8, 4000)
    with pytest.raises(ValueError):
        prefill_seconds(L70, H100, 8, 4000, [1000])


def test_prefill_flops_leave_out_embeddings_and_charge_the_lm_head_once_per_prompt():
    layer_params = (2 * 4096 * 4096 + 2 * 4096 * 1024) + 3 * 4096 * 14336
    one = prefill_flops(L8, [1])
    assert one == 2 * 32 * layer_params + 2 * 128256 * 4096 + 2 * 32 * 4096
    # a longer prompt adds its tokens' GEMMs and attention, not another LM head
    assert prefill_flops(L8, [1000]) == 2 * 32 * layer_params * 1000 + 2 * 128256 * 4096 + 2 * 32 * 4096 * 1000**2
    assert prefill_flops(L8, [500, 500]) - prefill_flops(L8, [1000]) == 2 * 128256 * 4096 - 2 * 32 * 4096 * (1000**2 - 2 * 500**2)


def test_decode_step_of_the_documented_formula():
    """llama-3.1-70b, 8 x h100-sxm, one request with 1,001 tokens of context, by hand."""
    g, tp = H100, 8
    flops, hbm = 989.4e12 * g.mfu, 3.35e12 * g.mbu
    p = g.ridge_exponent
    layer_params = (2 * 8192 * 8192 + 2 * 8192 * 1024) + 3 * 8192 * 28672
    gemm = smooth_max(2 * layer_params / (tp * flops), layer_params * 2 / (tp * hbm), p)
    pointwise = (8 * 8192 + 3 * 28672 / tp) * 2 / hbm
    message = 8192 * 2
    all_reduce = g.all_reduce_latency_us * 1e-6 + 2 * 7 / 8 * message / (450e9 * g.all_reduce_efficiency[8])
    per_layer = gemm + pointwise + 2 * all_reduce + g.layer_overhead_us * 1e-6
    lm_head = smooth_max(2 * 128256 * 8192 / (tp * flops), 128256 * 8192 * 2 / (tp * hbm), p)
    fixed = 80 * per_layer + lm_head + g.iteration_overhead_us * 1e-6
    per_token = 80 * max(2 * 1 * 128 * 2 / hbm, 4 * 8 * 128 / (989.4e12 * g.attention_efficiency))  # one KV head per GPU
    assert decode_step_parts(L70, H100, 8, 1) == pytest.approx((fixed, per_token), rel=1e-12)
    assert decode_step_seconds(L70, H100, 8, 1, 1001) == pytest.approx(fixed + per_token * 1001, rel=1e-12)
    # the floor of a decode step is at least the weight read (embeddings left out)
    assert fixed > weight_read_seconds(L70, H100, 8) == pytest.approx((L70.params - 128256 * 8192 - 80 * 2 * 8192 - 8192) * 2 / (8 * hbm))


def test_pipeline_stages_leave_a_bubble_for_small_batches():
    """With fewer requests than stages the other stages idle: a step of 16 GPUs as 8 x 2
    is no faster than 8 GPUs at batch 1; with a full pipeline the weights are read once
    per micro-batch, so a step matches TP 8's at half the batch, per micro-batch."""
    one_stage = decode_step_seconds(L70, H100, Parallel(8), 1, 1000)
    two_stages = decode_step_seconds(L70, H100, Parallel(8, 2), 1, 1000)
    assert two_stages > one_stage
    fixed, per_token = decode_step_parts(L70, H100, Parallel(8, 2), 64)
    fixed_tp, per_token_tp = decode_step_parts(L70, H100, Parallel(8), 32)
    assert per_token == pytest.approx(per_token_tp / 2)  # each micro-batch reads half the batch's KV
    assert fixed > fixed_tp  # every micro-batch pays the layers' fixed costs; plus the hops
    assert kv_capacity_tokens(L70, H100, 16) > 2 * kv_capacity_tokens(L70, H100, 8)  # each stage holds half the weights


def test_moe_decode_reads_only_the_experts_its_tokens_use():
    tp = Parallel(8)
    # batch 1 touches 2 of 8 experts per layer; a large batch all of them
    one = decode_step_parts(M22, H100, tp, 1)[0]
    many = decode_step_parts(M22, H100, tp, 256)[0]
    assert many > 2 * one
    read = M22.layers * (M22.attention_params + 2 * M22.expert_params + M22.router_params) + M22.lm_head_params
    assert weight_read_seconds(M22, H100, tp) == pytest.approx(read * 2 / (8 * H100.bytes_per_s))
    assert weight_read_seconds(M22, H100, tp) < 0.35 * M22.weight_bytes / (8 * H100.bytes_per_s)
    # a dense model of the same total size reads everything every step
    assert prefill_seconds(M22, H100, tp, 4096) < prefill_seconds(L70, H100, tp, 4096) * (M22.params / L70.params)
    # expert parallelism trades the MLP all-reduce for two all-to-alls: a different, never free, cost
    ep = Parallel(8, 1, expert_parallel=True)
    assert decode_step_parts(M22, H100, ep, 64)[0] != decode_step_parts(M22, H100, tp, 64)[0]


def test_kv_transfer_streams_behind_the_prefill():
    size = 1000 * 327_680 * 8 / 400e9
    assert kv_transfer_seconds(L70, 1000, 400) == pytest.approx(size, rel=1e-12)
    assert kv_transfer_seconds(L70, 1000, 100) == pytest.approx(4 * size, rel=1e-12)
    # behind a long prefill only the last layer's share is left; behind a short one what the link could not keep up with
    assert kv_transfer_seconds(L70, 1000, 400, latency_s=4e-4, overlap_s=1.0) == pytest.approx(4e-4 + size / 80, rel=1e-12)
    assert kv_transfer_seconds(L70, 1000, 400, overlap_s=0.001) == pytest.approx(size - 0.001 * 79 / 80, rel=1e-12)


@settings(max_examples=examples(200), deadline=None)
@given(tokens=st.integers(1, 100_000), gbps=st.floats(1, 10_000), a=st.floats(0, 10), b=st.floats(0, 10))
def test_more_overlap_never_makes_a_transfer_longer(tokens, gbps, a, b):
    low, high = sorted((a, b))
    assert kv_transfer_seconds(L70, tokens, gbps, overlap_s=high) <= kv_transfer_seconds(L70, tokens, gbps, overlap_s=low)


def test_kv_transfer_bandwidth_is_ranks_times_nics_capped_by_the_shared_link():
    nic = 400 * H100.nic_efficiency
    assert kv_transfer_gbps(H100, 8, 7200.0) == pytest.approx(8 * nic)  # the NICs bind
    assert kv_transfer_gbps(H100, 8, 400.0) == 400.0  # the link binds
    assert kv_transfer_gbps(H100, 8, 400.0, sharing=4) == 100.0  # a fair share of a shared uplink
    assert kv_transfer_gbps(H100, 1, 7200.0) == pytest.approx(nic)
    assert kv_transfer_gbps(H100, 1, 7200.0, same_node=True) == 7200.0  # within a node: NVLink, no NIC


def test_kv_capacity_and_models_that_do_not_fit():
    # per GPU: 80 GiB x 0.9 - weights / 8 - activations - reserved - NCCL buffers, over 40,960 bytes per token
    activations = 2 * 8192 * 8192 * (4 + 6 / 8)
    free = 80 * GIB * 0.9 - 70553706496 * 2 / 8 - activations - 3.5 * GIB - 0.38 * GIB
    assert kv_capacity_tokens(L70, H100, 8) == math.floor(free / (2 * 80 * 1 * 128 * 2))
    # aiconfigurator 0.12.0's estimate for llama-3.1-8b on one h100_sxm with vLLM: 432,992 tokens
    assert kv_capacity_tokens(L8, H100, 1) == pytest.approx(432_992, rel=0.01)
    with pytest.raises(InputError, match="llama-3.1-70b does not fit on 1 x h100-sxm \\(tp 1, pp 1\\): each GPU needs 131.4 GiB"):
        kv_capacity_tokens(L70, H100, 1)
    assert decode_batch_limit(L70, H100, 8, 500, 256) == 256
    assert decode_batch_limit(L70, H100, 8, 100_000, 256) == kv_capacity_tokens(L70, H100, 8) // 100_000


def test_throughput_ceilings():
    seconds = prefill_seconds(L70, H100, 8, 8000, [2000] * 4)  # four 2,000-token prompts fill an 8,192-token batch
    assert prefill_tokens_per_s_max(L70, H100, 8, 2000, 8192) == pytest.approx(8000 / seconds, rel=1e-12)
    assert prefill_tokens_per_s_max(L70, H100, 8, 10_000, 8192) == pytest.approx(10_000 / prefill_seconds(L70, H100, 8, 10_000))
    assert decode_tokens_per_s_max(L70, H100, 8, 256, 101) == pytest.approx(256 / decode_step_seconds(L70, H100, 8, 256, 256 * 101))


# ------------------------------------------------------------------ properties

MODELS = st.sampled_from([L8, L70, M7, M22])
GPUS = st.sampled_from([H100, H200])
REPLICAS = st.sampled_from([Parallel(1), Parallel(2), Parallel(4), Parallel(8), Parallel(8, 2), Parallel(4, 3)])


@settings(max_examples=examples(200), deadline=None)
@given(model=MODELS, gpu=GPUS, parallel=REPLICAS, lengths=st.lists(st.integers(1, 20_000), min_size=1, max_size=8),
       longer=st.integers(1, 5000), extra=st.integers(1, 20_000))
def test_prefill_time_is_monotone_in_prompt_length_and_batch(model, gpu, parallel, lengths, longer, extra):
    base = prefill_seconds(model, gpu, parallel, sum(lengths), lengths)
    grown = lengths[:-1] + [lengths[-1] + longer]
    assert prefill_seconds(model, gpu, parallel, sum(grown), grown) >= base
    assert prefill_seconds(model, gpu, parallel, sum(lengths) + extra, lengths + [extra]) >= base
    assert base >= (model.layers * (gpu.layer_overhead_us + gpu.prefill_layer_overhead_us) + gpu.iteration_overhead_us) * 1e-6


@settings(max_examples=examples(200), deadline=None)
@given(model=MODELS, gpu=GPUS, parallel=REPLICAS, batch=st.integers(1, 511), context=st.integers(1, 20_000))
def test_decode_step_is_monotone_in_batch_and_context(model, gpu, parallel, batch, context):
    step = decode_step_seconds(model, gpu, parallel, batch, batch * context)
    assert decode_step_seconds(model, gpu, parallel, batch, batch * context + 1) > step
    assert decode_step_seconds(model, gpu, parallel, batch + 1, (batch + 1) * context) >= step * (1 - 1e-12)


@settings(max_examples=examples(200), deadline=None)
@given(batch=st.integers(1, 511), context=st.integers(1, 20_000), gpus=st.sampled_from([1, 2, 4, 8]))
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
