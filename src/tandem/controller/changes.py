"""What a pass changed, in words: one line per decision, from the writes that succeeded.

A log reader wants "group serving/llama unit 0: decode replica 1 created, placed on n-3,
n-4", not a line per pod: the writes one decision makes (a replica's pods created,
admitted, placed or deleted; a unit's peers file) are folded into one `Change`, named by
group, unit and what, with the nodes where it landed. Everything is read from the actions'
own fields (pod names and labels, `why`, the patch), so nothing here reads a cluster.

A status write is worth a line when a condition turned (its `lastTransitionTime` is this
pass's time); otherwise it is the pass's own bookkeeping (coordination memory, counts)
and its line is `quiet`: a log shows it at DEBUG.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from tandem.api.naming import ADMITTED, HOSTNAME_LABEL, REPLICA_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.api.timestamps import seconds
from tandem.controller.actions import CreateObject, DeleteObject, GroupActions, PatchObject, PatchStatus, Write

_PLACED = ", placed on "  # how decide words a create it also placed (`why`)


@dataclass(frozen=True)
class Change:
    group: str  # namespace/name
    unit: int | None  # None: the group as a whole (its Service, its status)
    what: str  # "decode replica 1 created, placed on n-3, n-4", "peers updated", "status: Available True (MinimumsReady)"
    nodes: tuple[str, ...] = ()  # where it landed (named in `what` too)
    quiet: bool = False  # bookkeeping: worth a DEBUG line, not an INFO one

    @property
    def line(self) -> str:
        where = f"group {self.group}" + (f" unit {self.unit}" if self.unit is not None else "")
        return f"{where}: {self.what}"

    def fields(self) -> dict[str, Any]:
        """The change as log fields (for a JSON log)."""
        return {"group": self.group, "unit": self.unit, "change": self.what, "nodes": list(self.nodes)}


def describe(group: GroupActions, done: Iterable[Write], now: float | None = None) -> list[Change]:
    """The changes the writes `done` (those of `group` that succeeded, in order) made; one
    per replica and verb, per unit's peers file, per Service, per status write."""
    where = f"{group.namespace}/{group.name}"
    folded: dict[tuple[Any, ...], list[Write]] = {}
    for action in done:
        folded.setdefault(_key(group.name, action), []).append(action)
    return [_change(where, key, actions, now) for key, actions in folded.items()]


def _key(group: str, action: Write) -> tuple[Any, ...]:
    kind = action.target[0]
    verb = _verb(action)
    if kind == "Pod":
        unit, role, replica = _replica(group, action)
        if isinstance(action, CreateObject) and action.why.split(_PLACED)[0].endswith(" completed"):
            verb = "completed"
        why = action.why if isinstance(action, DeleteObject) else ""
        return ("Pod", verb, unit, role, replica, why)
    if kind == "ConfigMap":
        return ("ConfigMap", verb, _unit_of(group, action.target[2]), "", None, action.why if isinstance(action, DeleteObject) else "")
    return (kind, verb, None, action.target[2], None, "")


def _change(where: str, key: tuple[Any, ...], actions: list[Write], now: float | None) -> Change:
    kind, verb, unit, role, replica, why = key
    if kind == "Pod":
        actions = sorted(actions, key=lambda a: _pod_index(a.target[2]))  # the leader's node first
        return _pods(where, verb, unit, f"{role} replica {replica}" if role else "pod " + ", ".join(a.target[2] for a in actions), why, actions)
    if kind == "ConfigMap":
        text = {"created": "peers file created", "patched": "peers updated", "deleted": "peers file deleted"}[verb]
        return Change(where, unit, text + (f" ({why})" if why else ""))
    if kind == "InferenceGroup" and verb == "status":
        return _status(where, actions[-1], now)
    name = "headless Service" if kind == "Service" else f"{kind} {role}"
    return Change(where, None, f"{name} {verb}")


