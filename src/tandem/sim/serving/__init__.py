"""Request-level model of disaggregated serving: profiles, roofline costs, the event model."""

from tandem.sim.serving.model import ReplicaInfo, ServingModel
from tandem.sim.serving.profiles import (
    GPU_NAMES,
    MODEL_NAMES,
    GpuProfile,
    ModelProfile,
    gpu_profile,
    model_profile,
    parse_profile,
)
from tandem.sim.serving.results import ReplicaSamples, ServingResults
from tandem.sim.serving.roofline import (
    Parallel,
    decode_batch_limit,
    decode_step_parts,
    decode_step_seconds,
    decode_tokens_per_s_max,
    kv_bytes_per_token,
    kv_capacity_tokens,
    kv_transfer_gbps,
    kv_transfer_seconds,
    layout,
    prefill_seconds,
    prefill_tokens_per_s_max,
)

__all__ = [
    "GPU_NAMES",
    "MODEL_NAMES",
    "GpuProfile",
    "ModelProfile",
    "Parallel",
    "ReplicaInfo",
    "ReplicaSamples",
    "ServingModel",
    "ServingResults",
    "decode_batch_limit",
    "decode_step_parts",
    "decode_step_seconds",
    "decode_tokens_per_s_max",
    "gpu_profile",
    "kv_bytes_per_token",
    "kv_capacity_tokens",
    "kv_transfer_gbps",
    "kv_transfer_seconds",
    "layout",
    "model_profile",
    "parse_profile",
    "prefill_seconds",
    "prefill_tokens_per_s_max",
]
