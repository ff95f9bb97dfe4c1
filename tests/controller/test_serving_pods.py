"""Pods a serving engine can use: DNS names, the TANDEM_* environment, the peers file."""

from __future__ import annotations

import json

from support.builders import group, role
from support.controller_world import design_group, settle, world
from tandem.controller.reconcile import reconcile

NS = "serving"


def peers(store, unit=0):
    return json.loads(store.get("ConfigMap", NS, f"llama-{unit}-peers")["data"]["peers.json"])


def test_every_pod_has_a_dns_name_the_environment_and_its_units_peers_file():
    store = world(design_group())
    settle(store, store)
    service = store.get("Service", NS, "llama")
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["selector"] == {"tandem.dev/group": "llama"}
    assert service["spec"]["publishNotReadyAddresses"] is True
    pod = store.get("Pod", NS, "llama-0-decode-1-1")
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("llama-0-decode-1-1", "llama")
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env == {
        "TANDEM_GROUP": "llama",
        "TANDEM_UNIT": "0",
        "TANDEM_ROLE": "decode",
        "TANDEM_REPLICA": "1",
        "TANDEM_POD_INDEX": "1",
        "TANDEM_REPLICA_SIZE": "2",
        "TANDEM_LEADER_ADDRESS": "llama-0-decode-1-0.llama.serving.svc",
        "TANDEM_PEERS_FILE": "/etc/tandem/peers.json",
    }
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "tandem-peers")
    assert volume["configMap"]["name"] == "llama-0-peers"
    assert {"name": "tandem-peers", "mountPath": "/etc/tandem", "readOnly": True} in pod["spec"]["containers"][0]["volumeMounts"]
    document = peers(store)
    assert [r["replica"] for r in document["roles"]["prefill"]] == [0, 1, 2, 3]
    decode = document["roles"]["decode"]
    assert [[p["name"] for p in r["pods"]] for r in decode] == [["llama-0-decode-0-0", "llama-0-decode-0-1"], ["llama-0-decode-1-0", "llama-0-decode-1-1"]]
    node = decode[0]["pods"][0]["node"]
    rack = store.get("Node", "", node)["metadata"]["labels"]
    assert decode[0]["pods"][0] == {
        "name": "llama-0-decode-0-0", "index": 0, "address": "llama-0-decode-0-0.llama.serving.svc", "ip": None, "node": node,
        "ready": True, "ports": {"http": 8000}, "domains": {"block": rack["network.tandem.dev/block"], "rack": rack["network.tandem.dev/rack"], "host": node},
    }


def test_the_peers_file_follows_ready_replicas_as_they_come_and_go():
    store = world(design_group())
    reconcile(store, 0.0)
    assert peers(store)["roles"] == {"prefill": [], "decode": []}, "nothing bound yet"
    settle(store, store, start=1.0)
    store.patch_status("Pod", NS, "llama-0-prefill-2-0", {"status": {"phase": "Failed", "conditions": None}})
    reconcile(store, 100.0)
    assert [r["replica"] for r in peers(store)["roles"]["prefill"]] == [0, 1, 3], "a failed replica leaves at once"
    settle(store, store, start=101.0)
    assert [r["replica"] for r in peers(store)["roles"]["prefill"]] == [0, 1, 2, 3], "its replacement joins when Ready"
    version = store.get("ConfigMap", NS, "llama-0-peers")["metadata"]["resourceVersion"]
    reconcile(store, 200.0)
    assert store.get("ConfigMap", NS, "llama-0-peers")["metadata"]["resourceVersion"] == version, "unchanged peers: no write"


def test_the_templates_own_fields_are_kept_and_companions_go_with_the_group():
    g = group("mini", [role("prefill", 1, 1, gpus=1)])
    container = g["spec"]["roles"][0]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "TANDEM_ROLE", "value": "mine"}, {"name": "OTHER", "value": "x"}]
    g["spec"]["roles"][0]["template"]["spec"]["hostname"] = "custom"
    store = world(g)
    settle(store, store)
    pod = store.get("Pod", NS, "mini-0-prefill-0-0")
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["TANDEM_ROLE"] == "mine" and env["OTHER"] == "x" and env["TANDEM_GROUP"] == "mini"
    assert pod["spec"]["hostname"] == "custom"
    store.patch("InferenceGroup", NS, "mini", {"spec": {"replicas": 2}})
    settle(store, store, start=10.0)
    assert store.get("ConfigMap", NS, "mini-1-peers")
    store.patch("InferenceGroup", NS, "mini", {"spec": {"replicas": 1}})
    settle(store, store, start=20.0)
    assert [c["metadata"]["name"] for c in store.list("ConfigMap", NS)] == ["mini-0-peers"], "a removed unit's file goes"
    store.delete("InferenceGroup", NS, "mini")
    assert store.list("Pod", NS) == [] and store.list("Service", NS) == [] and store.list("ConfigMap", NS) == []


def test_a_group_name_that_cannot_name_a_service_is_refused():
    g = design_group("0llama")
    store = world(g)
    reconcile(store, 0.0)
    accepted = {c["type"]: c for c in store.get("InferenceGroup", NS, "0llama")["status"]["conditions"]}["Accepted"]
    assert accepted["status"] == "False" and "metadata.name" in accepted["message"] and "start with a letter" in accepted["message"]
    assert store.list("Pod", NS) == []
