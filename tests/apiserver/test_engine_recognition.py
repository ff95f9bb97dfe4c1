"""Which pods run SGLang or vLLM, and with what settings (the contract the examples follow)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tandem.apiserver.engines.recognition import recognise
from tandem.sim.serving import GPU_NAMES, MODEL_NAMES


def _pod(*containers: dict[str, Any], annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "p", "annotations": annotations or {}, "labels": labels or {}}, "spec": {"containers": list(containers)}}


def _see(pod: dict[str, Any], node: dict[str, Any] | None = None):
    return recognise(pod, node, MODEL_NAMES, GPU_NAMES)


def test_an_sglang_prefill_from_its_image_and_flags():
    spec = _see(_pod({"name": "engine", "image": "lmsysorg/sglang:v0.5.5", "command": ["python3", "-m", "sglang.launch_server"],
                      "args": ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--tp-size=2", "--port", "31000",
                               "--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", "9000"]}))
    assert spec is not None
    assert (spec.engine, spec.role, spec.port, spec.tp, spec.bootstrap_port) == ("sglang", "prefill", 31000, 2, 9000)
    assert (spec.profile, spec.gpu, spec.served_model) == ("llama-3.1-8b", "h100-sxm", "meta-llama/Llama-3.1-8B-Instruct")


def test_defaults_sglang_port_and_bootstrap_port_a_named_container_port_wins():
    spec = _see(_pod({"name": "e", "image": "registry.local/sglang", "args": ["--disaggregation-mode", "prefill"],
                      "ports": [{"name": "bootstrap", "containerPort": 8999}]}))
    assert spec is not None and (spec.port, spec.bootstrap_port, spec.profile) == (30000, 8999, None)
    plain = _see(_pod({"name": "e", "image": "lmsysorg/sglang:latest", "args": ["--disaggregation-mode", "prefill"]}))
    assert plain is not None and plain.bootstrap_port == 8998
    decode = _see(_pod({"name": "e", "image": "lmsysorg/sglang:latest", "args": ["--disaggregation-mode", "decode"]}))
    assert decode is not None and decode.bootstrap_port is None


def test_vllm_serve_with_its_kv_role():
    config = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_consumer"})
    spec = _see(_pod({"name": "vllm", "image": "busybox", "command": ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct"],
                      "args": ["-tp", "4", f"--kv-transfer-config={config}"]}))
    assert spec is not None
    assert (spec.engine, spec.role, spec.port, spec.tp, spec.profile) == ("vllm", "decode", 8000, 4, "llama-3.1-70b")
    assert spec.replica_pods == 1


def test_the_replica_size_tandem_gives_a_pod_shares_the_load():
    spec = _see(_pod({"name": "e", "image": "lmsysorg/sglang:v0.5.5", "env": [{"name": "TANDEM_REPLICA_SIZE", "value": "2"}]}))
    assert spec is not None and spec.replica_pods == 2


@pytest.mark.parametrize(("kv_role", "label", "role"), [("kv_producer", None, "prefill"), ("kv_both", "decode", "decode"), (None, "prefill", "prefill"), (None, None, None)])
def test_the_role_from_the_flags_else_the_role_label(kv_role, label, role):
    args = [] if kv_role is None else ["--kv-transfer-config", json.dumps({"kv_role": kv_role})]
    spec = _see(_pod({"name": "e", "image": "vllm/vllm-openai:v0.11.0", "args": args}, labels={"tandem.dev/role": label} if label else {}))
    assert spec is not None and spec.role == role


def test_the_annotation_names_the_engine_and_its_container_and_the_profile():
    pod = _pod({"name": "sidecar", "image": "envoy"}, {"name": "main", "image": "my/server", "args": ["--port", "9000"]},
               annotations={"tandem.dev/engine": "vllm", "tandem.dev/engine-container": "main", "tandem.dev/serving-model": "mixtral-8x7b",
                            "tandem.dev/serving-gpu": "h200-sxm"})
    spec = _see(pod)
    assert spec is not None and (spec.engine, spec.container, spec.port, spec.profile, spec.gpu) == ("vllm", "main", 9000, "mixtral-8x7b", "h200-sxm")


def test_a_shell_wrapped_command_line_and_the_node_s_gpu():
    node = {"metadata": {"labels": {"nvidia.com/gpu.product": "NVIDIA-H200"}}}
    spec = _see(_pod({"name": "e", "image": "python:3.11", "command": ["sh", "-c", "python3 -m sglang.launch_server --model-path x/Llama-3.1-8B --port 30001"]}), node)
    assert spec is not None and (spec.engine, spec.port, spec.profile, spec.gpu) == ("sglang", 30001, "llama-3.1-8b", "h200-sxm")


@pytest.mark.parametrize("container", [{"name": "e", "image": "nginx:1.27"}, {"name": "e", "image": "python", "command": ["python", "-m", "http.server"]}])
def test_other_containers_are_no_engine(container):
    assert _see(_pod(container)) is None
