"""When a pod must leave its node: Kubernetes' taint-based eviction, as pure functions.

A node's `NoExecute` taints evict the pods bound to it (kube-controller-manager's taint
manager deletes them):

- a pod that does not tolerate every NoExecute taint goes at once;
- a pod that tolerates them all stays for the smallest `tolerationSeconds` among the
  tolerations it uses (counted, per taint, from when the taint appeared), or for ever
  when none of them has `tolerationSeconds`.

A node that is not Ready carries the taint the node lifecycle controller gives it,
`node.kubernetes.io/not-ready:NoExecute` (its Ready condition False) or
`node.kubernetes.io/unreachable:NoExecute` (Unknown: its kubelet stopped reporting). The
DefaultTolerationSeconds admission plugin gives every pod that has none a toleration of
300 s for each, which is why a lost node's pods go five minutes later.

Nothing here reads a clock: times are seconds passed in by the caller (`kubelets.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from tandem.schedulers.fit import tolerates

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
NO_EXECUTE = "NoExecute"
DEFAULT_TOLERATION_SECONDS = 300  # kube-apiserver's --default-not-ready-toleration-seconds and -unreachable-


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}


def no_execute_taints(node: Mapping[str, Any]) -> frozenset[Taint]:
    """The node's NoExecute taints: those in `spec.taints`, and the one its Ready condition
    implies (not-ready when False, unreachable when Unknown; none when True or absent)."""
    out = {
        Taint(str(t.get("key") or ""), str(t.get("value") or ""), NO_EXECUTE)
        for t in (node.get("spec") or {}).get("taints") or []
        if t.get("effect") == NO_EXECUTE
    }
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            status = condition.get("status")
            if status == "False":
                out.add(Taint(NOT_READY, "", NO_EXECUTE))
            elif status != "True":
                out.add(Taint(UNREACHABLE, "", NO_EXECUTE))
    return frozenset(out)


def eviction_time(taints: Mapping[Taint, float], tolerations: Sequence[Mapping[str, Any]]) -> float | None:
    """When a pod with `tolerations` on a node with these NoExecute `taints` (each with the
    time it appeared) must be deleted; None: never (no taint, or tolerated for ever). A
    time at or before now means at once."""
    due = math.inf
    for taint, since in taints.items():
        matching = [t for t in tolerations if tolerates(t, taint.as_dict())]
        if not matching:
            return min(due, since)
        bounded = [_seconds(t) for t in matching if t.get("tolerationSeconds") is not None]
        if bounded:
            due = min(due, since + max(min(bounded), 0))
    return None if due == math.inf else due


def with_default_tolerations(tolerations: Iterable[Mapping[str, Any]], seconds: int) -> list[dict[str, Any]]:
    """DefaultTolerationSeconds: a toleration of `seconds` for not-ready and for unreachable
    (NoExecute), each added unless the pod already tolerates that taint's key and effect."""
    out = [dict(t) for t in tolerations]
    for key in (NOT_READY, UNREACHABLE):
        if not any((t.get("key") in (key, None, "")) and (t.get("effect") in (NO_EXECUTE, None, "")) for t in out):
            out.append({"key": key, "operator": "Exists", "effect": NO_EXECUTE, "tolerationSeconds": seconds})
    return out


def _seconds(toleration: Mapping[str, Any]) -> float:
    try:
        return float(toleration["tolerationSeconds"])
    except (TypeError, ValueError):
        return 0.0
