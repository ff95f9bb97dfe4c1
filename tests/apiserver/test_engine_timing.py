"""The engine stand-ins' timing: tandem's serving model, as pure functions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from tandem.apiserver.engines import timing
from tandem.sim.serving import gpu_profile, model_profile, roofline

H100 = gpu_profile("h100-sxm")
LLAMA_8B = model_profile("llama-3.1-8b")


def test_the_stand_in_takes_what_tandem_profile_predict_prints():
    cost = timing.timing(LLAMA_8B, H100, 1)
    assert timing.prefill_seconds(cost, [512]) == roofline.prefill_seconds(LLAMA_8B, H100, roofline.Parallel(1), 512, [512])
    assert timing.decode_step_seconds(cost, 4, 4 * 600) == roofline.decode_step_seconds(LLAMA_8B, H100, roofline.Parallel(1), 4, 2400)
    assert timing.kv_capacity_tokens(cost) == roofline.kv_capacity_tokens(LLAMA_8B, H100, roofline.Parallel(1))


def test_ready_after_the_model_s_cold_start():
    """Llama 3.1 8B: 16 GB at 2 GB/s plus a 30 s engine start (docs/serving.md, Cold start)."""
    assert timing.load_seconds(timing.timing(LLAMA_8B, H100, 1)) == pytest.approx(38.03, abs=0.01)
    assert timing.load_seconds(timing.timing(LLAMA_8B, H100, 1), pods_per_replica=2) == pytest.approx(34.02, abs=0.01), "each node loads half"


def test_a_model_too_big_for_its_gpus_is_spread_over_more():
    cost = timing.timing(model_profile("llama-3.1-70b"), H100, 1)
    assert cost.parallel is not None and cost.parallel.tp == 2 and cost.profiled


def test_an_engine_without_a_profile_gets_the_fixed_timing():
    cost = timing.timing(None, H100, 1)
    assert not cost.profiled
    assert timing.load_seconds(cost) == timing.FIXED_LOAD_SECONDS
    assert timing.prefill_seconds(cost, [100]) == pytest.approx(timing.FIXED_PREFILL_SECONDS + 100 * timing.FIXED_PREFILL_SECONDS_PER_TOKEN)
    assert timing.kv_capacity_tokens(cost) == timing.FIXED_KV_CAPACITY_TOKENS


@pytest.mark.parametrize(("body", "tokens"), [
    ({"input_ids": [1, 2, 3, 4]}, 4),
    ({"input_ids": [[1, 2], [3]]}, 2),
    ({"text": "a b  c\nd"}, 4),
    ({"prompt": "one two"}, 2),
    ({"prompt": ["one two three"]}, 3),
    ({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": "hi there"}]}]}, 4),
    ({}, 1),
])
def test_prompt_tokens_are_input_ids_or_whitespace_pieces(body, tokens):
    assert timing.prompt_tokens(body) == tokens


@pytest.mark.parametrize(("body", "tokens"), [
    ({"sampling_params": {"max_new_tokens": 7}}, 7),
    ({"max_tokens": 5}, 5),
    ({"max_completion_tokens": 3, "max_tokens": 9}, 3),
    ({}, timing.DEFAULT_MAX_NEW_TOKENS),
    ({"max_tokens": 0}, 1),
])
def test_tokens_to_generate(body, tokens):
    assert timing.max_new_tokens(body) == tokens


@settings(max_examples=examples(100))
@given(st.lists(st.integers(1, 20_000), max_size=30), st.integers(1, 16_384))
def test_a_prefill_iteration_takes_whole_prompts_first_come_within_the_budget(waiting, budget):
    taken = timing.prefill_batch(waiting, budget)
    assert taken == 0 if not waiting else taken >= 1
    assert taken == 1 or sum(waiting[:taken]) <= budget
    if taken < len(waiting) and taken:
        assert sum(waiting[: taken + 1]) > budget, "a prompt that fits is not left waiting"


@settings(max_examples=examples(100))
@given(st.integers(-10, 10**7), st.integers(0, 10**7))
def test_token_usage_is_a_fraction(held, capacity):
    assert 0.0 <= timing.token_usage(held, capacity) <= 1.0


@settings(max_examples=examples(100))
@given(st.integers(1, 255), st.integers(1, 4096))
def test_a_bigger_decode_batch_takes_no_less_per_step_and_no_more_per_token(batch, context):
    cost = timing.timing(LLAMA_8B, H100, 1)
    one, more = timing.decode_step_seconds(cost, batch, batch * context), timing.decode_step_seconds(cost, batch + 1, (batch + 1) * context)
    assert more >= one and more / (batch + 1) <= one / batch + 1e-12
