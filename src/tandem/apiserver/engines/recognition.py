"""Which pods run a serving engine, and with what settings: a pure reading of the pod spec.

The contract between the API server and the examples (docs/apiserver.md, "Engine
stand-ins"): the annotation `tandem.dev/engine` wins, else the image's repository, else the
command line; the settings come from the engine's own flags, as the engine would read them.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

Engine = Literal["sglang", "vllm"]
Role = Literal["prefill", "decode"]

ENGINE_ANNOTATION = "tandem.dev/engine"
CONTAINER_ANNOTATION = "tandem.dev/engine-container"
MODEL_ANNOTATION = "tandem.dev/serving-model"
GPU_ANNOTATION = "tandem.dev/serving-gpu"
ROLE_LABEL = "tandem.dev/role"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
DEFAULT_GPU = "h100-sxm"
DEFAULT_PORTS: dict[Engine, int] = {"sglang": 30000, "vllm": 8000}
REPLICA_SIZE_ENV = "TANDEM_REPLICA_SIZE"  # what the operator tells each pod of a replica
SGLANG_BOOTSTRAP_PORT = 8998  # SGLang's --disaggregation-bootstrap-port default
SIDE_CHANNEL_ENV = "VLLM_NIXL_SIDE_CHANNEL_PORT"  # where vLLM's NixlConnector listens for the decode's handshake
VLLM_SIDE_CHANNEL_PORT = 5600  # its default (vllm/envs.py)
_KV_ROLES: dict[str, Role | None] = {"kv_producer": "prefill", "kv_consumer": "decode", "kv_both": None}


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
    """The engine `pod` runs, or None. `node` (the node it is bound to) may name its GPU;
    `model_names` and `gpu_names` are the bundled profiles' names."""
    meta = pod.get("metadata") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    containers: list[Mapping[str, Any]] = list((pod.get("spec") or {}).get("containers") or [])
    if not containers:
        return None
    found = _engine_container(annotations, containers)
    if found is None:
        return None
    engine, container = found
    words = [*(str(w) for w in container.get("command") or []), *(str(w) for w in container.get("args") or [])]
    words = _split_shell(words)
    flags = _flags(words)
    if engine == "sglang":
        model_arg = flags.get("--model-path") or flags.get("--model")
        tp = _int(flags.get("--tp-size") or flags.get("--tp"), 1)
        pp = _int(flags.get("--pp-size") or flags.get("--pipeline-parallel-size"), 1)
        port = _int(flags.get("--port"), DEFAULT_PORTS["sglang"])
        mode = flags.get("--disaggregation-mode")
        role: Role | None = "prefill" if mode == "prefill" else "decode" if mode == "decode" else None
    else:
        model_arg = flags.get("--model") or _vllm_positional_model(words)
        tp = _int(flags.get("--tensor-parallel-size") or flags.get("-tp"), 1)
        pp = _int(flags.get("--pipeline-parallel-size") or flags.get("-pp"), 1)
        port = _int(flags.get("--port"), DEFAULT_PORTS["vllm"])
        role = _vllm_role(flags.get("--kv-transfer-config"))
    if role is None and labels.get(ROLE_LABEL) in ("prefill", "decode"):
        role = "prefill" if labels[ROLE_LABEL] == "prefill" else "decode"
    bootstrap = None
    if engine == "sglang" and role == "prefill":
        named = next((p.get("containerPort") for p in container.get("ports") or [] if p.get("name") == "bootstrap"), None)
        bootstrap = _int(named if named is not None else flags.get("--disaggregation-bootstrap-port"), SGLANG_BOOTSTRAP_PORT)
    profile = annotations.get(MODEL_ANNOTATION) or profile_for_model(model_arg, model_names)
    if profile is not None and profile not in model_names:
        profile = None
    gpu = annotations.get(GPU_ANNOTATION) or _node_gpu(node, gpu_names) or DEFAULT_GPU
    if gpu not in gpu_names:
        gpu = DEFAULT_GPU
    size = _env(container, REPLICA_SIZE_ENV)
    side_channel = _int(_env(container, SIDE_CHANNEL_ENV), VLLM_SIDE_CHANNEL_PORT) if engine == "vllm" and flags.get("--kv-transfer-config") else None
    return EngineSpec(engine=engine, container=str(container.get("name") or ""), port=port, role=role,
                      served_model=model_arg or profile or "default", profile=profile, gpu=gpu, tp=max(tp, 1), bootstrap_port=bootstrap,
                      replica_pods=max(_int(size, 1), 1), pp=max(pp, 1), side_channel_port=side_channel)


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


def _engine_container(annotations: Mapping[str, str], containers: list[Mapping[str, Any]]) -> tuple[Engine, Mapping[str, Any]] | None:
    marked = annotations.get(ENGINE_ANNOTATION)
    if marked in ("sglang", "vllm"):
        name = annotations.get(CONTAINER_ANNOTATION)
        chosen = next((c for c in containers if c.get("name") == name), containers[0]) if name else containers[0]
        return ("sglang" if marked == "sglang" else "vllm"), chosen
    for container in containers:
        repository = str(container.get("image") or "").rsplit("@", 1)[0]
        repository = repository if ":" not in repository.rsplit("/", 1)[-1] else repository.rsplit(":", 1)[0]
        if "sglang" in repository.lower():
            return "sglang", container
        if "vllm" in repository.lower():
            return "vllm", container
    for container in containers:
        words = _split_shell([*(str(w) for w in container.get("command") or []), *(str(w) for w in container.get("args") or [])])
        if "sglang.launch_server" in words:
            return "sglang", container
        if words[:2] == ["vllm", "serve"] or (len(words) > 2 and words[0].endswith("vllm") and words[1] == "serve"):
            return "vllm", container
    return None


def _split_shell(words: list[str]) -> list[str]:
    """`sh -c "python3 -m sglang.launch_server --port 30000"`: the script's words."""
    if len(words) >= 3 and words[0].rsplit("/", 1)[-1] in ("sh", "bash") and words[1] in ("-c", "-lc", "-ec"):
        try:
            return shlex.split(words[2]) + words[3:]
        except ValueError:
            return words
    return words


def _flags(words: list[str]) -> dict[str, str]:
    """`--flag value` and `--flag=value` (the last one wins, as argparse does)."""
    out: dict[str, str] = {}
    for i, word in enumerate(words):
        if not word.startswith("-"):
            continue
        if "=" in word:
            name, value = word.split("=", 1)
            out[name] = value
        elif i + 1 < len(words) and not words[i + 1].startswith("--"):
            out[word] = words[i + 1]
        else:
            out[word] = ""
    return out


def _vllm_positional_model(words: list[str]) -> str | None:
    for i, word in enumerate(words[:-1]):
        if (word == "serve" and (i == 0 or words[i - 1].endswith("vllm"))) and not words[i + 1].startswith("-"):
            return words[i + 1]
    return None


def _vllm_role(config: str | None) -> Role | None:
    if not config:
        return None
    try:
        parsed = json.loads(config)
    except ValueError:
        return None
    return _KV_ROLES.get(str(parsed.get("kv_role"))) if isinstance(parsed, dict) else None


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
