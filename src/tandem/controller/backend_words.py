"""What a delegated group's scheduler says about a unit that waits, in its own words.

Each scheduler reports on its gang object and on the pods: Volcano and KAI a PodGroup
condition `Unschedulable` (KAI also `schedulingConditions` per node pool), Kueue the
Workload's `QuotaReserved`, `Admitted` and `Evicted` conditions, the Koordinator and
Workload API PodGroups a phase, and every scheduler a pod condition `PodScheduled=False`
with its reason. `unit_words` picks the most telling of these for one unit, naming the
object it comes from, so `kubectl describe ig` shows why a delegated unit waits. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from tandem.cluster.payloads import PodPayload
from tandem.cluster.ports import Object

# Phases of a gang that has not been placed yet (Volcano Pending/Inqueue, Koordinator's
# PodGroup Pending/PreScheduling/Scheduling, KAI Pending).
WAITING_PHASES = frozenset({"Pending", "Inqueue", "PreScheduling", "Scheduling"})


@dataclass(frozen=True)
class Words:
    message: str
    unschedulable: bool  # the scheduler says it cannot place the unit now (not merely that it is working on it)


def unit_words(backend: str, gang_objects: Iterable[Object], pods: Iterable[PodPayload]) -> Words | None:
    """The scheduler's words on why the unit's pods wait, or None when it says nothing.
    A condition that refuses (Unschedulable, quota not reserved, evicted) comes first, then a
    pod's PodScheduled=False message, then a gang still in a waiting phase."""
    objects = sorted(gang_objects, key=lambda o: (o.get("kind", ""), o["metadata"]["name"]))
    for obj in objects:
        refusal = _refusal(obj)
        if refusal is not None:
            return Words(f"{backend} {obj.get('kind')} {obj['metadata']['name']}: {refusal}", True)
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        said = _pod_unscheduled(pod)
        if said is not None:
            return Words(f"{backend}: pod {pod['metadata']['name']}: {said}", True)
    for obj in objects:
        phase = (obj.get("status") or {}).get("phase")
        if phase in WAITING_PHASES:
            return Words(f"{backend} {obj.get('kind')} {obj['metadata']['name']} is {phase}", False)
    return None


def _refusal(obj: Object) -> str | None:
    status = obj.get("status") or {}
    conditions = {c.get("type"): c for c in _dicts(status.get("conditions"))}
    admitted = conditions.get("Admitted")
    if admitted is not None and admitted.get("status") == "True":
        return None  # Kueue let it go (an Evicted condition left from before is history)
    evicted = conditions.get("Evicted")
    if evicted is not None and evicted.get("status") == "True":
        return _said("evicted", evicted)
    reserved = conditions.get("QuotaReserved")
    if reserved is not None and reserved.get("status") == "False":
        return _said("quota not reserved", reserved)
    unschedulable = conditions.get("Unschedulable")
    if unschedulable is not None and unschedulable.get("status") == "True" and not _later(conditions.get("Scheduled"), unschedulable):
        return _said("unschedulable", unschedulable)
    pool = [c for c in _dicts(status.get("schedulingConditions")) if c.get("status", "True") == "True" and c.get("message")]
    if pool:
        return "; ".join(f"node pool {c.get('nodePool') or 'default'}: {c['message']}" for c in pool)
    return None


def _later(scheduled: Mapping[str, Any] | None, unschedulable: Mapping[str, Any]) -> bool:
    """Volcano keeps one condition per type: an `Unschedulable` from before stays beside a
    `Scheduled=True` written since (RFC 3339 times of one writer compare as text; a tie, or
    times missing, read as the scheduled one being the later, as Volcano writes it last)."""
    if scheduled is None or scheduled.get("status") != "True":
        return False
    return str(scheduled.get("lastTransitionTime") or "") >= str(unschedulable.get("lastTransitionTime") or "")


def _pod_unscheduled(pod: PodPayload) -> str | None:
    if pod.get("spec", {}).get("nodeName") or pod["metadata"].get("deletionTimestamp"):
        return None
    for condition in _dicts((pod.get("status") or {}).get("conditions")):
        # (Volcano's `Schedulable` says a node was found, naming it: no refusal, and no words that change every pass)
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False" and condition.get("reason") not in ("SchedulingGated", "Schedulable"):
            return _said(str(condition.get("reason") or "not scheduled"), condition)
    return None


def _said(what: str, condition: Mapping[str, Any]) -> str:
    reason, message = condition.get("reason"), condition.get("message")
    parts = [what if not reason or reason == what else f"{what} ({reason})"]
    if message:
        parts.append(str(message))
    return ": ".join(parts)


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []
