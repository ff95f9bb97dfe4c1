"""kube-scheduler's gang scheduling (the Workload API, `scheduling.k8s.io`, KEP-4671) for pods with `spec.schedulingGroup`.

Imitates kube-scheduler 1.37's GangScheduling plugin and workload scheduling cycle
(kubernetes/kubernetes pkg/scheduler, KEP-4671 "The Workload Scheduling Cycle"; types in
kubernetes/api scheduling/v1alpha3):
- a pod (default scheduler) joins the PodGroup named by `spec.schedulingGroup.podGroupName`
  in its namespace; a PodGroup's `schedulingPolicy.gang.minCount` pods are bound together
  or none (`basic`: each pod on its own);
- PodGroups under a CompositePodGroup (`parentCompositePodGroupName`) are one gang with their
  whole tree: a CompositePodGroup needs `schedulingPolicy.gang.minGroupCount` of its
  children met (a `basic` child always is);
- a PodGroup's condition `PodGroupInitiallyScheduled`: False, reason `Unschedulable`, with
  the fit error, while its gang waits; True, reason `Scheduled`, once placed, and then never
  False again (terminal). CompositePodGroups get no status (1.37 leaves theirs empty);
- each waiting pod's PodScheduled False, reason `Unschedulable`, with its fit error or, for a
  pod that fit but whose gang did not, `pod group <name> waits for its gang: <fit error of a
  member>` (this wording is the stand-in's own).
Not imitated: topology constraints (`schedulingConstraints`), DRA claims, preemption,
`disruptionMode`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping, Sequence

from tandem.schedulers.fit import Amounts, NodeIndex, unavailable_message
from tandem.schedulers.gang import AtLeast, Gang, Need, Placement, Pod, place, pod_key
from tandem.schedulers.shared import Bind, DEFAULT_SCHEDULER, Decision, in_order, members_by_gang, merge_conditions, pod_conditions, status_write, waiting

INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"


def group_of(pod: Pod) -> str | None:
    """The PodGroup a pod names, if any."""
    return ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")


def _gang_min(obj: Mapping[str, Any], field: str) -> int:
    gang = ((obj.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
    return int((gang or {}).get(field) or 0) if gang is not None else 0


def decide(
    pod_groups: Sequence[Mapping[str, Any]],
    composites: Sequence[Mapping[str, Any]],
    pods: Sequence[Pod],
    nodes: NodeIndex,
    used: dict[str, Amounts],
    now: float,
) -> Decision:
    members = members_by_gang(pods, DEFAULT_SCHEDULER, group_of)
    groups = {(g["metadata"]["namespace"], g["metadata"]["name"]): g for g in pod_groups}
    parents = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in composites}
    children: dict[tuple[str, str], list[tuple[str, tuple[str, str]]]] = defaultdict(list)  # parent -> (kind, key)
    roots: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)  # root -> its PodGroups

    def root_of(key: tuple[str, str], obj: Mapping[str, Any]) -> tuple[str, str]:
        seen = set()
        while True:
            parent = (obj.get("spec") or {}).get("parentCompositePodGroupName")
            if not parent or (key[0], parent) not in parents or key in seen:
                return key
            seen.add(key)
            key, obj = (key[0], parent), parents[(key[0], parent)]

    for key, obj in list(groups.items()) + list(parents.items()):
        parent = (obj.get("spec") or {}).get("parentCompositePodGroupName")
        if parent and (key[0], parent) in parents:
            children[(key[0], parent)].append(("PodGroup" if key in groups and obj is groups[key] else "CompositePodGroup", key))
    for key, obj in groups.items():
        roots[root_of(key, obj)].append(key)

    def need(kind: str, key: tuple[str, str]) -> Need | AtLeast:
        if kind == "PodGroup":
            return Need(key[1], frozenset(pod_key(p) for p in members.get(key, [])), _gang_min(groups[key], "minCount"))
        kids = tuple(need(k, c) for k, c in sorted(children.get(key, [])))
        return AtLeast(key[1], kids, _gang_min(parents[key], "minGroupCount"))

    decision = Decision()
    for root, leaves in sorted(roots.items()):
        kind = "PodGroup" if root in groups and root in leaves else "CompositePodGroup"
        pods_of = in_order(p for leaf in leaves for p in members.get(leaf, []))
        if not pods_of:
            continue  # nothing to schedule: kube-scheduler writes nothing
        gang = Gang(root[0], root[1], tuple(pods_of), tuple(p for p in pods_of if waiting(p)), 0, (need(kind, root),))
        placement = place(gang, nodes, used)
        decision += Decision(binds=tuple(Bind(*pod_key(p), node) for p, node in placement.binds))
        message = "" if placement.ready else _gang_error(gang, placement, len(nodes.ordered))
        for leaf in sorted(leaves):
            decision += Decision(statuses=status_write(groups[leaf], _status(groups[leaf], placement.ready, message, now)))
        if not placement.ready:
            out = []
            for pod in gang.pending:
                reasons = placement.errors.get(pod_key(pod))
                text = unavailable_message(len(nodes.ordered), reasons) if reasons is not None else f"pod group {group_of(pod)} waits for its gang: {message}"
                out.append((pod, "Unschedulable", text))
            decision += Decision(conditions=pod_conditions(out))
    return decision


def _gang_error(gang: Gang, placement: Placement, node_count: int) -> str:
    failed = next((p for p in gang.pending if pod_key(p) in placement.errors), None)
    if failed is None:
        return f"{len(gang.pods)} pods exist, fewer than the gang needs"
    return unavailable_message(node_count, placement.errors[pod_key(failed)])


def _status(group: Mapping[str, Any], ready: bool, message: str, now: float) -> dict[str, Any]:
    old = dict(group.get("status") or {})
    conditions = old.get("conditions") or []
    if any(c.get("type") == INITIALLY_SCHEDULED and c.get("status") == "True" for c in conditions):
        return old  # terminal once True
    condition = (
        {"type": INITIALLY_SCHEDULED, "status": "True", "reason": "Scheduled", "message": ""}
        if ready
        else {"type": INITIALLY_SCHEDULED, "status": "False", "reason": "Unschedulable", "message": message}
    )
    generation = (group.get("metadata") or {}).get("generation")
    if generation is not None:
        condition["observedGeneration"] = generation
    return {**old, "conditions": merge_conditions(conditions, [condition], now)}
