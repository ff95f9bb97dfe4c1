"""Units that could never fit the nodes as they are: no pods, one condition that says why,
judged again when a node changes."""

from __future__ import annotations

import copy

from support.builders import cluster, group, role
from support.controller_world import kubelet, world
from tandem.api.kube import Node
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.controller.fit import Capacity, never_fits
from tandem.controller.provisioning import ATOMIC_SCALE_UP, ProvisioningSettings
from tandem.controller.reconcile import reconcile
from tandem.topology import ClusterSnapshot, TopologyView

SHAPE = "block=1,rack=2,host=2"  # 4 nodes of 8 GPUs, 2 racks of 16


def capacity(shape: str = SHAPE, gpus: int = 8) -> Capacity:
    objects = cluster(shape, gpus)
    snapshot, _ = ClusterSnapshot.build([Node.model_validate(o) for o in objects[1:]])
    return Capacity(TopologyView.build(ClusterTopology.model_validate(objects[0]), snapshot))


def typed(obj: dict) -> InferenceGroup:
    return InferenceGroup.model_validate(obj)


def test_a_pod_larger_than_every_node_never_fits():
    big = typed(group("big", [role("prefill", 1, gpus=16), role("decode", 1, gpus=8)]))
    assert never_fits(big, capacity()) == "a prefill pod (spec.roles[0]) asks for nvidia.com/gpu 16; the largest node offers 8"
    odd = group("odd", [role("prefill", 1, gpus=1)])
    odd["spec"]["roles"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["example.com/fpga"] = "1"
    assert never_fits(typed(odd), capacity()) == "a prefill pod (spec.roles[0]) asks for example.com/fpga, which no node offers"
    workers = group("w", [role("decode", 1, gpus=8, pods=2)])
    workers["spec"]["roles"][0]["workerTemplate"] = {"spec": {"containers": [{"name": "w", "resources": {"requests": {"nvidia.com/gpu": "9"}}}]}}
    assert never_fits(typed(workers), capacity()).startswith("a decode worker pod (spec.roles[0]) asks for nvidia.com/gpu 9")


def test_a_minimum_beyond_every_domain_of_its_required_level_never_fits():
    racked = typed(group("r", [role("prefill", 3, 3, gpus=8), role("decode", 1, 0, gpus=8)], required="rack"))
    assert never_fits(racked, capacity()) == (
        "the unit's minimum (3 prefill) asks for nvidia.com/gpu 24 in one rack; the largest rack offers 16")
    replica = typed(group("p", [role("decode", 1, gpus=8, pods=3, required="rack")]))
    assert never_fits(replica, capacity()).startswith("a decode replica (spec.roles[0], 3 pod(s)) asks for nvidia.com/gpu 24 in one rack")
    whole = typed(group("c", [role("prefill", 5, 5, gpus=8)]))
    assert never_fits(whole, capacity()) == "the unit's minimum (5 prefill) asks for nvidia.com/gpu 40; the whole cluster offers 32"


def test_what_could_fit_an_empty_cluster_is_left_to_the_engine():
    assert never_fits(typed(group("ok", [role("prefill", 2, 2, gpus=8)], required="rack")), capacity()) is None
    assert never_fits(typed(group("extras", [role("prefill", 9, 1, gpus=8)], required="rack")), capacity()) is None, "only the minimum is judged"
    assert never_fits(typed(group("zero", [role("prefill", 1, 0, gpus=64), role("decode", 1, gpus=8)])), capacity()) is None, \
        "a role the unit does not need is the engine's to report"


def run(store, start=0.0, passes=20):
    now = start
    for _ in range(passes):
        report = reconcile(store, now)
        now += 1.0
        if kubelet(store) == 0 and report.writes == 0:
            break
    return now


def test_a_unit_that_never_fits_creates_no_pod_says_why_once_and_fits_when_a_larger_node_joins():
    store = world(group("big", [role("prefill", 1, gpus=16)], replicas=2), shape=SHAPE)
    now = run(store)
    assert store.list("Pod", "serving") == [], "no gated pod for a unit that could never be placed"
    status = store.get("InferenceGroup", "serving", "big")["status"]
    scheduled = next(c for c in status["conditions"] if c["type"] == "Scheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "NeverFits")
    said = "a prefill pod (spec.roles[0]) asks for nvidia.com/gpu 16; the largest node offers 8"
    assert said in scheduled["message"] and status["state"] == "Unschedulable"
    assert [(u["state"], u["reason"]) for u in status["units"]] == [("Unschedulable", "NeverFits: " + said)] * 2
    events = [e for e in store.list("Event", "serving") if e.get("reason") == "NeverFits"]
    assert len(events) == 1 and events[0]["type"] == "Warning", "said once, not every pass"
    assert reconcile(store, now).writes == 0, "settled: a pass on the same nodes writes nothing"

    large = copy.deepcopy(store.get("Node", None, "n-000"))
    large["metadata"] = {"name": "n-large", "labels": {**large["metadata"]["labels"], "kubernetes.io/hostname": "n-large"}}
    large["status"]["allocatable"]["nvidia.com/gpu"] = "16"
    store.create(large)
    run(store, now + 1)
    nodes = sorted(str(p["spec"].get("nodeName")) for p in store.list("Pod", "serving"))
    assert nodes == ["None", "n-large"], "a node joining is judged again: unit 0 runs there, unit 1 waits for room as any unit"
    status = store.get("InferenceGroup", "serving", "big")["status"]
    assert all(c["reason"] != "NeverFits" for c in status["conditions"])


def test_a_pod_no_single_node_holds_whole_never_fits_though_each_resource_is_somewhere():
    objects = cluster("host=2", 8)
    objects[1]["status"]["allocatable"]["cpu"] = "64"
    objects[2]["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    objects[2]["status"]["allocatable"]["cpu"] = "128"
    snapshot, _ = ClusterSnapshot.build([Node.model_validate(o) for o in objects[1:]])
    view = TopologyView.build(ClusterTopology.model_validate(objects[0]), snapshot)
    both = group("both", [role("prefill", 1, gpus=8)])
    both["spec"]["roles"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100"
    assert never_fits(typed(both), Capacity(view)) == "a prefill pod (spec.roles[0]) asks for cpu 100 and nvidia.com/gpu 8; no node offers them together"


def test_with_provisioning_a_unit_that_never_fits_the_nodes_of_now_asks_the_autoscaler_instead():
    store = world(group("big", [role("prefill", 1, gpus=16)]), shape=SHAPE)
    on = ProvisioningSettings(enabled=True, default_class=ATOMIC_SCALE_UP)
    for step in range(5):
        reconcile(store, float(step), provisioning=on)
    assert [p["metadata"]["name"] for p in store.list("Pod", "serving")] == ["big-0-prefill-0-0"], "created, gated, waiting for new nodes"
    assert store.list("ProvisioningRequest", "serving"), "the node autoscaler is asked for a node of that shape"
    status = store.get("InferenceGroup", "serving", "big")["status"]
    assert all(c["reason"] != "NeverFits" for c in status["conditions"])
