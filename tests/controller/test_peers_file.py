"""peers.json version 2 (issue 28): every bound replica with its revision, leader and
readiness, each pod's ports, node and domains, the decodes each prefill sits near, and a
generation that grows by one with every change."""

from __future__ import annotations

import json

from support.builders import group, role
from support.controller_world import design_group, kubelet, settle, world
from support.delegated_world import delegated_store, toy_scheduler
from tandem.controller import DelegationSettings
from tandem.controller.memo import Memo
from tandem.controller.peers import fresh_generation, with_generation
from tandem.controller.reconcile import reconcile

NS = "serving"
LEVELS = {"block": "network.tandem.dev/block", "rack": "network.tandem.dev/rack", "host": "kubernetes.io/hostname"}


def stored(store, unit=0):
    return store.get("ConfigMap", NS, f"llama-{unit}-peers")["data"]["peers.json"]


def peers(store, unit=0):
    return json.loads(stored(store, unit))


def set_ready(store, name, ready):
    pod = store.get("Pod", NS, name)
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    store.update_status(pod)


def rack_of(store, node):
    labels = store.get("Node", "", node)["metadata"]["labels"]
    return (labels[LEVELS["block"]], labels[LEVELS["rack"]])


def test_every_bound_replica_is_listed_with_its_revision_leader_readiness_and_the_decodes_near_it():
    store = world(design_group())
    settle(store, store)
    set_ready(store, "llama-0-decode-1-1", False)
    reconcile(store, 100.0)
    document = peers(store)
    revision = store.get("InferenceGroup", NS, "llama")["status"]["revision"]
    assert (document["version"], document["group"], document["namespace"], document["unit"]) == (2, "llama", NS, 0)
    assert document["levels"] == ["block", "rack", "host"]
    decode = {r["replica"]: r for r in document["roles"]["decode"]}
    assert sorted(decode) == [0, 1], "a replica not Ready is still listed: readiness is per pod"
    assert (decode[1]["ready"], [p["ready"] for p in decode[1]["pods"]]) == (False, [True, False])
    assert (decode[0]["ready"], decode[1]["leader"], decode[1]["revision"]) == (True, "llama-0-decode-1-0", revision)
    for pod in decode[1]["pods"]:
        node = store.get("Node", "", pod["node"])["metadata"]["labels"]
        assert pod["domains"] == {level: node[label] for level, label in LEVELS.items()}
        assert pod["ports"] == {"http": 8000}, "the engine's port, declared by the operator"
    assert "near" not in decode[0], "decode is no affinity's `from`"
    for prefill in document["roles"]["prefill"]:
        racks = {rack_of(store, p["node"]) for p in prefill["pods"]}
        expected = [r for r, d in sorted(decode.items()) if racks & {rack_of(store, p["node"]) for p in d["pods"]}]
        assert prefill["near"] == {"decode": expected}


def test_a_group_without_affinity_has_no_near_and_unbound_replicas_are_not_listed():
    store = world(group("llama", [role("prefill", 1, 1, gpus=1), role("decode", 1, 1, gpus=1)]))
    reconcile(store, 0.0)
    assert peers(store)["roles"] == {"prefill": [], "decode": []}, "created, not bound"
    settle(store, store, start=1.0)
    assert all("near" not in r for rs in peers(store)["roles"].values() for r in rs)
    assert [len(rs) for rs in peers(store)["roles"].values()] == [1, 1]


def test_unchanged_inputs_give_the_same_bytes_and_generation_and_no_write():
    store = world(design_group())
    settle(store, store)
    before = store.get("ConfigMap", NS, "llama-0-peers")
    reconcile(store, 300.0)
    reconcile(store, 301.0)
    after = store.get("ConfigMap", NS, "llama-0-peers")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["data"] == before["data"]


def test_a_pod_turning_ready_or_not_bumps_the_generation_by_one_each_time():
    store = world(design_group())
    settle(store, store)
    generation = peers(store)["generation"]
    set_ready(store, "llama-0-prefill-1-0", False)
    reconcile(store, 100.0)
    assert peers(store)["generation"] == generation + 1
    set_ready(store, "llama-0-prefill-1-0", True)
    reconcile(store, 101.0)
    document = peers(store)
    assert document["generation"] == generation + 2 and all(r["ready"] for r in document["roles"]["prefill"])


