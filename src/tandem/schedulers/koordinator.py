"""Koordinator's koord-scheduler, for PodGroups `scheduling.sigs.k8s.io/v1alpha1` and pods with `schedulerName: koord-scheduler`.

Imitates (koordinator-sh/koordinator pkg/scheduler/plugins/coscheduling/core/core.go, gang.go):
- a pod joins the PodGroup named by its label `pod-group.scheduling.sigs.k8s.io`; the
  PodGroups listed in a PodGroup's annotation `gang.scheduling.koordinator.sh/groups`
  (`["ns/name", ...]`) are one GangGroup: every member's `minMember` bound together or none
  (Strict mode; Permit waits for the whole group); a GangGroup with a member PodGroup
  missing waits;
- a gang with fewer pods than `minMember`: each pod's PodScheduled False, reason
  `Unschedulable`, `gang child pod not collect enough, gangName: ns/name, podName: ns/pod`
  (PreFilter); a GangGroup that does not fit: every waiting pod's message is `Gang "ns/name"
  gets rejected due to member Pod "pod" is unschedulable with reason "<fit error>"`
  (PostFilter, `rejectGangGroupById`), naming the first member that fit nowhere;
- the PodGroup's `status` as the scheduler-plugins PodGroup controller and the
  coscheduling PostBind keep it (kubernetes-sigs/scheduler-plugins pkg/controllers/
  podgroup_controller.go, whose API Koordinator serves): `phase` Pending, PreScheduling (its
  pods exist, at least `minMember`), Scheduling (some bound), Scheduled (`minMember` bound),
  Running (`minMember` running), Failed, Finished; `scheduled`, `running`, `succeeded`,
  `failed` counts. Whether a Koordinator installation runs that controller depends on it:
  koord-scheduler itself writes only the pods' conditions.
Not imitated: NonStrict mode, `scheduleTimeoutSeconds` (tandem's controller keeps the gang
timeout), network topology gathering, reservations, QoS classes.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Mapping, Sequence

from tandem.backends.koordinator import GROUPS_ANNOTATION, POD_GROUP_LABEL
from tandem.schedulers.fit import Amounts, NodeIndex, unavailable_message
from tandem.schedulers.gang import Gang, Need, Placement, Pod, place, pod_key
from tandem.schedulers.shared import Bind, Decision, by_object, in_order, live, pod_conditions, scheduler_of, status_write, waiting

SCHEDULER_NAME = "koord-scheduler"


def members_of(group: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The PodGroups of `group`'s GangGroup (itself when the annotation is absent or unreadable)."""
    meta = group["metadata"]
    own = (meta["namespace"], meta["name"])
    try:
        listed = json.loads((meta.get("annotations") or {}).get(GROUPS_ANNOTATION) or "[]")
    except ValueError:
        listed = []
    out = {own}
    for entry in listed if isinstance(listed, list) else []:
        namespace, _, name = str(entry).rpartition("/")
        out.add((namespace or meta["namespace"], name))
    return tuple(sorted(out))


def decide(groups: Sequence[Mapping[str, Any]], pods: Sequence[Pod], nodes: NodeIndex, used: dict[str, Amounts], now: float) -> Decision:
    by_group: dict[tuple[str, str], list[Pod]] = defaultdict(list)
    for pod in pods:
        name = (pod["metadata"].get("labels") or {}).get(POD_GROUP_LABEL)
        if scheduler_of(pod) == SCHEDULER_NAME and name and live(pod):
            by_group[(pod["metadata"]["namespace"], name)].append(pod)
    known = by_object(groups)
    gang_groups = sorted({members_of(group) for group in known.values()})
    decision = Decision()
    done: set[tuple[str, str]] = set()
    for members in gang_groups:
        if done & set(members):
            continue  # PodGroups disagreeing about their GangGroup: the first one read wins
        done |= set(members)
        pods_of = {m: in_order(by_group.get(m, [])) for m in members}
        every = in_order(p for m in members for p in pods_of[m])
        needs = tuple(Need(f"{m[0]}/{m[1]}", frozenset(pod_key(p) for p in pods_of[m]), _min_member(known.get(m))) for m in members)
        missing = [f"{m[0]}/{m[1]}" for m in members if m not in known]
        gang = Gang(members[0][0], members[0][1], tuple(every), tuple(p for p in every if waiting(p)), sum(n.minimum for n in needs), needs,
                    blocked=f"gang group member PodGroup {', '.join(missing)} not found" if missing else "")
        placement = place(gang, nodes, used)
        decision += Decision(binds=tuple(Bind(*pod_key(p), node) for p, node in placement.binds))
        binds = {pod_key(p) for p, _ in placement.binds}
        for member in members:
            if member in known:
                decision += Decision(statuses=status_write(known[member], _status(known[member], pods_of[member], binds)))
        if not placement.ready:
            decision += Decision(conditions=pod_conditions(_waiting(gang, placement, pods_of, known, len(nodes.ordered))))
    return decision


def _min_member(group: Mapping[str, Any] | None) -> int:
    return int(((group or {}).get("spec") or {}).get("minMember") or 0)


def _waiting(gang: Gang, placement: Placement, pods_of: Mapping[tuple[str, str], list[Pod]], known: Mapping[tuple[str, str], Any],
             node_count: int) -> list[tuple[Pod, str, str]]:
    if gang.blocked:
        return [(p, "Unschedulable", gang.blocked) for p in gang.pending]
    out: list[tuple[Pod, str, str]] = []
    failed = next((p for p in gang.pending if pod_key(p) in placement.errors), None)
    for member, member_pods in pods_of.items():
        short = len(member_pods) < _min_member(known.get(member))
        for pod in member_pods:
            if pod not in gang.pending:
                continue
            if short:
                message = f"gang child pod not collect enough, gangName: {member[0]}/{member[1]}, podName: {pod['metadata']['namespace']}/{pod['metadata']['name']}"
            elif failed is not None:
                why = unavailable_message(node_count, placement.errors[pod_key(failed)])
                message = f'Gang "{member[0]}/{member[1]}" gets rejected due to member Pod "{failed["metadata"]["name"]}" is unschedulable with reason "{why}"'
            else:
                short_member = next((n.name for n in gang.needs if isinstance(n, Need) and len(n.members) < n.minimum), f"{member[0]}/{member[1]}")
                message = f"gang child pod not collect enough, gangName: {short_member}, podName: {pod['metadata']['namespace']}/{pod['metadata']['name']}"
            out.append((pod, "Unschedulable", message))
    return out


def _status(group: Mapping[str, Any], pods: list[Pod], binds: set[tuple[str, str]]) -> dict[str, Any]:
    old = dict(group.get("status") or {})
    minimum = _min_member(group)
    phases = [(p.get("status") or {}).get("phase") for p in pods]
    scheduled = sum(1 for p in pods if (p.get("spec") or {}).get("nodeName") or pod_key(p) in binds)
    running, succeeded, failed = phases.count("Running"), phases.count("Succeeded"), phases.count("Failed")
    if not pods:
        phase = "Pending"
    elif succeeded >= minimum and succeeded:
        phase = "Finished"
    elif failed and failed + running + succeeded >= minimum:
        phase = "Failed"
    elif running + succeeded >= minimum and scheduled >= minimum:
        phase = "Running"
    elif scheduled >= minimum and scheduled:
        phase = "Scheduled"
    elif scheduled:
        phase = "Scheduling"
    elif len(pods) >= minimum:
        phase = "PreScheduling"
    else:
        phase = "Pending"
    return {**old, "phase": phase, "scheduled": scheduled, "running": running, "succeeded": succeeded, "failed": failed}
