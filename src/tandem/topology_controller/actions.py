"""What a topology pass decided: writes and events, per ClusterTopology, in order.

Decide returns these; apply runs them. Each names its object fully, carries its
preconditions and says why it exists, so a test reads a pass without a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from tandem.cluster.ports import Object, ObjectRef
from tandem.cluster.writes import RecordEvent  # shared with the group controller
from tandem.topology_controller.refusal import Refusal


@dataclass(frozen=True)
class CreateObject:
    obj: Object
    why: str = ""
    kind: str = ""  # the kind's key, where it is not the object's plain kind (`Topology.kai.scheduler`)

    @property
    def target(self) -> tuple[str, str]:
        return (self.kind or self.obj["kind"], self.obj["metadata"]["name"])


@dataclass(frozen=True)
class PatchObject:
    """A JSON merge patch of an object (not its status), with a resourceVersion precondition."""

    kind: str
    name: str
    patch: Mapping[str, Any]
    resource_version: str | None = None
    why: str = ""

    @property
    def target(self) -> tuple[str, str]:
        return (self.kind, self.name)


@dataclass(frozen=True)
class PatchStatus(PatchObject):
    """A JSON merge patch of the `/status` subresource (the controller is its only writer)."""

    why: str = "status"


@dataclass(frozen=True)
class DeleteObject:
    kind: str
    name: str
    uid: str | None = None  # this object, not a namesake made since
    why: str = ""
    resource_version: str | None = None  # as read: not one whose labels (its ownership) changed since

    @property
    def target(self) -> tuple[str, str]:
        return (self.kind, self.name)


@dataclass(frozen=True)
class RecordWrites:
    """The Normal event TopologyUpdated, its counts told by apply: the writes of `kinds`
    before it in the topology's actions that went through (none: no event), so a refused
    create is never said made, nor said again each pass while it keeps being refused."""

    involved: ObjectRef
    backends: str  # "kai, volcano": the backends whose objects were written
    kinds: frozenset[str]  # the backend kinds whose writes count


Write = CreateObject | PatchObject | PatchStatus | DeleteObject
Action = Write | RecordEvent | RecordWrites


@dataclass(frozen=True)
class TopologyActions:
    """One ClusterTopology's actions (or, named "", those on objects whose topology is
    gone). A write that fails stops only the ones marked to depend on it: the finalizer's
    removal waits for every delete before it (`after_deletes`)."""

    topology: str
    actions: tuple[Action, ...] = ()
    after_deletes: int | None = None  # index of the finalizer removal, skipped if a delete before it failed


@dataclass(frozen=True)
class TopologyDecisions:
    topologies: tuple[TopologyActions, ...] = ()
    held: tuple[Refusal, ...] = ()  # the refusals whose write was decided again and held back (refusal_gate.py)
