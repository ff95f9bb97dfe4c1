"""The reconcile pass against the in-memory API server, with a toy kubelet."""

from __future__ import annotations

import copy

import pytest

from support.builders import group, role
from support.controller_world import FaultyWriter, design_group, kubelet, world
from tandem.errors import Conflict
from tandem.api.timestamps import rfc3339, seconds
from tandem.controller.reconcile import reconcile


def run(store, passes=30):
    reports = []
    for step in range(passes):
        reports.append(reconcile(store, float(step)))
        if kubelet(store) == 0 and reports[-1].writes == 0:
            break
    return reports


def test_a_group_rolls_out_in_steps_is_placed_and_becomes_available():
    store = world(design_group())
    reports = run(store)
    pods = store.list("Pod", "serving")
    assert len(pods) == 8 and all(p["spec"].get("nodeName") for p in pods)
    assert len({p["spec"]["nodeName"] for p in pods}) == 8, "8 pods of 8 GPUs on 8 hosts"
    racks = {store.get("Node", None, p["spec"]["nodeName"])["metadata"]["labels"]["network.tandem.dev/rack"] for p in pods}
    assert len(racks) == 1, "the whole unit in one rack (its preferred pack)"
    g = store.get("InferenceGroup", "serving", "llama")
    status = g["status"]
    assert {r["name"]: (r["replicas"], r["readyReplicas"]) for r in status["roles"]} == {"prefill": (4, 4), "decode": (2, 2)}
    assert {c["type"]: c["status"] for c in status["conditions"]}["Available"] == "True"
    assert status["units"][0]["state"] == "Complete"
    assert status["observedGeneration"] == g["metadata"]["generation"]
    # the first steps were the minimums, then +2 prefill / +1 decode
    assert [r.count("create", "Pod") for r in reports if r.count("create", "Pod")][:2] == [3, 4]
    assert reports[0].count("create", "Service") == 1 and reports[0].count("create", "ConfigMap") == 1


def test_a_pass_on_a_settled_cluster_writes_nothing():
    store = world(design_group())
    run(store)
    version = store.resource_version
    report = reconcile(store, 100.0)
    assert report.writes == 0 and store.resource_version == version


def test_a_failed_replica_is_replaced_and_placed_again():
    store = world(design_group())
    run(store)
    victim = store.get("Pod", "serving", "llama-0-prefill-1-0")
    victim["status"] = {"phase": "Failed"}
    store.update_status(victim)
    run(store)
    pods = {p["metadata"]["name"]: p for p in store.list("Pod", "serving")}
    assert "llama-0-prefill-1-0" in pods and pods["llama-0-prefill-1-0"].get("status", {}).get("phase") == "Running"
    assert len(pods) == 8


def test_scaling_the_spec_down_removes_replicas_and_units():
    store = world(design_group(replicas=2))
    run(store, passes=40)
    assert len(store.list("Pod", "serving")) == 16
    g = store.get("InferenceGroup", "serving", "llama")
    g = copy.deepcopy(g)
    g["spec"]["replicas"] = 1
    g["spec"]["roles"][0]["replicas"] = 2
    store.update(g)
    run(store)
    names = sorted(p["metadata"]["name"] for p in store.list("Pod", "serving"))
    assert all(name.startswith("llama-0-") for name in names)
    assert sum(1 for n in names if "-prefill-" in n) == 2


@pytest.mark.parametrize("epoch", [0.0, 1_764_003_217.25])  # a simulated start, and a real wall clock (2025)
def test_a_pod_placed_but_never_bound_is_released_after_the_gang_timeout(epoch):
    g = design_group()
    g["spec"]["scheduler"] = {"gangTimeoutSeconds": 60}
    store = world(g)
    reconcile(store, epoch)  # creates the minimum gang and places it; nothing binds it
    assigned = [p for p in store.list("Pod", "serving") if p["spec"].get("nodeSelector")]
    assert assigned and all(not p["spec"].get("nodeName") for p in assigned)
    # The assignment time is RFC 3339 to the microsecond: at a real epoch a `%g` float
    # would round it by more than an hour and fire (or not) the timeout at the wrong time.
    stamp = assigned[0]["metadata"]["annotations"]["tandem.dev/assigned-at"]
    assert stamp.endswith("Z") and abs(seconds(stamp) - epoch) < 1e-3
    report = reconcile(store, epoch + 59.5)
    assert report.deleted == 0, "still within the timeout"
    report = reconcile(store, epoch + 61.0)
    assert report.deleted == len(assigned)
    assert any("not bound within gangTimeoutSeconds" in e for e in report.events)
    run(store, passes=30)  # re-created, placed, bound
    assert all(p["spec"].get("nodeName") for p in store.list("Pod", "serving"))


