"""What a controller's pass hands the `Writer` besides objects, and what it learns back.

Both controllers (groups, topologies) record events and report failed writes the same
way, so the two shapes live here, beside the ports they go through, rather than twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tandem.cluster.ports import EventType, ObjectRef


@dataclass(frozen=True)
class RecordEvent:
    """An event a pass decided to record (best effort: a refused one is dropped)."""

    involved: ObjectRef
    type: EventType
    reason: str
    message: str

    @property
    def line(self) -> str:
        where = "/".join(p for p in (self.involved.namespace, self.involved.name) if p)
        return f"{where}: {self.reason}: {self.message}"


@dataclass(frozen=True)
class WriteError:
    """A write the API (or the client) did not carry out, and whether trying it again may succeed."""

    subject: str  # what the write was for: a group "namespace/name", a ClusterTopology's name
    action: str  # e.g. "create Pod serving/llama-0-prefill-0-0", "create HyperNode default-rack-r1"
    code: int  # the HTTP status; 0 when no answer was understood (the client raised)
    reason: str
    retryable: bool
    message: str
    cause: BaseException | None = field(default=None, compare=False, repr=False)  # what the client raised, when not an API answer

    def __str__(self) -> str:
        kind = "retryable" if self.retryable else "terminal"
        return f"{self.subject}: {self.action}: {self.code} {self.reason} ({kind}): {self.message}"
