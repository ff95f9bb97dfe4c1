"""Writes the API refused for good, remembered so that they are not sent again as they were.

A write the API refused as sent (403 Forbidden, 422 Invalid, ...; not a 404, a race) will
be refused again: sent every pass, and passes follow node events, missing RBAC would be
a request storm and a warning a pass. So each refusal is remembered (`refusal.py`, in
`TopologyMemo.refused`) by the write's verb and object, with what makes it *this* write
(`write_key`): its body, and for a scheduler's object the resourceVersion (or uid) it
was decided on. The next decision holds back a write that is the same as a refused one
and tells it in the topology's status (Degraded, reason WriteRefused, the API's words);
a write that differs (the wanted object changed, or the stored one) is sent again. A
held write is sent once more `retry_after` seconds after its refusal (the process's
`--resync`), for a cause fixed outside the cluster's objects (RBAC granted, a webhook
mended).

The topology's own writes (its finalizer, its status) are keyed by body alone: the
controller's own status writes move its resourceVersion, and what they say follows its
spec (observedGeneration) and finalizers already. A status's transition times are left
out of its key: they move with the clock, not with what is wanted. Pure: no clock, no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from tandem.topology_controller.actions import Action, CreateObject, DeleteObject, PatchObject, PatchStatus, Write
from tandem.topology_controller.refusal import Refusal, RefusalTarget


def refusal_target(write: Write) -> RefusalTarget:
    verb = {CreateObject: "create", PatchObject: "patch", PatchStatus: "patch_status", DeleteObject: "delete"}[type(write)]
    return (verb, *write.target)


def write_key(write: Write) -> str:
    """What makes a write the same write (see the module's docstring), as one string."""
    version: Any
    body: Any
    if isinstance(write, CreateObject):
        version, body = None, write.obj
    elif isinstance(write, DeleteObject):
        version, body = write.resource_version, write.uid
    elif isinstance(write, PatchStatus):
        version, body = None, _timeless(write.patch)
    else:
        version, body = (None if write.kind == "ClusterTopology" else write.resource_version), write.patch
    return json.dumps([version, body], sort_keys=True, separators=(",", ":"), default=str)


def _timeless(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _timeless(v) for k, v in value.items() if k != "lastTransitionTime"}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


@dataclass
class RefusalGate:
    """Decide's view of the refusals remembered: which of this pass's writes to hold back,
    and which refusals still stand (their write decided again, held or sent once more)."""

    remembered: Mapping[RefusalTarget, Refusal]
    now: float
    retry_after: float
    standing: list[Refusal] = field(default_factory=list)
    held: list[Refusal] = field(default_factory=list)

    def admit(self, write: Write) -> bool:
        """Whether to send `write`: not when the API refused this very write and no retry is due."""
        if not self.remembered:
            return True
        refusal = self.remembered.get(refusal_target(write))
        if refusal is None or refusal.key != write_key(write):
            return True
        self.standing.append(refusal)
        if self.now < refusal.at + self.retry_after:
            self.held.append(refusal)
            return False
        return True

    def admitted(self, actions: Iterable[Action]) -> list[Action]:
        return [a for a in actions if not isinstance(a, (CreateObject, PatchObject, DeleteObject)) or self.admit(a)]

    def of(self, topology: str) -> list[Refusal]:
        return [r for r in self.standing if r.topology == topology]


def refused_message(refusals: Sequence[Refusal], shown: int) -> str:
    """The words of a WriteRefused finding or event: the first few refusals, the rest counted."""
    words = "; ".join(str(r) for r in refusals[:shown])
    more = f"; and {len(refusals) - shown} more" if len(refusals) > shown else ""
    return f"the API refused {len(refusals)} write(s): {words}{more} (each sent again when what it writes or the object changes, or after a while)"
