"""What a scheduler says of a waiting unit, in its words (`controller/backend_words.py`)."""

from __future__ import annotations

from tandem.controller.backend_words import unit_words


def _gang(kind: str, name: str, **status: object) -> dict:
    return {"kind": kind, "metadata": {"name": name}, "status": status}


def _pod(name: str, **condition: str) -> dict:
    return {"metadata": {"name": name}, "spec": {}, "status": {"conditions": [{"type": "PodScheduled", "status": "False", **condition}]}}


def test_a_refusing_condition_comes_first_naming_the_object_and_the_scheduler():
    volcano = _gang("PodGroup", "llama-0", phase="Pending", conditions=[
        {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": "2/3 tasks in gang unschedulable"}])
    words = unit_words("volcano", [volcano], [_pod("p", reason="Unschedulable", message="0/8 nodes are available")])
    assert words is not None and words.unschedulable
    assert words.message == "volcano PodGroup llama-0: unschedulable (NotEnoughResources): 2/3 tasks in gang unschedulable"


def test_kueue_quota_and_eviction_are_refusals_until_it_admits_the_workload():
    pending = _gang("Workload", "llama-0", conditions=[{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "couldn't assign flavors"}])
    assert unit_words("kueue", [pending], []).message == "kueue Workload llama-0: quota not reserved (Pending): couldn't assign flavors"
    evicted = _gang("Workload", "llama-0", conditions=[{"type": "Evicted", "status": "True", "reason": "Preempted", "message": "preempted by a higher priority"}])
    assert unit_words("kueue", [evicted], []).message.startswith("kueue Workload llama-0: evicted (Preempted)")
    readmitted = _gang("Workload", "llama-0", conditions=[
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "old"}, {"type": "Admitted", "status": "True"}])
    assert unit_words("kueue", [readmitted], []) is None


def test_kai_node_pool_conditions_a_pods_message_and_a_waiting_phase_in_that_order():
    kai = _gang("PodGroup", "g-0", schedulingConditions=[{"nodePool": "default", "status": "True", "message": "Resources were found for 1 pods"}])
    assert unit_words("kai", [kai], []).message == "kai PodGroup g-0: node pool default: Resources were found for 1 pods"
    koordinator = _gang("PodGroup", "g-0-prefill", phase="Scheduling")
    said = unit_words("koordinator", [koordinator], [_pod("g-0-prefill-0-0", reason="Unschedulable", message="gang child pod not collect enough")])
    assert said.unschedulable and said.message == "koordinator: pod g-0-prefill-0-0: Unschedulable: gang child pod not collect enough"
    quiet = unit_words("koordinator", [koordinator], [_pod("p", reason="SchedulingGated", message="gated")])
    assert quiet is not None and not quiet.unschedulable and quiet.message == "koordinator PodGroup g-0-prefill is Scheduling"
    assert unit_words("volcano", [_gang("PodGroup", "x", phase="Running")], []) is None