def _below_minimum_on_a_full_cluster():
    """A placed unit whose decode failed while no node takes anything new: below its
    minimum, prefill still holding its GPUs (gang timeout 120 s)."""
    g = design_group()
    g["spec"]["scheduler"] = {"gangTimeoutSeconds": 120}
    store = world(g)
    run(store)
    for n in store.list("Node"):  # nothing new can be placed anywhere
        store.patch("Node", None, n["metadata"]["name"], {"spec": {"unschedulable": True}})
    for pod in store.list("Pod", "serving", "tandem.dev/role=decode"):
        pod["status"] = {"phase": "Failed"}
        store.update_status(pod)
    return store


def test_a_unit_below_its_minimum_is_released_whole_after_the_gang_timeout():
    store = _below_minimum_on_a_full_cluster()
    reconcile(store, 1000.0)
    unit = store.get("InferenceGroup", "serving", "llama")["status"]["units"][0]
    assert unit["partialSince"] == rfc3339(1000.0) == "1970-01-01T00:16:40Z"
    held = [p for p in store.list("Pod", "serving") if p["spec"].get("nodeName")]
    assert held, "prefill still holds its GPUs while the timeout runs"
    reconcile(store, 1100.0)
    assert [p for p in store.list("Pod", "serving") if p["spec"].get("nodeName")], "within the timeout"
    report = reconcile(store, 1121.0)
    assert any("released to be placed again as a unit" in e for e in report.events)
    assert not [p for p in store.list("Pod", "serving") if p["spec"].get("nodeName")], "nothing held"


def test_a_release_whose_deletes_fail_is_tried_again_at_once_not_timed_anew():
    store = _below_minimum_on_a_full_cluster()
    reconcile(store, 1000.0)
    refused = FaultyWriter(store, lambda n, kind: Conflict("injected") if kind == "delete" else None)
    report = reconcile(refused, 1121.0)  # the release: its deletes fail, its status patch lands
    assert any("released to be placed again as a unit" in e for e in report.events) and report.errors
    assert store.get("InferenceGroup", "serving", "llama")["status"]["units"][0]["partialSince"] == rfc3339(1000.0), "still timed from then"
    reconcile(store, 1122.0)
    assert not [p for p in store.list("Pod", "serving") if p["spec"].get("nodeName")], "released on the next pass"


def test_a_released_unit_is_requeued_with_exponential_backoff():
    store = _below_minimum_on_a_full_cluster()
    reconcile(store, 1000.0)
    reconcile(store, 1121.0)  # released
    unit = store.get("InferenceGroup", "serving", "llama")["status"]["units"][0]
    assert (unit["releases"], unit["retryAfter"]) == (1, rfc3339(1151.0))
    assert reconcile(store, 1140.0).created == 0, "backing off"
    assert store.list("Pod", "serving") == []
    for n in store.list("Node"):  # capacity is back, but only some: prefill fits, decode does not
        store.patch("Node", None, n["metadata"]["name"], {"spec": {"unschedulable": None}})
    assert reconcile(store, 1152.0).created > 0, "retried after the backoff"


def test_exclusive_units_get_a_rack_each_through_the_controller_and_their_pods_say_so():
    """Pods of an exclusive group carry `tandem.dev/exclusive`, so later passes (whose
    snapshot is built from the pods) keep every unit's rack its own."""
    g = group("nvl", [role("prefill", 1, gpus=8), role("decode", 1, gpus=8)], replicas=3, required="rack")
    g["spec"]["topology"]["exclusive"] = "rack"
    store = world(g, shape="block=1,rack=4,host=4")
    run(store)
    pods = store.list("Pod", "serving")
    assert len(pods) == 6 and all(p["metadata"]["labels"]["tandem.dev/exclusive"] == "rack" for p in pods)
    racks: dict[str, set[str]] = {}
    for p in pods:
        rack = store.get("Node", None, p["spec"]["nodeName"])["metadata"]["labels"]["network.tandem.dev/rack"]
        racks.setdefault(p["metadata"]["labels"]["tandem.dev/unit"], set()).add(rack)
    assert all(len(r) == 1 for r in racks.values()) and len(set().union(*racks.values())) == 3


def test_a_stepped_rollout_is_placed_where_the_whole_unit_will_fit():
    """The rollout admits each unit's minimum first; placed for the minimum alone, eight
    units' minimums would fill one rack and none could grow. The engine is told what
    each unit is heading to (`RoleDemand.eventual`), so each unit's domain and reserved
    room are for the whole unit, and every unit ends complete."""
    groups = [group(f"g{i}", [role("prefill", 4, 1, gpus=2), role("decode", 2, 1, gpus=2)], required="rack") for i in range(8)]
    store = world(*groups, shape="block=1,rack=4,host=4")
    run(store, passes=40)
    pods = store.list("Pod")
    assert len(pods) == 48 and all(p["spec"].get("nodeName") for p in pods), "every replica of every unit bound"
    for g in store.list("InferenceGroup"):
        assert g["status"]["units"][0]["state"] == "Complete"
    assert reconcile(store, 100.0).placed == 0
