"""What every scheduler stand-in reads and answers: the world in, a `Decision` out.

The decision holds only writes that change something: a gang object's status is written
when it differs from the stored one (a condition that did not change keeps its
`lastTransitionTime` and `transitionID`, as the schedulers compare conditions without
them), a pod's PodScheduled condition when its reason or message changed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from tandem.api.timestamps import rfc3339
from tandem.schedulers.gang import Pod, PodKey, pod_key

DEFAULT_SCHEDULER = "default-scheduler"


@dataclass(frozen=True)
class World:
    """What one pass of the stand-ins reads: every pod and node, each served backend's gang
    objects (`backend -> objects`), Kueue's LocalQueues when served, and the time (seconds)."""

    pods: Sequence[Pod]
    nodes: Sequence[Mapping[str, Any]]
    gangs: Mapping[str, Sequence[Mapping[str, Any]]]
    now: float
    local_queues: Sequence[Mapping[str, Any]] | None = None  # None: the LocalQueue kind is not served


@dataclass(frozen=True)
class Bind:
    namespace: str
    name: str
    node: str


@dataclass(frozen=True)
class PodScheduled:
    """PodScheduled=False on a waiting pod, with the scheduler's reason and message."""

    namespace: str
    name: str
    reason: str
    message: str


@dataclass(frozen=True)
class StatusWrite:
    """A gang object with its new status (write it whole where the kind has no status subresource)."""

    object: Mapping[str, Any]


@dataclass(frozen=True)
class Ungate:
    """Remove scheduling gate `gate` from a pod (Kueue on admission)."""

    namespace: str
    name: str
    gate: str


@dataclass(frozen=True)
class Decision:
    binds: tuple[Bind, ...] = ()
    statuses: tuple[StatusWrite, ...] = ()
    conditions: tuple[PodScheduled, ...] = ()
    ungates: tuple[Ungate, ...] = ()

    def __add__(self, other: "Decision") -> "Decision":
        return Decision(
            self.binds + other.binds,
            self.statuses + other.statuses,
            self.conditions + other.conditions,
            self.ungates + other.ungates,
        )


# ----------------------------------------------------------------------------- pods


def scheduler_of(pod: Pod) -> str:
    return (pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER


def members_by_gang(pods: Iterable[Pod], scheduler: str, gang_of: Callable[[Pod], str | None]) -> dict[tuple[str, str], list[Pod]]:
    """The live pods of `scheduler`, by the (namespace, name) of the gang object `gang_of`
    reads off each (an annotation, a label, a spec field); pods naming none are left out."""
    members: dict[tuple[str, str], list[Pod]] = defaultdict(list)
    for pod in pods:
        name = gang_of(pod)
        if name and scheduler_of(pod) == scheduler and live(pod):
            members[(pod["metadata"]["namespace"], name)].append(pod)
    return members


def live(pod: Pod) -> bool:
    """Not being deleted, not finished."""
    return not pod["metadata"].get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def waiting(pod: Pod) -> bool:
    """Live, unbound and without scheduling gates: a scheduler may bind it now."""
    spec = pod.get("spec") or {}
    return live(pod) and not spec.get("nodeName") and not spec.get("schedulingGates")


def in_order(pods: Iterable[Pod]) -> list[Pod]:
    """The order schedulers take pods in here: creation, then namespace and name."""
    return sorted(pods, key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["namespace"], p["metadata"]["name"]))


def by_object(objects: Iterable[Mapping[str, Any]]) -> dict[PodKey, Mapping[str, Any]]:
    return {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects}


def scheduled_condition(pod: Pod) -> tuple[str, str] | None:
    """The pod's current PodScheduled=False (reason, message), if any."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return condition.get("reason") or "", condition.get("message") or ""
    return None


def pod_conditions(pods: Iterable[tuple[Pod, str, str]]) -> tuple[PodScheduled, ...]:
    """PodScheduled=False writes for (pod, reason, message), only where they change something."""
    out = []
    for pod, reason, message in pods:
        if scheduled_condition(pod) != (reason, message):
            namespace, name = pod_key(pod)
            out.append(PodScheduled(namespace, name, reason, message))
    return tuple(out)


# ----------------------------------------------------------------------------- status


SAME_UNLESS = ("lastTransitionTime", "transitionID")


def merge_conditions(old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]], now: float, key: str = "type") -> list[dict[str, Any]]:
    """`new` conditions, each keeping the old one's `lastTransitionTime` and `transitionID`
    when nothing else changed; stamped `now` otherwise. Conditions of other types stay."""
    stamp = rfc3339(int(now))
    before = {c.get(key): c for c in old}
    replaced = {c.get(key) for c in new}
    out = [dict(c) for c in old if c.get(key) not in replaced]
    for condition in new:
        previous = before.get(condition.get(key))
        merged = dict(condition)
        if previous is not None and _same(previous, merged):
            for name in SAME_UNLESS:
                if name in previous:
                    merged[name] = previous[name]
        else:
            merged["lastTransitionTime"] = stamp
        out.append(merged)
    return out


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    strip = lambda c: {k: v for k, v in c.items() if k not in SAME_UNLESS}  # noqa: E731
    return strip(a) == strip(b)


def status_write(obj: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[StatusWrite, ...]:
    """The object with `status`, when that differs from its stored status."""
    if dict(obj.get("status") or {}) == dict(status):
        return ()
    return (StatusWrite({**obj, "status": dict(status)}),)
