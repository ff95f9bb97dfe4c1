"""KAI's and Koordinator's stand-ins: gangs whole or waiting, statuses and pod messages as they write them."""

from __future__ import annotations

from schedulers.helpers import Store, kai_group, kai_pod, koord_group, koord_pod, node, pod


def test_kai_binds_a_gang_only_once_every_leaf_minimum_fits():
    subgroups = [{"name": "decode"}, {"name": "decode.0", "parent": "decode", "minMember": 2}, {"name": "decode.1", "parent": "decode"}]
    store = Store(
        [kai_pod("d-0-0", "g", "decode.0", gpus=8), kai_pod("d-0-1", "g", "decode.0", gpus=8), kai_pod("d-1-0", "g", "decode.1", gpus=8)],
        [node("n-0")],
        {"kai": [kai_group("g", 2, subgroups)]},
    )
    store.run()
    assert store.bound() == {}
    condition = store.gangs["kai"]["g"]["status"]["schedulingConditions"][-1]
    assert {k: condition[k] for k in ("type", "nodePool", "reason", "status", "transitionID")} == {
        "type": "UnschedulableOnNodePool", "nodePool": "default", "reason": "Unschedulable", "status": "True", "transitionID": "0"}
    assert condition["message"] == (
        "PodSchedulingErrors: Resources were found for 1 pods from all sub-groups while sub-group decode.0 requires 2 pods for gang scheduling. "
        "Additional pods cannot be scheduled in this sub-group due to: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu.."
    )
    assert store.scheduled("d-0-1") == ("Unschedulable", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    assert store.scheduled("d-0-0")[0] == "Unschedulable" and store.scheduled("d-0-0")[1].startswith("PodSchedulingErrors: ")

    store.nodes += [node("n-1"), node("n-2")]
    store.run()
    assert set(store.bound()) == {"d-0-0", "d-0-1", "d-1-0"}
    assert "schedulingConditions" not in store.gangs["kai"]["g"]["status"], "placed: the node pool's condition is cleared"


def test_koordinator_binds_a_gang_group_of_two_pod_groups_together():
    members = ["g-0-prefill", "g-0-decode"]
    store = Store(
        [koord_pod("p-0", "g-0-prefill", gpus=8), koord_pod("d-0", "g-0-decode", gpus=8), koord_pod("d-1", "g-0-decode", gpus=8)],
        [node("n-0"), node("n-1")],
        {"koordinator": [koord_group("g-0-prefill", 1, members), koord_group("g-0-decode", 2, members)]},
    )
    store.run()
    assert store.bound() == {}, "the decode PodGroup fits alone, the GangGroup does not"
    assert store.scheduled("p-0") == (
        "Unschedulable",
        'Gang "team/g-0-prefill" gets rejected due to member Pod "p-0" is unschedulable with reason '
        '"0/2 nodes are available: 2 Insufficient nvidia.com/gpu."',
    )
    assert store.gangs["koordinator"]["g-0-decode"]["status"]["phase"] == "PreScheduling"
    store.nodes.append(node("n-2"))
    store.run()
    assert set(store.bound()) == {"p-0", "d-0", "d-1"}
    status = store.gangs["koordinator"]["g-0-decode"]["status"]
    assert (status["phase"], status["scheduled"]) == ("Scheduled", 2)


def test_koordinator_waits_for_missing_members_and_for_too_few_pods():
    store = Store([koord_pod("d-0", "g-decode")], [node("n-0")],
                  {"koordinator": [koord_group("g-decode", 2)]})
    store.run()
    assert store.bound() == {}
    assert store.scheduled("d-0") == ("Unschedulable", "gang child pod not collect enough, gangName: team/g-decode, podName: team/d-0")
    assert store.gangs["koordinator"]["g-decode"]["status"]["phase"] == "Pending"
    lonely = Store([koord_pod("x-0", "g-a")], [node("n-0")], {"koordinator": [koord_group("g-a", 1, ["g-a", "g-b"])]})
    lonely.run()
    assert lonely.bound() == {} and "team/g-b" in lonely.scheduled("x-0")[1]


def test_kai_and_koordinator_leave_other_schedulers_pods_alone():
    store = Store([pod("v", 4, scheduler="volcano"), kai_pod("k", "g", "decode.0")], [node("n-0")],
                  {"kai": [kai_group("g", 1)], "koordinator": [koord_group("g", 1)]})
    store.run()
    assert store.bound() == {"k": "n-0"}
    assert store.scheduled("v") is None
