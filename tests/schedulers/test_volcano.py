"""Volcano's stand-in: a PodGroup's gang binds whole or waits, in Volcano's own words."""

from __future__ import annotations

from schedulers.helpers import Store, node, pod, volcano_group, volcano_pod


def _condition(group: dict, kind: str) -> dict:
    return next(c for c in group["status"]["conditions"] if c["type"] == kind)


def test_a_gang_waits_until_its_minimum_fits_then_binds_whole_and_runs():
    store = Store(
        [volcano_pod(f"u0-{i}", "g-0", gpus=4) for i in range(3)],
        [node("n-0"), node("n-1", gpus=0)],
        {"volcano": [volcano_group("g-0", 3)]},
    )
    store.run()
    assert store.bound() == {}, "two of three fit: nothing is bound"
    group = store.gangs["volcano"]["g-0"]
    assert group["status"]["phase"] == "Inqueue"
    unschedulable = _condition(group, "Unschedulable")
    assert (unschedulable["status"], unschedulable["reason"]) == ("True", "NotEnoughResources")
    assert unschedulable["message"] == (
        "1/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; Pending: 1 Unschedulable, 2 Schedulable. "
        "Origin reason is u0-2: 0/2 nodes are unavailable: 2 Insufficient nvidia.com/gpu."
    )
    assert store.scheduled("u0-0") == ("Schedulable", "Pod team/u0-0 can possibly be assigned to n-0, once minAvailable is satisfied")
    assert store.scheduled("u0-2") == ("Unschedulable", "0/2 nodes are unavailable: 2 Insufficient nvidia.com/gpu.")

    store.nodes.append(node("n-2"))
    store.run(now=200.0)
    assert store.bound() == {"u0-0": "n-0", "u0-1": "n-0", "u0-2": "n-2"}
    group = store.gangs["volcano"]["g-0"]
    assert group["status"]["phase"] == "Running"
    assert _condition(group, "Scheduled")["reason"] == "tasks in gang are ready to be scheduled"


def test_task_minimums_and_whole_sub_groups_hold_the_gang_back():
    policy = {"name": "prefill", "labelSelector": {"matchLabels": {"role": "prefill"}}, "matchLabelKeys": ["replica"], "subGroupSize": 2, "minSubGroups": 1}
    pods = [
        volcano_pod("d-0", "g", gpus=8, task="decode"),
        volcano_pod("p-0-0", "g", gpus=8, task="prefill", labels={"role": "prefill", "replica": "0"}),
        volcano_pod("p-0-1", "g", gpus=8, task="prefill", labels={"role": "prefill", "replica": "0"}),
    ]
    store = Store(pods, [node("n-0"), node("n-1")], {"volcano": [volcano_group("g", 1, minTaskMember={"decode": 1}, subGroupPolicy=[policy])]})
    store.run()
    assert store.bound() == {}, "the prefill replica needs both its pods: two nodes hold two of three"
    store.nodes.append(node("n-2"))
    store.run()
    assert set(store.bound()) == {"d-0", "p-0-0", "p-0-1"}


def test_a_running_gang_takes_its_extras_one_by_one():
    first = [volcano_pod(f"a-{i}", "g", gpus=8) for i in range(2)]
    store = Store(first, [node("n-0"), node("n-1")], {"volcano": [volcano_group("g", 2)]})
    store.run()
    assert len(store.bound()) == 2
    store.pods.update({p["metadata"]["name"]: p for p in [volcano_pod("extra-0", "g", gpus=8)]})
    store.nodes.append(node("n-2"))
    store.run()
    assert store.bound()["extra-0"] == "n-2"


def test_pods_of_another_scheduler_or_without_their_group_are_left_alone():
    store = Store(
        [pod("plain", 4), pod("kai", 4, scheduler="kai-scheduler"), volcano_pod("orphan", "missing")],
        [node("n-0")],
        {"volcano": [volcano_group("g", 1)]},
    )
    decision = store.run()
    assert [b.name for b in decision.binds] == ["plain"], "only the default scheduler's pod is bound (by kube-scheduler's stand-in)"
    assert store.scheduled("kai") is None and store.scheduled("orphan") is None


def test_an_unchanged_gang_writes_nothing_the_second_time():
    store = Store([volcano_pod(f"u-{i}", "g", gpus=8) for i in range(2)], [node("n-0")], {"volcano": [volcano_group("g", 2)]})
    store.run()
    again = store.run(now=500.0)
    assert again.statuses == () and again.conditions == (), "a waiting gang's status and pods are not rewritten every pass"
