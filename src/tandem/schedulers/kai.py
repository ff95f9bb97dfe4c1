"""KAI Scheduler, for PodGroups `scheduling.run.ai/v2alpha2` and pods with `schedulerName: kai-scheduler`.

Imitates (NVIDIA/KAI-Scheduler at the commit of /work/shared/schemas/kai):
- a pod joins the PodGroup named by its annotation `pod-group-name`, and the sub-group named
  by its label `kai.scheduler/subgroup-name` (a leaf; `parent` links a leaf to its role);
- the gang: `spec.minMember` pods, and every sub-group's `minMember` counting the pods of
  it and of the sub-groups under it, bound together or not at all (the allocate action's
  statement, pkg/scheduler/actions/common/allocate.go);
- a gang that does not fit: `status.schedulingConditions` gets one entry per node pool,
  type `UnschedulableOnNodePool`, reason `Unschedulable`, the next `transitionID`, and the
  job fit error as message: `PodSchedulingErrors: Resources were found for N pods from all
  sub-groups while sub-group S requires M pods for gang scheduling. Additional pods cannot be
  scheduled in this sub-group due to: <why>.` (pkg/scheduler/cache/status_updater/
  default_status_updater.go `markPodGroupUnschedulable`, `setPodGroupSchedulingCondition`;
  allocate.go `newFailedTaskAllocationError`); the entry is left alone while pods of the
  group are allocated, and dropped once the gang is placed (`clearPodGroupSchedulingCondition`);
- each waiting pod's PodScheduled False, reason `Unschedulable`, with its own fit error or
  the job's (`recordUnschedulablePodsEvents`, `markTaskUnschedulable`).
Not imitated: queues, fair share and reclaim, node pools (every node is in pool `default`),
topology constraints, GPU sharing; KAI words node fit errors its own way (`no nodes with
enough resources were found: ...`), here they are kube-scheduler's.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from tandem.api.timestamps import rfc3339
from tandem.backends.kai import GROUP_ANNOTATION, SUBGROUP_LABEL
from tandem.schedulers.fit import Amounts, NodeIndex, unavailable_message
from tandem.schedulers.gang import Gang, Need, Placement, Pod, place, pod_key
from tandem.schedulers.shared import Bind, Decision, by_object, in_order, members_by_gang, pod_conditions, status_write, waiting

SCHEDULER_NAME = "kai-scheduler"
UNSCHEDULABLE_ON_NODE_POOL = "UnschedulableOnNodePool"
NODE_POOL = "default"
POD_SCHEDULING_ERRORS = "PodSchedulingErrors"


def decide(groups: Sequence[Mapping[str, Any]], pods: Sequence[Pod], nodes: NodeIndex, used: dict[str, Amounts], now: float) -> Decision:
    members = members_by_gang(pods, SCHEDULER_NAME, lambda pod: (pod["metadata"].get("annotations") or {}).get(GROUP_ANNOTATION))
    decision = Decision()
    for key, group in sorted(by_object(groups).items()):
        gang = _gang(group, in_order(members.get(key, [])))
        placement = place(gang, nodes, used)
        decision += Decision(binds=tuple(Bind(*pod_key(p), node) for p, node in placement.binds))
        message = "" if placement.ready or not gang.pending else _job_fit_error(gang, placement, len(nodes.ordered))
        decision += Decision(statuses=status_write(group, _status(group, gang, placement, message, now)))
        if message:
            waiting_pods = [
                (p, "Unschedulable", unavailable_message(len(nodes.ordered), placement.errors[pod_key(p)]) if pod_key(p) in placement.errors else message)
                for p in gang.pending
            ]
            decision += Decision(conditions=pod_conditions(waiting_pods))
    return decision


def _leaf(pod: Pod) -> str:
    return (pod["metadata"].get("labels") or {}).get(SUBGROUP_LABEL, "")


def _gang(group: Mapping[str, Any], pods: list[Pod]) -> Gang:
    spec = group.get("spec") or {}
    parents = {sub.get("name", ""): sub.get("parent") for sub in spec.get("subGroups") or []}

    def within(leaf: str, name: str) -> bool:
        seen: set[str] = set()
        while leaf and leaf not in seen:
            if leaf == name:
                return True
            seen.add(leaf)
            leaf = parents.get(leaf) or ""
        return False

    needs = tuple(
        Need(sub["name"], frozenset(pod_key(p) for p in pods if within(_leaf(p), sub["name"])), int(sub["minMember"]))
        for sub in spec.get("subGroups") or []
        if sub.get("minMember")
    )
    meta = group["metadata"]
    return Gang(meta["namespace"], meta["name"], tuple(pods), tuple(p for p in pods if waiting(p)), int(spec.get("minMember") or 0), needs)


def _job_fit_error(gang: Gang, placement: Placement, node_count: int) -> str:
    """allocate.go `newFailedTaskAllocationError`, for the first pod that fits nowhere (or,
    when every pod fits but too few exist, the first sub-group short of its minimum)."""
    found = len(placement.trial)
    failed = next((p for p in gang.pending if pod_key(p) in placement.errors), None)
    why = unavailable_message(node_count, placement.errors[pod_key(failed)]) if failed is not None else "not enough pods exist"
    bound = {pod_key(p) for p in gang.bound} | {pod_key(p) for p, _ in placement.trial}
    short = next((n for n in gang.needs if isinstance(n, Need) and not n.met(bound) and (failed is None or pod_key(failed) in n.members)), None)
    if short is None:
        text = f"Resources were found for {found} pods while {gang.minimum} are required for gang scheduling. Additional pods cannot be scheduled due to: {why}"
    else:
        text = (f"Resources were found for {found} pods from all sub-groups while sub-group {short.name} requires {short.minimum} pods for gang "
                f"scheduling. Additional pods cannot be scheduled in this sub-group due to: {why}")
    return f"{POD_SCHEDULING_ERRORS}: {text}."


def _status(group: Mapping[str, Any], gang: Gang, placement: Placement, message: str, now: float) -> dict[str, Any]:
    """The PodGroup's status: the `default` pool's scheduling condition set while the gang
    waits (a new transitionID only when it changed), dropped once the gang is placed."""
    old = dict(group.get("status") or {})
    conditions = [dict(c) for c in old.get("schedulingConditions") or []]
    others = [c for c in conditions if c.get("nodePool") != NODE_POOL]
    if placement.ready:
        conditions = others
    elif message:
        last = conditions[-1] if conditions else None
        entry = {"type": UNSCHEDULABLE_ON_NODE_POOL, "nodePool": NODE_POOL, "reason": "Unschedulable", "message": message, "status": "True"}
        if last is None or any(last.get(k) != v for k, v in entry.items()):
            try:
                previous = int(str(last.get("transitionID"))) if last is not None else -1
            except ValueError:
                previous = 0
            conditions = others + [{**entry, "transitionID": str(previous + 1), "lastTransitionTime": rfc3339(int(now))}]
    status = {k: v for k, v in old.items() if k != "schedulingConditions"}
    if conditions:
        status["schedulingConditions"] = conditions
    return status
