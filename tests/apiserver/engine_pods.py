"""Pods that run an engine, and a small HTTP client for the stand-ins, for the engine tests."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from apiserver.helpers import NS

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
PODS = f"/api/v1/namespaces/{NS}/pods"


def sglang_pod(name: str, mode: str, *, pre_stop: int | None = None, grace: int | None = None, model: str = LLAMA) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "engine", "image": "lmsysorg/sglang:v0.5.5", "command": ["python3", "-m", "sglang.launch_server"],
                                 "args": ["--model-path", model, "--disaggregation-mode", mode]}
    if pre_stop is not None:
        container["lifecycle"] = {"preStop": {"sleep": {"seconds": pre_stop}}}
    spec: dict[str, Any] = {"containers": [container]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": {"tandem.dev/role": mode}}, "spec": spec}


def vllm_pod(name: str, model: str = "acme/unprofiled-7b", kv_role: str | None = None) -> dict[str, Any]:
    args = [] if kv_role is None else ["--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": kv_role})]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0", "command": ["vllm", "serve", model], "args": args}]}}


def call(url: str, body: Any = None, timeout: float = 30.0) -> tuple[int, str]:
    """(status, body text) of a GET (no body) or a JSON POST."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def events(text: str) -> list[Any]:
    """The `data:` payloads of a server-sent event stream, `[DONE]` as a string."""
    out: list[Any] = []
    for line in text.splitlines():
        if line.startswith("data: "):
            payload = line[len("data: "):]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out