def _pods(where: str, verb: str, unit: int | None, subject: str, why: str, actions: list[Write]) -> Change:
    nodes = tuple(dict.fromkeys(n for a in actions if (n := _node(a)) is not None))
    on = ", ".join(nodes)
    many = "s" if len(actions) > 1 else ""
    if verb == "created":
        text = f"{subject} created" + (f", placed on {on}" if nodes else "")
    elif verb == "completed":
        text = f"{subject}: {len(actions)} missing pod{many} created" + (f", placed on {on}" if nodes else "")
    elif verb == "deleted":
        text = f"{subject} deleted ({len(actions)} pod{many}" + (f": {why})" if why else ")")
    elif any(_admits(a) for a in actions):
        text = f"{subject} admitted" + (f", placed on {on}" if nodes else "")
    else:
        text = f"{subject} placed on {on}" if nodes else f"{subject} changed"
    return Change(where, unit, text, nodes)


def _status(where: str, action: Write, now: float | None) -> Change:
    status = (action.patch.get("status") or {}) if isinstance(action, PatchObject) else {}
    turned = [c for c in status.get("conditions") or [] if now is not None and _at(c.get("lastTransitionTime"), now)]
    counts = []
    if "replicas" in status:
        units = status["replicas"]
        counts.append(f"{units} unit{'' if units == 1 else 's'}, {status.get('functionalUnits', 0)} functional")
    said = ", ".join(f"{c.get('type')} {c.get('status')} ({c.get('reason')}" + (f": {c['message']})" if c.get("message") else ")") for c in turned)
    text = "status: " + "; ".join(p for p in (said, *counts) if p) if (said or counts) else "status updated"
    return Change(where, None, text, quiet=not turned)


def _verb(action: Write) -> str:
    if isinstance(action, CreateObject):
        return "created"
    if isinstance(action, DeleteObject):
        return "deleted"
    if isinstance(action, PatchStatus):
        return "status"
    return "patched"


def _replica(group: str, action: Write) -> tuple[int | None, str, int | None]:
    """(unit, role, replica) of a pod write: from the labels a create carries, else from the
    pod's name (`<group>-<unit>-<role>-<replica>-<pod>`, api/naming.py)."""
    if isinstance(action, CreateObject):
        labels: Mapping[str, str] = action.obj["metadata"].get("labels") or {}
        unit, role, replica = labels.get(UNIT_LABEL), labels.get(ROLE_LABEL), labels.get(REPLICA_LABEL)
        if unit is not None and role is not None and replica is not None and unit.isdigit() and replica.isdigit():
            return int(unit), role, int(replica)
    name = action.target[2]
    parts = name[len(group) + 1:].split("-") if name.startswith(group + "-") else []
    if len(parts) >= 4 and parts[0].isdigit() and parts[-1].isdigit() and parts[-2].isdigit():
        return int(parts[0]), "-".join(parts[1:-2]), int(parts[-2])
    return None, "", None


def _pod_index(name: str) -> int:
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _unit_of(group: str, name: str) -> int | None:
    """The unit of a peers ConfigMap, from its name (`<group>-<unit>-peers`)."""
    head = name[len(group) + 1:].split("-", 1)[0] if name.startswith(group + "-") else ""
    return int(head) if head.isdigit() else None


def _node(action: Write) -> str | None:
    if isinstance(action, CreateObject):
        spec = action.obj.get("spec") or {}
    elif isinstance(action, PatchObject):
        spec = action.patch.get("spec") or {}
    else:
        return None
    selector = spec.get("nodeSelector") or {}
    node = selector.get(HOSTNAME_LABEL)
    return str(node) if node else None


def _admits(action: Write) -> bool:
    annotations = ((action.patch.get("metadata") or {}).get("annotations") or {}) if isinstance(action, PatchObject) else {}
    return annotations.get(ADMITTED) == "true"


def _at(stamp: Any, now: float) -> bool:
    return isinstance(stamp, str) and abs(seconds(stamp) - now) < 1e-3
