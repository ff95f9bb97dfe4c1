"""The roofline's figures for one model on one GPU, remembered where they recur."""

from __future__ import annotations

from tandem.sim.serving import roofline
from tandem.sim.serving.profiles import GpuProfile, ModelProfile


class EngineCosts:
    """Seconds of the engine's work on a replica of a given number of GPUs."""

    def __init__(self, model: ModelProfile, gpu: GpuProfile, swap_gbps: float) -> None:
        self.model = model
        self.gpu = gpu
        self.kv_bytes = roofline.kv_bytes_per_token(model)
        self.swap_gbps = swap_gbps
        self._layouts: dict[int, roofline.Parallel] = {}  # gpus -> roofline.layout
        self._prefill: dict[tuple[int, int, int, float], float] = {}  # (gpus, tokens, prompts, squares) -> seconds
        self._decode_parts: dict[tuple[int, int], tuple[float, float]] = {}  # (gpus, batch) -> roofline.decode_step_parts

    def layout(self, gpus: int) -> roofline.Parallel:
        """`roofline.layout` of a replica of `gpus` GPUs, remembered (it searches the divisors)."""
        parallel = self._layouts.get(gpus)
        if parallel is None:
            parallel = self._layouts[gpus] = roofline.layout(self.model, self.gpu, gpus)
        return parallel

    def prefill_batch_seconds(self, gpus: int, lengths: list[int], squares: float) -> float:
        """`roofline.prefill_seconds` of a batch of `lengths` tokens (prompts or chunks),
        remembered: it depends on the batch only through its token count, its number of
        prompts and `squares`, and batches of one prompt of a given length recur."""
        tokens = sum(lengths)
        key = (gpus, tokens, len(lengths), squares)
        seconds = self._prefill.get(key)
        if seconds is None:
            seconds = roofline.prefill_seconds(self.model, self.gpu, self.layout(gpus), tokens, lengths, attention_squares=squares)
            self._prefill[key] = seconds
        return seconds

    def recompute_seconds(self, gpus: int, context: int) -> float:
        """A preempted sequence's lost KV computed again on its decode replica: a prefill of
        `context` tokens (the prompt and the tokens so far)."""
        return roofline.prefill_seconds(self.model, self.gpu, self.layout(gpus), context)

    def decode_step_parts(self, gpus: int, batch: int) -> tuple[float, float]:
        """(fixed, per_token): a decode iteration of `batch` sequences reading `context` KV
        tokens takes fixed + per_token x context (`roofline.decode_step_parts`)."""
        key = (gpus, batch)
        parts = self._decode_parts.get(key)
        if parts is None:
            parts = self._decode_parts[key] = roofline.decode_step_parts(self.model, self.gpu, self.layout(gpus), batch)
        return parts

    def swap_seconds(self, gpus: int, tokens: int) -> float:
        """Copying `tokens` of KV between HBM and host memory, each GPU its shard over its own PCIe link."""
        return tokens * self.kv_bytes / (gpus * self.swap_gbps * 1e9)
