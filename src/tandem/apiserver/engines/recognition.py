"""Which pods run a serving engine, and what its stand-in needs to know: a pure reading of
the pod spec.

Which container is an engine and its flags are the operator's reading (`tandem.api.engines`:
the annotation `tandem.dev/engine` wins, else the image's repository, else the command line),
so the pods tandem declares ports on are the pods the local API server stands engines in
for. Added here: the serving model's profile and GPU that time it, the replica's size
(its pods share the weights' load) and vLLM's KV side channel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from tandem.api.engines import EngineKind as Engine
from tandem.api.engines import ServingRole as Role
from tandem.api.engines import engine_of, serving_role

MODEL_ANNOTATION = "tandem.dev/serving-model"
GPU_ANNOTATION = "tandem.dev/serving-gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
DEFAULT_GPU = "h100-sxm"
REPLICA_SIZE_ENV = "TANDEM_REPLICA_SIZE"  # what the operator tells each pod of a replica
SIDE_CHANNEL_ENV = "VLLM_NIXL_SIDE_CHANNEL_PORT"  # where vLLM's NixlConnector listens for the decode's handshake
VLLM_SIDE_CHANNEL_PORT = 5600  # its default (vllm/envs.py)


@dataclass(frozen=True)
class EngineSpec:
    """What a stand-in needs to know about the engine a pod runs."""

    engine: Engine
    container: str
    port: int
    role: Role | None  # None: an engine that both prefills and decodes
    served_model: str  # the name it answers under (/v1/models): the model argument, else the profile
    profile: str | None  # the bundled model profile timing it; None: the fixed timing
    gpu: str  # the bundled GPU profile
    tp: int
    bootstrap_port: int | None  # SGLang prefill: where the decode side fetches the KV
    replica_pods: int = 1  # pods of its replica (TANDEM_REPLICA_SIZE): they share the weights' load
    pp: int = 1  # pipeline stages (--pp-size, --pipeline-parallel-size)
    side_channel_port: int | None = None  # vLLM with a KV connector: where a decode fetches the KV (NIXL's side channel)


def recognise(pod: Mapping[str, Any], node: Mapping[str, Any] | None, model_names: Sequence[str], gpu_names: Sequence[str]) -> EngineSpec | None:
    """The engine `pod` runs, or None: the operator's reading (`tandem.api.engines`) and what
    a stand-in adds. `node` (the node it is bound to) may name its GPU; `model_names` and
    `gpu_names` are the bundled profiles' names."""
    engine = engine_of(pod)
    if engine is None:
        return None
    annotations: Mapping[str, str] = (pod.get("metadata") or {}).get("annotations") or {}
    container: Mapping[str, Any] = pod["spec"]["containers"][engine.container]
    role = serving_role(engine, pod)
    profile = annotations.get(MODEL_ANNOTATION) or profile_for_model(engine.model, model_names)
    if profile is not None and profile not in model_names:
        profile = None
    gpu = annotations.get(GPU_ANNOTATION) or _node_gpu(node, gpu_names) or DEFAULT_GPU
    if gpu not in gpu_names:
        gpu = DEFAULT_GPU
    side_channel = _int(_env(container, SIDE_CHANNEL_ENV), VLLM_SIDE_CHANNEL_PORT) if engine.kv_connector else None
    return EngineSpec(engine=engine.kind, container=str(container.get("name") or ""), port=engine.port, role=role,
                      served_model=engine.model or profile or "default", profile=profile, gpu=gpu, tp=max(engine.tensor_parallel, 1),
                      bootstrap_port=engine.bootstrap_port if engine.kind == "sglang" and role == "prefill" else None,
                      replica_pods=max(_int(_env(container, REPLICA_SIZE_ENV), 1), 1), pp=max(engine.pipeline_parallel, 1),
                      side_channel_port=side_channel)


def profile_for_model(model: str | None, model_names: Sequence[str]) -> str | None:
    """The bundled profile of a Hugging Face id: its last part, case-insensitive, with
    `-Instruct` (and a trailing `-vX.Y`) ignored: `meta-llama/Llama-3.1-8B-Instruct` ->
    `llama-3.1-8b`."""
    if not model:
        return None
    base = model.rstrip("/").rsplit("/", 1)[-1].lower().replace("-instruct", "")
    for candidate in (base, re.sub(r"-v\d+(\.\d+)*$", "", base), base.removeprefix("meta-")):
        if candidate in model_names:
            return candidate
    return None


def _node_gpu(node: Mapping[str, Any] | None, gpu_names: Sequence[str]) -> str | None:
    product = ((node or {}).get("metadata") or {}).get("labels", {}).get(GPU_PRODUCT_LABEL, "")
    lowered = product.lower().replace("nvidia-", "").replace("_", "-")
    return next((name for name in gpu_names if lowered.startswith(name.split("-")[0])), None) if lowered else None


def _env(container: Mapping[str, Any], name: str) -> Any:
    """The literal value of the container's env variable `name` (None when absent or from a reference)."""
    return next((e.get("value") for e in container.get("env") or [] if isinstance(e, Mapping) and e.get("name") == name), None)


def _int(value: Any, default: int) -> int:
    try:
        return int(value) if value not in (None, "") else default
    except (TypeError, ValueError):
        return default
