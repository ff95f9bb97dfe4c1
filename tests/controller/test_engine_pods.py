"""What an engine's pods carry for a router (issue 28): the labels it selects on, the
ports the engine listens on, declared and named, and SGLang's bootstrap port annotation."""

from __future__ import annotations

import json

from support.builders import group, role
from support.controller_world import settle, world

NS = "serving"


def sglang_group(prefill_container=None, annotations=None):
    g = group("chat", [role("prefill", 1, 1, gpus=1), role("decode", 1, 1, gpus=1)])
    for spec_role in g["spec"]["roles"]:
        container = spec_role["template"]["spec"]["containers"][0]
        container["image"] = "lmsysorg/sglang:v0.4.9"
        container["command"] = ["python3", "-m", "sglang.launch_server"]
        container["args"] = ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--disaggregation-mode", spec_role["name"]]
    prefill = g["spec"]["roles"][0]["template"]
    prefill["spec"]["containers"][0]["args"] += ["--disaggregation-bootstrap-port=9001"]
    if prefill_container:
        prefill["spec"]["containers"][0].update(prefill_container)
    if annotations:
        prefill.setdefault("metadata", {})["annotations"] = annotations
    return g


def test_sglang_pods_declare_their_ports_and_a_prefill_its_bootstrap_port_for_the_router():
    store = world(sglang_group())
    settle(store, store)
    prefill, decode = store.get("Pod", NS, "chat-0-prefill-0-0"), store.get("Pod", NS, "chat-0-decode-0-0")
    labels = prefill["metadata"]["labels"]
    assert {k: labels[k] for k in ("tandem.dev/group", "tandem.dev/unit", "tandem.dev/role", "tandem.dev/replica", "tandem.dev/pod-index")} == {
        "tandem.dev/group": "chat", "tandem.dev/unit": "0", "tandem.dev/role": "prefill", "tandem.dev/replica": "0", "tandem.dev/pod-index": "0",
    }
    assert labels["tandem.dev/revision"] == store.get("InferenceGroup", NS, "chat")["status"]["revision"]
    assert prefill["spec"]["containers"][0]["ports"] == [
        {"name": "http", "containerPort": 30000}, {"name": "bootstrap", "containerPort": 9001},
    ]
    assert prefill["metadata"]["annotations"]["sglang.ai/bootstrap-port"] == "9001"
    assert decode["spec"]["containers"][0]["ports"] == [{"name": "http", "containerPort": 30000}]
    assert "sglang.ai/bootstrap-port" not in decode["metadata"]["annotations"]
    document = json.loads(store.get("ConfigMap", NS, "chat-0-peers")["data"]["peers.json"])
    assert document["roles"]["prefill"][0]["pods"][0]["ports"] == {"http": 30000, "bootstrap": 9001}
    assert document["roles"]["decode"][0]["pods"][0]["ports"] == {"http": 30000}


def test_the_templates_ports_and_annotation_are_kept_and_its_bootstrap_port_is_announced():
    ports = [{"name": "serve", "containerPort": 31000}, {"name": "bootstrap", "containerPort": 9100}]
    store = world(sglang_group({"ports": ports}))
    settle(store, store)
    prefill = store.get("Pod", NS, "chat-0-prefill-0-0")
    assert prefill["spec"]["containers"][0]["ports"] == ports
    assert prefill["metadata"]["annotations"]["sglang.ai/bootstrap-port"] == "9100", "the port named bootstrap wins over the flag"
    store = world(sglang_group(annotations={"sglang.ai/bootstrap-port": "7000"}))
    settle(store, store)
    assert store.get("Pod", NS, "chat-0-prefill-0-0")["metadata"]["annotations"]["sglang.ai/bootstrap-port"] == "7000"


def test_a_container_that_runs_no_engine_gets_no_ports_or_annotation():
    g = group("web", [role("prefill", 1, 1, gpus=1)])
    g["spec"]["roles"][0]["template"]["spec"]["containers"][0]["image"] = "busybox:1.36"
    store = world(g)
    settle(store, store)
    pod = store.get("Pod", NS, "web-0-prefill-0-0")
    assert "ports" not in pod["spec"]["containers"][0]
    assert "sglang.ai/bootstrap-port" not in pod["metadata"]["annotations"]
    document = json.loads(store.get("ConfigMap", NS, "web-0-peers")["data"]["peers.json"])
    assert document["roles"]["prefill"][0]["pods"][0]["ports"] == {}
