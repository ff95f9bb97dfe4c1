"""How long an engine takes from its start to serving: its weights read at the node's load
bandwidth plus a fixed engine start (docs/serving.md, "Cold start"). Shared by the
simulator's kubelet model and the local API server's engine stand-ins."""

from __future__ import annotations

from tandem.sim.serving.profiles import ModelProfile

LOAD_GB_PER_SECOND = 2.0  # per node
ENGINE_START_SECONDS = 30.0  # CUDA graphs, NCCL, memory profiling


def load_seconds(model: ModelProfile, pods_per_replica: int = 1, *, load_gb_per_second: float = LOAD_GB_PER_SECOND,
                 engine_start_seconds: float = ENGINE_START_SECONDS) -> float:
    """The weights one node holds (the replica's weights over its pods) read at
    `load_gb_per_second`, plus the fixed engine start."""
    per_node = model.params * model.weight_bytes_per_param / max(pods_per_replica, 1)
    return per_node / (load_gb_per_second * 1e9) + engine_start_seconds
