"""Kueue's and the Workload API's stand-ins: admission lifts the gate, then kube-scheduler binds; gangs whole."""

from __future__ import annotations

from schedulers.helpers import Store, composite, kueue_pod, node, pod_group, wa_pod, workload
from tandem.schedulers import kueue
from tandem.schedulers.run import first_fit_pass, schedule
from tandem.schedulers.shared import World


def _conditions(obj: dict) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in obj["status"]["conditions"]}


def test_kueue_admits_a_workload_whole_then_lifts_the_gate_and_kube_scheduler_binds():
    store = Store([kueue_pod(f"d-{i}", "g-0", gpus=8) for i in range(3)], [node("n-0"), node("n-1")], {"kueue": [workload("g-0", {"decode": 3})]})
    store.run()
    assert store.bound() == {} and all(p["spec"].get("schedulingGates") for p in store.pods.values()), "not admitted: every pod keeps its gate"
    assert _conditions(store.gangs["kueue"]["g-0"]) == {
        "QuotaReserved": ("False", "Pending",
                          "couldn't assign flavors to pod set decode: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 8 more needed"),
    }
    store.nodes.append(node("n-2"))
    store.run(now=200.0)
    assert set(store.bound()) == {"d-0", "d-1", "d-2"}
    admitted = store.gangs["kueue"]["g-0"]
    assert _conditions(admitted) == {
        "QuotaReserved": ("True", "QuotaReserved", "Quota reserved in ClusterQueue default"),
        "Admitted": ("True", "Admitted", "The workload is admitted"),
    }
    assert admitted["status"]["admission"]["podSetAssignments"] == [
        {"name": "decode", "count": 3, "flavors": {"nvidia.com/gpu": "default-flavor"}, "resourceUsage": {"nvidia.com/gpu": "24"}}
    ]


def test_kueue_waits_for_the_whole_pod_group_and_admits_by_priority():
    store = Store(
        [kueue_pod("low-0", "low", gpus=8), kueue_pod("high-0", "high", gpus=8), kueue_pod("part-0", "part", gpus=1)],
        [node("n-0")],
        {"kueue": [workload("low", {"decode": 1}), workload("high", {"decode": 1}, priority=100), workload("part", {"decode": 2})]},
    )
    store.run()
    assert store.bound() == {"high-0": "n-0"}, "the higher priority Workload takes the node; the incomplete group is not tried"
    assert "status" not in store.gangs["kueue"]["part"]


def test_kueue_says_when_the_local_queue_does_not_exist():
    world = World([kueue_pod("d-0", "g", queue="missing")], [node("n-0")], {"kueue": [workload("g", {"decode": 1}, queue="missing")]}, 0.0, [])
    decision = schedule(world)
    (write,) = decision.statuses
    assert _conditions(dict(write.object)) == {"QuotaReserved": ("False", "Inadmissible", "LocalQueue missing doesn't exist")}
    assert decision.ungates == ()


def test_kube_scheduler_binds_a_kueue_pod_only_once_its_gate_is_gone():
    gated = kueue_pod("d-0", "g")
    assert first_fit_pass(World([gated], [node("n-0")], {}, 0.0), set()).binds == ()
    gated["spec"].pop("schedulingGates")
    assert [b.node for b in first_fit_pass(World([gated], [node("n-0")], {}, 0.0), set()).binds] == ["n-0"]
    assert kueue.managed(gated)


def test_workload_api_pod_groups_bind_whole_and_report_initially_scheduled():
    store = Store([wa_pod(f"d-{i}", "g-0-decode-0", gpus=8) for i in range(2)], [node("n-0")], {"workload-api": [pod_group("g-0-decode-0", 2)]})
    store.run()
    assert store.bound() == {}, "kube-scheduler's plain first fit leaves a Workload API gang's pods to the gang stand-in"
    assert _conditions(store.gangs["workload-api"]["g-0-decode-0"]) == {
        "PodGroupInitiallyScheduled": ("False", "Unschedulable", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")}
    store.nodes.append(node("n-1"))
    store.run()
    assert set(store.bound()) == {"d-0", "d-1"}
    assert _conditions(store.gangs["workload-api"]["g-0-decode-0"])["PodGroupInitiallyScheduled"][:2] == ("True", "Scheduled")


def test_workload_api_composite_groups_need_every_role():
    gangs = [composite("g-0", 2), composite("g-0-prefill", 1, "g-0"), composite("g-0-decode", 1, "g-0"),
             pod_group("g-0-prefill-0", 1, "g-0-prefill"), pod_group("g-0-decode-0", 2, "g-0-decode")]
    store = Store([wa_pod("p", "g-0-prefill-0", gpus=8), wa_pod("d-0", "g-0-decode-0", gpus=8), wa_pod("d-1", "g-0-decode-0", gpus=8)],
                  [node("n-0"), node("n-1")], {"workload-api": gangs})
    store.run()
    assert store.bound() == {}, "both roles are needed: two nodes hold two of three pods"
    store.nodes.append(node("n-2"))
    store.run()
    assert set(store.bound()) == {"p", "d-0", "d-1"}
    assert "status" not in store.gangs["workload-api"]["g-0"], "CompositePodGroups get no status (1.37 leaves it empty)"
