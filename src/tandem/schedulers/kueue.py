"""Kueue, for Workloads `kueue.x-k8s.io/v1beta2` and the plain pods of their pod groups.

Kueue admits; kube-scheduler binds. Imitates (kubernetes-sigs/kueue at the commit of
/work/shared/schemas/kueue; status words as site/content/en/docs/tasks/troubleshooting/
troubleshooting_jobs.md shows them):
- a pod belongs to the Workload named by its label `kueue.x-k8s.io/pod-group-name`; Kueue's
  pod webhook gates it `kueue.x-k8s.io/admission` (pkg/controller/jobs/pod/pod_webhook.go);
- Workloads are tried by `spec.priority` (highest first), then age, once every pod their
  PodSets count exists; a Workload is admitted whole or not at all. The quota here is what
  the nodes have free (as Topology Aware Scheduling sees it: every pod of the Workload
  must fit, first fit), with the pods of Workloads admitted earlier counted as placed;
- admitted: conditions `QuotaReserved` True (reason QuotaReserved, `Quota reserved in
  ClusterQueue <cq>`) and `Admitted` True (reason Admitted, `The workload is admitted`),
  `status.admission` (the ClusterQueue, per PodSet its count, flavor and usage), then the
  admission gate is lifted from its pods (pkg/controller/jobs/pod: ungating on admission);
  kube-scheduler's stand-in binds them;
- not admitted: `QuotaReserved` False, reason Pending, `couldn't assign flavors to pod set
  <name>: insufficient unused quota for <resource> in flavor default-flavor, <n> more
  needed` (pkg/scheduler/flavorassigner); a queue that does not exist: reason Inadmissible,
  `LocalQueue <name> doesn't exist` (only when LocalQueues are served here).
The ClusterQueue is the LocalQueue's `spec.clusterQueue` when LocalQueues are served, else
named after the queue. Not imitated: ClusterQueue quotas, cohorts and borrowing,
preemption, admission checks, waitForPodsReady, flavors other than one `default-flavor`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping, Sequence

from tandem.api.quantity import parse_quantity
from tandem.backends.kueue import GROUP_LABEL, ROLE_HASH_ANNOTATION
from tandem.schedulers.fit import Amounts, NodeIndex, add, first_fit, node_ready, pod_requests
from tandem.schedulers.gang import Gang, Pod, place, pod_key
from tandem.schedulers.shared import Decision, Ungate, by_object, in_order, live, merge_conditions, status_write

ADMISSION_GATE = "kueue.x-k8s.io/admission"
FLAVOR = "default-flavor"
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"


def managed(pod: Pod) -> bool:
    """A pod of a Kueue pod group (labelled with its Workload)."""
    return bool((pod["metadata"].get("labels") or {}).get(GROUP_LABEL))


def gated(pod: Pod) -> bool:
    return any(g.get("name") == ADMISSION_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or [])


def admitted(workload: Mapping[str, Any]) -> bool:
    return any(c.get("type") == ADMITTED and c.get("status") == "True" for c in (workload.get("status") or {}).get("conditions") or [])


def decide(
    workloads: Sequence[Mapping[str, Any]],
    pods: Sequence[Pod],
    nodes: NodeIndex,
    used: dict[str, Amounts],
    now: float,
    local_queues: Sequence[Mapping[str, Any]] | None = None,
) -> Decision:
    """`local_queues`: the LocalQueues, or None when the kind is not served here."""
    members: dict[tuple[str, str], list[Pod]] = defaultdict(list)
    for pod in pods:
        if managed(pod) and live(pod):
            members[(pod["metadata"]["namespace"], pod["metadata"]["labels"][GROUP_LABEL])].append(pod)
    known = by_object(workloads)
    decision = Decision()
    # What admitted Workloads' pods not yet bound will take: placed first, as quota already held.
    for key, workload in sorted(known.items()):
        if admitted(workload):
            for pod in in_order(members.get(key, [])):
                if not (pod.get("spec") or {}).get("nodeName"):
                    node, _ = first_fit(pod, nodes, used, pod_requests(pod))
                    if node is not None:
                        add(used.setdefault(node, {}), pod_requests(pod))
                if gated(pod):
                    decision += Decision(ungates=(Ungate(*pod_key(pod), ADMISSION_GATE),))
    queues = None if local_queues is None else by_object(local_queues)
    for key, workload in sorted(known.items(), key=lambda kv: _order(kv[1])):
        if admitted(workload):
            continue
        decision += _try(workload, in_order(members.get(key, [])), nodes, used, now, queues)
    return decision


def _order(workload: Mapping[str, Any]) -> tuple[int, str, str, str]:
    meta = workload["metadata"]
    return (-int((workload.get("spec") or {}).get("priority") or 0), meta.get("creationTimestamp") or "", meta["namespace"], meta["name"])


def _try(workload: Mapping[str, Any], pods: list[Pod], nodes: NodeIndex, used: dict[str, Amounts], now: float,
         queues: Mapping[tuple[str, str], Mapping[str, Any]] | None) -> Decision:
    spec = workload.get("spec") or {}
    namespace = workload["metadata"]["namespace"]
    queue = spec.get("queueName") or ""
    old = dict(workload.get("status") or {})
    if queues is not None and (namespace, queue) not in queues:
        condition = {"type": QUOTA_RESERVED, "status": "False", "reason": "Inadmissible", "message": f"LocalQueue {queue} doesn't exist"}
        return Decision(statuses=status_write(workload, {**old, "conditions": merge_conditions(old.get("conditions") or [], [condition], now)}))
    podsets = spec.get("podSets") or []
    expected = sum(int(ps.get("count") or 0) for ps in podsets)
    if len(pods) < expected or not pods:
        return Decision()  # the pod group is not complete yet: Kueue does not try it
    gang = Gang(namespace, workload["metadata"]["name"], tuple(pods), tuple(pods), len(pods))
    trial_used = dict(used)
    placement = place(gang, nodes, trial_used)
    if not placement.ready:
        condition = {"type": QUOTA_RESERVED, "status": "False", "reason": "Pending", "message": _pending_message(pods, placement.errors, nodes, used)}
        return Decision(statuses=status_write(workload, {**old, "conditions": merge_conditions(old.get("conditions") or [], [condition], now)}))
    used.update(trial_used)
    cluster_queue = queue
    if queues is not None:
        cluster_queue = ((queues[(namespace, queue)].get("spec") or {}).get("clusterQueue")) or queue
    conditions = merge_conditions(old.get("conditions") or [], [
        {"type": QUOTA_RESERVED, "status": "True", "reason": QUOTA_RESERVED, "message": f"Quota reserved in ClusterQueue {cluster_queue}"},
        {"type": ADMITTED, "status": "True", "reason": ADMITTED, "message": "The workload is admitted"},
    ], now)
    status = {**old, "conditions": conditions, "admission": {"clusterQueue": cluster_queue, "podSetAssignments": _assignments(podsets, pods)}}
    ungates = tuple(Ungate(*pod_key(p), ADMISSION_GATE) for p in pods if gated(p))
    return Decision(statuses=status_write(workload, status), ungates=ungates)


def _assignments(podsets: Sequence[Mapping[str, Any]], pods: list[Pod]) -> list[dict[str, Any]]:
    out = []
    for podset in podsets:
        name = podset.get("name", "")
        usage: Amounts = {}
        for pod in pods:
            if (pod["metadata"].get("annotations") or {}).get(ROLE_HASH_ANNOTATION, name) == name:
                add(usage, {k: v for k, v in pod_requests(pod).items() if k != "pods"})
        out.append({
            "name": name,
            "count": int(podset.get("count") or 0),
            "flavors": {resource: FLAVOR for resource in sorted(usage)},
            "resourceUsage": {resource: _quantity(amount) for resource, amount in sorted(usage.items())},
        })
    return out


def _pending_message(pods: list[Pod], errors: Mapping[tuple[str, str], Mapping[str, int]], nodes: NodeIndex, used: Mapping[str, Amounts]) -> str:
    """flavorassigner's reason for the first pod that fits nowhere."""
    failed = next((p for p in pods if pod_key(p) in errors), pods[0])
    podset = (failed["metadata"].get("annotations") or {}).get(ROLE_HASH_ANNOTATION, "main")
    reasons = errors.get(pod_key(failed), {})
    resource = next((r.removeprefix("Insufficient ") for r in sorted(reasons) if r.startswith("Insufficient ")), None)
    if resource is None:
        return f"couldn't assign flavors to pod set {podset}: no node in flavor {FLAVOR} fits its pods"
    wanted = sum(pod_requests(p).get(resource, 0) for p in pods)
    free = 0
    for node in nodes.ordered:
        if not node_ready(node):
            continue
        try:
            capacity = parse_quantity(((node.get("status") or {}).get("allocatable") or {}).get(resource, "0"))
        except ValueError:
            capacity = 0
        free += max(capacity - used.get(node["metadata"]["name"], {}).get(resource, 0), 0)
    more = max(wanted - free, 0)
    if more == 0:
        return f"couldn't assign flavors to pod set {podset}: insufficient unused quota for {resource} in flavor {FLAVOR}"
    return f"couldn't assign flavors to pod set {podset}: insufficient unused quota for {resource} in flavor {FLAVOR}, {_quantity(more)} more needed"


def _quantity(milli: int) -> str:
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
