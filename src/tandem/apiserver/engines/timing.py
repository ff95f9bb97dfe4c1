"""How long an engine stand-in takes for its work: tandem's serving model, as pure functions.

The same roofline `tandem profile predict` prints (`tandem.sim.serving.roofline`): a prefill
batch takes `prefill_seconds` of its prompts, a decode iteration `decode_step_seconds` at
the batch size and the KV the batch reads, an engine is ready after the model's cold start
(`tandem.sim.serving.cold_start`). An engine whose model has no bundled profile gets the
fixed timing below. Every duration the stand-in waits is multiplied by the time scale
(`tandem apiserver --engine-time-scale`), nothing else changes with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from tandem.errors import InputError
from tandem.sim.serving import roofline
from tandem.sim.serving.cold_start import load_seconds as cold_start_seconds
from tandem.sim.serving.profiles import GpuProfile, ModelProfile

# Fixed timing of an engine whose model has no profile: a small model's figures, round.
FIXED_LOAD_SECONDS = 10.0
FIXED_PREFILL_SECONDS = 0.01  # per batch
FIXED_PREFILL_SECONDS_PER_TOKEN = 5e-5
FIXED_DECODE_STEP_SECONDS = 0.01  # per iteration
FIXED_DECODE_SECONDS_PER_CONTEXT_TOKEN = 1e-8
FIXED_KV_CAPACITY_TOKENS = 200_000
MAX_BATCHED_TOKENS = 8192  # prompt tokens prefilled in one iteration (SGLang's and vLLM's defaults are near)
DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's default max_new_tokens
TENSOR_PARALLEL_TRIES = (1, 2, 4, 8)


@dataclass(frozen=True)
class Timing:
    """One engine's cost model: its model and GPU profiles (model None: the fixed timing)
    and the GPUs it spreads over."""

    model: ModelProfile | None
    gpu: GpuProfile
    parallel: roofline.Parallel | None

    @property
    def profiled(self) -> bool:
        return self.model is not None and self.parallel is not None


def timing(model: ModelProfile | None, gpu: GpuProfile, tp: int, pp: int = 1) -> Timing:
    """The cost model of `model` on `tp` GPUs in each of `pp` pipeline stages, as `tandem
    profile predict --tp --pp` figures it; a model that does not fit there is spread over
    the next power of two of `tp` that holds it (a stand-in serves; the placement is the
    operator's concern); one that fits nowhere gets the fixed timing."""
    if model is None:
        return Timing(None, gpu, None)
    for degree in sorted({max(tp, 1), *(t for t in TENSOR_PARALLEL_TRIES if t > tp)}):
        try:
            parallel = roofline.layout(model, gpu, roofline.Parallel(degree, max(pp, 1)))
            roofline.kv_capacity_tokens(model, gpu, parallel)
        except InputError:
            continue
        return Timing(model, gpu, parallel)
    return Timing(None, gpu, None)


def load_seconds(cost: Timing, pods_per_replica: int = 1) -> float:
    """From the engine's start to its serving: the model's cold start, each node of a
    replica of `pods_per_replica` loading its share of the weights."""
    return cold_start_seconds(cost.model, pods_per_replica) if cost.model is not None else FIXED_LOAD_SECONDS


def prefill_seconds(cost: Timing, prompt_lengths: Sequence[int]) -> float:
    """One prefill iteration of these whole prompts."""
    tokens = sum(prompt_lengths)
    if cost.model is None or cost.parallel is None:
        return FIXED_PREFILL_SECONDS + FIXED_PREFILL_SECONDS_PER_TOKEN * tokens
    return roofline.prefill_seconds(cost.model, cost.gpu, cost.parallel, tokens, list(prompt_lengths))


def decode_step_seconds(cost: Timing, batch: int, context_tokens: int) -> float:
    """One decode iteration: a token for each of `batch` requests reading `context_tokens` of KV."""
    if cost.model is None or cost.parallel is None:
        return FIXED_DECODE_STEP_SECONDS + FIXED_DECODE_SECONDS_PER_CONTEXT_TOKEN * context_tokens
    return roofline.decode_step_seconds(cost.model, cost.gpu, cost.parallel, batch, context_tokens)


def kv_capacity_tokens(cost: Timing) -> int:
    if cost.model is None or cost.parallel is None:
        return FIXED_KV_CAPACITY_TOKENS
    return roofline.kv_capacity_tokens(cost.model, cost.gpu, cost.parallel)


def token_usage(held_tokens: int, capacity: int) -> float:
    """The KV cache's fill, 0..1 (SGLang's token_usage, vLLM's kv_cache_usage_perc)."""
    return min(max(held_tokens, 0) / capacity, 1.0) if capacity > 0 else 0.0


def prefill_batch(waiting: Sequence[int], budget: int = MAX_BATCHED_TOKENS) -> int:
    """How many of the waiting prompts (lengths, first come first) one prefill iteration
    takes: whole prompts while they fit `budget` tokens, and always the first."""
    taken, tokens = 0, 0
    for length in waiting:
        if taken and tokens + length > budget:
            break
        taken, tokens = taken + 1, tokens + length
    return taken


def prompt_tokens(body: Mapping[str, Any]) -> int:
    """A request's prompt length in tokens: `input_ids`' length when given, else the
    whitespace-separated pieces of its text (`text`, `prompt`, or the chat messages'
    contents): a word for a token, no tokenizer. At least 1."""
    ids = body.get("input_ids")
    if isinstance(ids, list) and ids:
        first = ids[0]
        return max(len(first) if isinstance(first, list) else len(ids), 1)
    text = body.get("text", body.get("prompt"))
    if isinstance(text, list):
        text = text[0] if text and isinstance(text[0], str) else " ".join(str(t) for t in text)
    if text is None and isinstance(body.get("messages"), list):
        text = " ".join(_content(m.get("content")) for m in body["messages"] if isinstance(m, Mapping))
    return max(len(str(text or "").split()), 1)


def max_new_tokens(body: Mapping[str, Any]) -> int:
    """Tokens to generate: SGLang's `sampling_params.max_new_tokens`, OpenAI's `max_tokens`
    or `max_completion_tokens`; at least 1."""
    sampling = body.get("sampling_params")
    for value in ((sampling or {}).get("max_new_tokens") if isinstance(sampling, Mapping) else None,
                  body.get("max_new_tokens"), body.get("max_completion_tokens"), body.get("max_tokens")):
        if isinstance(value, int) and not isinstance(value, bool):
            return max(value, 1)
    return DEFAULT_MAX_NEW_TOKENS


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""
