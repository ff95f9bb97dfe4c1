"""Helpers for the local API server's tests: a small HTTP client (urllib) and objects to send."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from tandem.topology.generate import generate_cluster

NS = "serving"
IG = "/apis/tandem.dev/v1alpha1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"


def small_cluster(racks: int = 2, hosts: int = 2, gpus: int = 8) -> list[dict[str, Any]]:
    """A ClusterTopology and racks x hosts Nodes (n-000, n-001, ...)."""
    topology, nodes = generate_cluster([("rack", racks), ("host", hosts)], gpus)
    return [topology, *nodes]


class Clock:
    """A clock a test moves by hand (`clock.now += 5`), for the server's simulated components."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Reply:
    code: int
    body: Any
    headers: dict[str, str]
    warnings: list[str] = field(default_factory=list)  # every Warning header's text, unquoted


class Client:
    def __init__(self, url: str):
        self.url = url

    def call(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json", accept: str = "application/json",
             raw: bool = False) -> Reply:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, data=data, method=method, headers={"Accept": accept})
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                payload, code, headers = response.read(), response.status, response.headers
        except urllib.error.HTTPError as exc:
            payload, code, headers = exc.read(), exc.code, exc.headers
        text = payload if raw else (json.loads(payload) if payload.strip().startswith((b"{", b"[")) else payload.decode())
        warnings = [_unquoted(w) for w in headers.get_all("Warning") or []]
        return Reply(code, text, {k.lower(): v for k, v in headers.items()}, warnings)

    def get(self, path: str, **kw: Any) -> Reply:
        return self.call("GET", path, **kw)

    def post(self, path: str, body: Any, **kw: Any) -> Reply:
        return self.call("POST", path, body, **kw)

    def put(self, path: str, body: Any, **kw: Any) -> Reply:
        return self.call("PUT", path, body, **kw)

    def patch(self, path: str, body: Any, kind: str = "merge-patch", **kw: Any) -> Reply:
        return self.call("PATCH", path, body, content_type=f"application/{kind}+json", **kw)

    def delete(self, path: str, body: Any = None, **kw: Any) -> Reply:
        return self.call("DELETE", path, body, **kw)

    def watch(self, path: str, *, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Every event of a watch that ends on its own (give it timeoutSeconds)."""
        with urllib.request.urlopen(self.url + path, timeout=timeout + 5) as response:
            return [json.loads(line) for line in response.read().splitlines() if line.strip()]

    def stream(self, path: str) -> Any:
        """An open watch response, read line by line (`readline`)."""
        return urllib.request.urlopen(self.url + path, timeout=10)


def _unquoted(header: str) -> str:
    """`299 - "text"` -> text (a UTF-8 header that http.client read as Latin-1)."""
    m = re.match(r'^\d{3} \S+ "((?:[^"\\]|\\.)*)"', header)
    text = re.sub(r"\\(.)", r"\1", m[1]) if m else header
    return text.encode("latin-1").decode("utf-8", "replace")


def group(name: str = "g", replicas: int = 1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "tandem.dev/v1alpha1",
        "kind": "InferenceGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "roles": [{"name": "prefill", "replicas": 2, "template": {"spec": {"containers": [{"name": "engine", "image": "vllm"}]}}}],
            **spec,
        },
    }


def pod(name: str, *, labels: dict[str, str] | None = None, gated: bool = False, node: str | None = None, gpus: int = 0,
        namespace: str = NS) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "engine", "image": "vllm"}
    if gpus:
        container["resources"] = {"requests": {"nvidia.com/gpu": str(gpus)}}
    spec: dict[str, Any] = {"containers": [container]}
    if gated:
        spec["schedulingGates"] = [{"name": "tandem.dev/placement"}]
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels or {}}, "spec": spec}
