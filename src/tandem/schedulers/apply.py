"""Writing a `Decision` into a memory store: the one edge both local worlds share.

Gates are lifted first (Kueue's admission), then pods bound, gang statuses written (whole,
with `update`, where the kind has no status subresource: Volcano's and Koordinator's
PodGroup CRDs have none), then PodScheduled conditions. A write that meets a change (a pod
deleted, an object updated meanwhile) is skipped: the next pass decides again.
"""

from __future__ import annotations

from typing import Any, Callable

from tandem.api.timestamps import rfc3339
from tandem.cluster.memory import MemoryStore
from tandem.errors import ApiError
from tandem.schedulers.shared import Decision

ConditionSetter = Callable[[dict[str, Any], str, str], bool]


def apply_decision(store: MemoryStore, decision: Decision, set_condition: ConditionSetter | None = None, *, binds: bool = True) -> bool:
    """Write what the scheduler stand-ins decided: gates lifted, pods bound, gang statuses
    (whole where the kind has no status subresource), PodScheduled conditions. A write that
    meets a change (a pod deleted, an object updated meanwhile) is skipped: the next pass
    decides again. Whether anything was written. `binds=False` leaves binding to the caller
    (the simulator binds after its bind latency)."""
    wrote = False
    if set_condition is None:
        set_condition = set_unscheduled(store, 0.0)
    for ungate in decision.ungates:
        try:
            pod = store.get("Pod", ungate.namespace, ungate.name)
            spec = pod["spec"]
            spec["schedulingGates"] = [g for g in spec.get("schedulingGates") or [] if g.get("name") != ungate.gate]
            if not spec["schedulingGates"]:
                del spec["schedulingGates"]
            store.update(pod)
            wrote = True
        except ApiError:
            continue
    for bind in decision.binds if binds else ():
        try:
            store.bind(bind.namespace, bind.name, bind.node)
            wrote = True
        except ApiError:
            continue
    for write in decision.statuses:
        obj = dict(write.object)
        try:
            if store.has_status(store.key_of(obj)):
                store.update_status(obj)
            else:
                store.update(obj)
            wrote = True
        except ApiError:
            continue
    for condition in decision.conditions:
        try:
            wrote |= set_condition(store.get("Pod", condition.namespace, condition.name), condition.reason, condition.message)
        except ApiError:
            continue
    return wrote




def set_unscheduled(store: MemoryStore, now: float) -> ConditionSetter:
    """A setter of PodScheduled False (reason, message) on a pod, stamped `now`; whether it wrote."""

    def write(pod: dict[str, Any], reason: str, message: str) -> bool:
        conditions = (pod.get("status") or {}).get("conditions") or []
        current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if current and (current.get("status"), current.get("reason"), current.get("message")) == ("False", reason, message):
            return False
        condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message, "lastProbeTime": None,
                     "lastTransitionTime": rfc3339(int(now))}
        store.update_status({**pod, "status": {"phase": "Pending", **(pod.get("status") or {}),
                                               "conditions": [c for c in conditions if c.get("type") != "PodScheduled"] + [condition]}})
        return True

    return write
