"""Volcano's scheduler, for PodGroups `scheduling.volcano.sh/v1beta1` and pods with `schedulerName: volcano`.

Imitates (volcano-sh/volcano at the commit of /work/shared/schemas/volcano):
- a pod joins the PodGroup named by its annotation `scheduling.k8s.io/group-name`; its task
  is the annotation `volcano.sh/task-spec`;
- the gang (plugins/gang/gang.go, api/job_info.go `IsReady`): `spec.minMember` pods, each
  task's `minTaskMember`, and each `subGroupPolicy` entry's `minSubGroups` complete
  sub-groups (pods matching its `labelSelector`, grouped by `matchLabelKeys`, `subGroupSize`
  each), bound together or not at all (actions/allocate: a statement committed or discarded);
- the PodGroup's `status` (framework/session.go `jobStatus`, `getPodGroupPhase`): `phase`
  Inqueue until `minMember` pods are scheduled, then Running (tandem's PodGroups carry no
  `minResources`, so the enqueue action lets them in at once: plugins/overcommit), and
  `running`, `succeeded`, `failed` counts;
- on a gang that does not fit (gang.go `OnSessionClose`): condition `Unschedulable` True,
  reason `NotEnoughResources`, message `N/M tasks in gang unschedulable: pod group is not
  ready, ...` (job_info.go `FitError`); a gang that fits gets `Scheduled` True, reason `tasks
  in gang are ready to be scheduled`; each condition is kept per type (session.go
  `UpdatePodGroupCondition`), so an earlier `Unschedulable` stays beside `Scheduled`, with the
  transitionID of the session that wrote it;
- each waiting pod's PodScheduled False (cache/cache.go `taskUnschedulable`,
  job_info.go `TaskSchedulingReason`): `Unschedulable` with the node fit error (`0/N nodes are
  unavailable: ...`, api/unschedule_info.go), or `Schedulable`, `Pod ns/name can possibly be
  assigned to <node>, once minAvailable is satisfied` for a pod that fit but whose gang did not.
A pod whose PodGroup does not exist waits untouched (Volcano's controller would make one).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping, Sequence

from tandem.backends.volcano import GROUP_ANNOTATION, TASK_ANNOTATION
from tandem.schedulers.fit import Amounts, NodeIndex, unavailable_message
from tandem.schedulers.gang import Gang, Need, Placement, Pod, WholeGroups, place, pod_key
from tandem.schedulers.shared import Bind, Decision, by_object, in_order, members_by_gang, merge_conditions, pod_conditions, status_write, waiting

SCHEDULER_NAME = "volcano"
UNSCHEDULABLE = "Unschedulable"
SCHEDULED = "Scheduled"
NOT_ENOUGH_RESOURCES = "NotEnoughResources"
READY_REASON = "tasks in gang are ready to be scheduled"


def decide(groups: Sequence[Mapping[str, Any]], pods: Sequence[Pod], nodes: NodeIndex, used: dict[str, Amounts], now: float) -> Decision:
    members = members_by_gang(pods, SCHEDULER_NAME, lambda pod: (pod["metadata"].get("annotations") or {}).get(GROUP_ANNOTATION))
    decision = Decision()
    session = str(int(now))
    for key, group in sorted(by_object(groups).items()):
        gang = _gang(group, in_order(members.get(key, [])))
        placement = place(gang, nodes, used)
        decision += Decision(binds=tuple(Bind(*pod_key(p), node) for p, node in placement.binds))
        decision += Decision(statuses=status_write(group, _status(group, gang, placement, session, now, len(nodes.ordered))))
        decision += Decision(conditions=pod_conditions(_waiting_pods(gang, placement, len(nodes.ordered))))
    return decision


def _gang(group: Mapping[str, Any], pods: list[Pod]) -> Gang:
    spec = group.get("spec") or {}
    keys = {pod_key(p): p for p in pods}
    needs: list[Need | WholeGroups] = []
    for task, minimum in sorted((spec.get("minTaskMember") or {}).items()):
        task_pods = frozenset(k for k, p in keys.items() if (p["metadata"].get("annotations") or {}).get(TASK_ANNOTATION) == task)
        needs.append(Need(task, task_pods, int(minimum)))
    for policy in spec.get("subGroupPolicy") or []:
        selector = (policy.get("labelSelector") or {}).get("matchLabels") or {}
        grouped: dict[tuple[str, ...], set[tuple[str, str]]] = defaultdict(set)
        for k, pod in keys.items():
            labels = pod["metadata"].get("labels") or {}
            if all(labels.get(a) == b for a, b in selector.items()):
                grouped[tuple(labels.get(label, "") for label in policy.get("matchLabelKeys") or [])].add(k)
        needs.append(WholeGroups(policy.get("name", ""), tuple(frozenset(v) for _, v in sorted(grouped.items())),
                                 int(policy.get("subGroupSize") or 1), int(policy.get("minSubGroups") or 0)))
    meta = group["metadata"]
    return Gang(meta["namespace"], meta["name"], tuple(pods), tuple(p for p in pods if waiting(p)), int(spec.get("minMember") or 0), tuple(needs))


def _task_status(pod: Pod, binds: Mapping[tuple[str, str], str]) -> str:
    """Volcano's TaskStatus of a pod (api/helpers.go `getTaskStatus`), after this session's binds."""
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Running":
        return "Running"
    if (pod.get("spec") or {}).get("nodeName") or pod_key(pod) in binds:
        return "Bound"
    return "Pending"


def _status(group: Mapping[str, Any], gang: Gang, placement: Placement, session: str, now: float, node_count: int) -> dict[str, Any]:
    old = dict(group.get("status") or {})
    binds = {pod_key(p): node for p, node in placement.binds}
    statuses = [_task_status(p, binds) for p in gang.pods]
    scheduled = sum(1 for s in statuses if s in ("Bound", "Running"))
    ready = placement.ready
    new_conditions: list[dict[str, Any]] = []
    if gang.pods and not ready:
        schedulable = len(placement.trial) + scheduled
        message = f"{gang.minimum - schedulable}/{len(gang.pods)} tasks in gang unschedulable: {_fit_error(gang, placement, statuses, node_count)}"
        new_conditions.append({"type": UNSCHEDULABLE, "status": "True", "transitionID": session, "reason": NOT_ENOUGH_RESOURCES, "message": message})
    elif gang.pods:
        new_conditions.append({"type": SCHEDULED, "status": "True", "transitionID": session, "reason": READY_REASON, "message": ""})
    conditions = merge_conditions(old.get("conditions") or [], new_conditions, now)
    if gang.pods and not ready and "Running" in statuses:
        phase = "Unknown"  # some tasks run, the gang is short: getPodGroupPhase
    else:
        phase = "Running" if scheduled >= gang.minimum and gang.pods else "Inqueue"
    status: dict[str, Any] = {**old, "phase": phase}
    if conditions:
        status["conditions"] = conditions
    for name, value in (("running", statuses.count("Running")), ("succeeded", 0), ("failed", 0)):
        if value or name in old:
            status[name] = value
    return status


def _fit_error(gang: Gang, placement: Placement, statuses: list[str], node_count: int) -> str:
    """job_info.go `FitError`: the tasks by status and minAvailable, the pending ones by
    reason, then the first pending task's node fit error."""
    counts: dict[str, int] = defaultdict(int)
    for status in statuses:
        counts[status] += 1
    counts["minAvailable"] = gang.minimum
    text = "pod group is not ready, " + ", ".join(sorted(f"{n} {s}" for s, n in counts.items()))
    trial = {pod_key(p) for p, _ in placement.trial}
    pending: dict[str, int] = defaultdict(int)
    for pod in gang.pending:
        pending["Schedulable" if pod_key(pod) in trial else "Unschedulable"] += 1
    if pending:
        text += "; Pending: " + ", ".join(sorted(f"{n} {s}" for s, n in pending.items()))
    for pod in gang.pods:
        reasons = placement.errors.get(pod_key(pod))
        if reasons is not None:
            text += f". Origin reason is {pod['metadata']['name']}: {unavailable_message(node_count, reasons, 'unavailable')}"
            break
    return text


def _waiting_pods(gang: Gang, placement: Placement, node_count: int) -> list[tuple[Pod, str, str]]:
    if placement.ready:
        return []
    trial = {pod_key(p): node for p, node in placement.trial}
    out = []
    for pod in gang.pending:
        key = pod_key(pod)
        if key in trial:
            out.append((pod, "Schedulable", f"Pod {key[0]}/{key[1]} can possibly be assigned to {trial[key]}, once minAvailable is satisfied"))
        elif key in placement.errors:
            out.append((pod, UNSCHEDULABLE, unavailable_message(node_count, placement.errors[key], "unavailable")))
    return out