def test_a_lost_config_map_is_written_anew_with_a_generation_above_the_lost_one():
    store = world(design_group())
    now = settle(store, store, start=1_000.0)
    lost = peers(store)
    store.delete("ConfigMap", NS, "llama-0-peers")
    reconcile(store, now + 60.0)
    anew = peers(store)
    assert anew["generation"] == fresh_generation(now + 60.0) > lost["generation"]
    assert {k: v for k, v in anew.items() if k != "generation"} == {k: v for k, v in lost.items() if k != "generation"}


def test_the_generation_is_spliced_into_the_body_as_json_would_write_it():
    body = json.dumps({"group": "g", "roles": {}, "version": 2}, sort_keys=True, separators=(",", ":")) + "\n"
    first = with_generation(body, None, 7)
    assert first == json.dumps({"generation": 7, "group": "g", "roles": {}, "version": 2}, sort_keys=True, separators=(",", ":")) + "\n"
    assert with_generation(body, first, 99) is first, "the same content: the stored file itself"
    changed = body.replace('"g"', '"h"')
    assert json.loads(with_generation(changed, first, 99))["generation"] == 8
    v1 = '{"group":"g","namespace":"serving","roles":{},"unit":0}\n'
    assert json.loads(with_generation(body, v1, 99))["generation"] == 99, "a version 1 file is replaced as new"


def test_a_delegated_groups_file_is_read_off_the_nodes_its_scheduler_chose():
    g = design_group()
    g["spec"]["scheduler"] = {"backend": "volcano"}
    store = delegated_store(g)
    settings = DelegationSettings(backends=("volcano",))
    now = 0.0
    for _ in range(30):
        report = reconcile(store, now, delegation=settings)
        moved = kubelet(store) + toy_scheduler(store)
        now += 1.0
        if moved == 0 and report.writes == 0 and not report.errors:
            break
    document = peers(store)
    assert len(document["roles"]["prefill"]) == 4 and len(document["roles"]["decode"]) == 2
    pods = [p for rs in document["roles"].values() for r in rs for p in r["pods"]]
    assert all(p["node"] and set(p["domains"]) == set(LEVELS) and p["domains"]["host"] == p["node"] for p in pods)
    assert all(p["ports"] == {"http": 8000} for p in pods), "its pods declare the engine's port as native ones do"
    assert all(set(r["near"]) == {"decode"} for r in document["roles"]["prefill"])


def test_a_replica_with_a_pod_being_deleted_leaves_the_file_at_once():
    store = world(design_group())
    settle(store, store)
    generation = peers(store)["generation"]
    store.patch("Pod", NS, "llama-0-decode-1-1", {"metadata": {"finalizers": ["example.com/hold"]}})
    store.delete("Pod", NS, "llama-0-decode-1-1")  # held by its finalizer: deleting, still Running and Ready
    assert store.get("Pod", NS, "llama-0-decode-1-1")["metadata"]["deletionTimestamp"]
    reconcile(store, 100.0)
    document = peers(store)
    assert [r["replica"] for r in document["roles"]["decode"]] == [0] and document["generation"] == generation + 1
    assert all(r["near"]["decode"] in ([0], []) for r in document["roles"]["prefill"]), "near names only listed decodes"


def test_with_the_memo_kept_the_file_is_told_current_by_its_digest_and_mended_when_edited():
    store = world(design_group())
    memo = Memo()
    settle(store, store)
    reconcile(store, 100.0, memo=memo)
    kept = store.get("ConfigMap", NS, "llama-0-peers")
    set_ready(store, "llama-0-prefill-1-0", False)
    reconcile(store, 101.0, memo=memo)
    assert peers(store)["generation"] == json.loads(kept["data"]["peers.json"])["generation"] + 1
    changed = store.get("ConfigMap", NS, "llama-0-peers")
    for now in (102.0, 103.0):  # the pods as they were: the stored file is current, nothing written
        report = reconcile(store, now, memo=memo)
        assert report.patched == 0 and store.get("ConfigMap", NS, "llama-0-peers")["metadata"]["resourceVersion"] == changed["metadata"]["resourceVersion"]
    edited = json.loads(stored(store))
    edited["roles"]["prefill"] = []
    store.patch("ConfigMap", NS, "llama-0-peers", {"data": {"peers.json": json.dumps(edited, sort_keys=True, separators=(",", ":")) + "\n"}})
    reconcile(store, 104.0, memo=memo)
    mended = peers(store)
    assert len(mended["roles"]["prefill"]) == 4 and mended["generation"] == edited["generation"] + 1, "an edited file is written back, one generation on"
