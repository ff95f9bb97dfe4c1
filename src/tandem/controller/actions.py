"""What a pass decided to do: writes and events, per group, in the order they must run.

Decide returns these; apply executes them. Each names its object fully, carries its
preconditions, and says in words why it exists, so a report or a test can read a pass
without a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from tandem.cluster.ports import Object
from tandem.cluster.writes import RecordEvent  # shared with the topology controller
from tandem.controller.memo import MemoUpdate


@dataclass(frozen=True)
class CreateObject:
    obj: Object
    why: str = ""
    # A delegated group's gang object: if its create fails, the group's pods are not created
    # or admitted in this pass (its scheduler would meet pods without their gang).
    gathers_pods: bool = False

    @property
    def target(self) -> tuple[str, str | None, str]:
        meta = self.obj["metadata"]
        return (self.obj["kind"], meta.get("namespace"), meta["name"])


@dataclass(frozen=True)
class _Named:
    kind: str
    namespace: str | None
    name: str

    @property
    def target(self) -> tuple[str, str | None, str]:
        return (self.kind, self.namespace, self.name)


@dataclass(frozen=True)
class PatchObject(_Named):
    """A JSON merge patch of an object (not its status)."""

    patch: Mapping[str, Any]
    resource_version: str | None = None
    why: str = ""


@dataclass(frozen=True)
class PatchStatus(PatchObject):
    """A JSON merge patch of the `/status` subresource. With `after_creates`, it records
    that the pass's creates all went through: apply skips it when one of them failed."""

    why: str = "status"
    after_creates: bool = False


@dataclass(frozen=True)
class DeleteObject(_Named):
    uid: str | None = None  # delete this object, not a namesake created since
    resource_version: str | None = None
    why: str = ""


Write = CreateObject | PatchObject | PatchStatus | DeleteObject
Action = Write | RecordEvent


@dataclass(frozen=True)
class GroupActions:
    """One group's actions: apply runs them in order and stops none for another group's failure."""

    namespace: str
    name: str
    actions: tuple[Action, ...] = ()
    # The group's resourceVersion as the pass read it, when the pass creates objects for
    # it: apply first confirms the group is still so at the server (`apply._fence`), since
    # a cache can still hold a group whose delete its pods' cache has already heard of.
    fence: str | None = None


@dataclass(frozen=True)
class Decisions:
    groups: tuple[GroupActions, ...] = ()
    # Seconds until the earliest deadline the pass knows of (a gang timeout, a backoff, a
    # step timeout); None when nothing waits on time.
    requeue_after: float | None = None
    placed: int = 0  # pods given a node by this pass
    notes: tuple[str, ...] = field(default_factory=tuple)  # lines for a log that no event carries
    # What the memo should keep for the next pass (settled groups, reads of units, an idle
    # placement): decide returns it, the caller stores it (`Memo.remember`).
    memory: MemoUpdate = field(default_factory=MemoUpdate, compare=False)
