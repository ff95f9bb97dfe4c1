"""Apply: run a pass's actions through the `Writer`, one group at a time.

A failed write of one group never stops another group. Inside a group the actions run
in order; a write that depends on an object whose create failed is skipped, and so is a
status patch that records the pass's creates (`PatchStatus.after_creates`) when any failed,
and every pod create and admission after a delegated group's gang object failed to be made
(`CreateObject.gathers_pods`).
A replica's pods are created together or not at all as far as apply can see to it: once a
create or a delete of one of its pods failed, no more of its pods are created in the pass
(a replacement created beside a pod whose delete failed, or a worker without its leader,
would make a replica that spans what its pack allows; the next pass reads what is left). Every
failure is kept with its object and whether it is retryable (409, 429, 5xx, time-outs:
the next pass tries again) or terminal (403, 404, 422: it will not succeed as sent).
A delete of an object already gone counts as done. An event that cannot be recorded is
counted and dropped: events are best effort, as in Kubernetes.

Creates carry no precondition, so before a group's first create the group is fenced: a
status patch that changes nothing, sent with the resourceVersion the pass read (the
server checks the precondition and, the object being unchanged, writes nothing). A group
deleted since (a 404) gets none of its remaining writes: its pods' cache may have heard
of the cascade before its own cache heard of the delete, and the pass would make them
again. A group changed since (a 409) is decided again by the next pass. Between the fence
and the creates a delete can still land; owner-reference garbage collection takes those.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from tandem.api.naming import replica_prefix
from tandem.cluster.ports import ApiError, NotFound, Writer
from tandem.cluster.writes import WriteError
from tandem.controller.changes import Change, describe
from tandem.cluster.writes import RecordEvent
from tandem.controller.actions import CreateObject, Decisions, DeleteObject, GroupActions, PatchObject, PatchStatus, Write


@dataclass
class PassReport:
    """What one pass did, for logs, the simulator's event log and tests."""

    created: int = 0
    deleted: int = 0
    patched: int = 0  # object patches (admissions and placements of pods)
    status_patches: int = 0
    placed: int = 0  # pods given a node (in a create or a patch)
    events: list[str] = field(default_factory=list)  # one line per event recorded (or not)
    changes: list[Change] = field(default_factory=list)  # what the writes that succeeded changed, a line per decision (changes.py)
    warnings: list[str] = field(default_factory=list)  # of those, the ones to log as warnings
    errors: list[WriteError] = field(default_factory=list)
    known: list[WriteError] = field(default_factory=list)  # of the errors, refusals already reported by an earlier pass
    skipped: int = 0  # writes not tried because one they depend on failed
    events_dropped: int = 0
    fences: int = 0  # groups confirmed at the server before their creates (no write made)
    requeue_after: float | None = None
    by_kind: Counter[tuple[str, str]] = field(default_factory=Counter)  # (verb, kind) -> successful writes

    def count(self, verb: str, kind: str) -> int:
        return self.by_kind[(verb, kind)]

    @property
    def writes(self) -> int:
        return self.created + self.deleted + self.patched + self.status_patches

    @property
    def conflicts(self) -> int:
        return sum(1 for e in self.errors if e.code == 409)

    @property
    def retryable(self) -> list[WriteError]:
        return [e for e in self.errors if e.retryable]

    @property
    def terminal(self) -> list[WriteError]:
        return [e for e in self.errors if not e.retryable]

    @property
    def fresh_errors(self) -> list[WriteError]:
        """The errors worth a log line: all but the refusals an earlier pass reported."""
        return [e for e in self.errors if e not in self.known]


def apply(writer: Writer, decisions: Decisions, now: float | None = None) -> PassReport:
    """`now`, the pass's time, tells a status write that turned a condition from one that
    only keeps the pass's books (`changes.py`)."""
    report = PassReport(placed=decisions.placed, requeue_after=decisions.requeue_after, events=list(decisions.notes))
    for group in decisions.groups:
        done: list[Write] = []
        _apply_group(writer, group, report, done)
        report.changes += describe(group, done, now)
    return report


def _apply_group(writer: Writer, group: GroupActions, report: PassReport, done: list[Write]) -> None:
    failed: set[tuple[str, str | None, str]] = set()  # objects whose create failed
    halted: set[tuple[str | None, str]] = set()  # replicas (namespace, name prefix) with a failed create or delete
    gangless = False  # a gang object's create failed: no pod of the group is made or admitted after it
    where = f"{group.namespace}/{group.name}"
    fence = group.fence
    for position, action in enumerate(group.actions):
        if fence is not None and isinstance(action, CreateObject):
            fence = None
            if not _fence(writer, group, report):
                report.skipped += sum(1 for a in group.actions[position:] if not isinstance(a, RecordEvent))
                return
        if isinstance(action, RecordEvent):
            report.events.append(action.line)
            if action.type == "Warning":
                report.warnings.append(action.line)
            try:
                writer.record_event(action.involved, action.type, action.reason, action.message)
            except ApiError:
                report.events_dropped += 1
            continue
        if action.target in failed or (isinstance(action, PatchStatus) and action.after_creates and failed) or (
            isinstance(action, CreateObject) and _replica(action) in halted
        ) or (gangless and action.target[0] == "Pod" and not isinstance(action, DeleteObject)):
            report.skipped += 1
            if isinstance(action, CreateObject):
                failed.add(action.target)  # not made: what depends on it waits too
            continue
        try:
            _write(writer, action, report)
            done.append(action)
        except NotFound:
            if isinstance(action, DeleteObject):
                continue  # already gone: what the delete wanted
            _fail(report, where, action, NotFound(f"{_describe(action)}: not found"))
        except ApiError as exc:
            _fail(report, where, action, exc)
            if isinstance(action, CreateObject):
                failed.add(action.target)
                gangless |= action.gathers_pods
            if isinstance(action, (CreateObject, DeleteObject)) and _replica(action) is not None:
                halted.add(_replica(action))  # type: ignore[arg-type]


def _replica(action: CreateObject | DeleteObject) -> tuple[str | None, str] | None:
    """The replica a pod write is for: its namespace and its pods' common name prefix."""
    kind, namespace, name = action.target
    return (namespace, replica_prefix(name)) if kind == "Pod" else None


def _fence(writer: Writer, group: GroupActions, report: PassReport) -> bool:
    """Whether the group is still as the pass read it (see the module's docstring)."""
    try:
        writer.patch_status("InferenceGroup", group.namespace, group.name, {}, resource_version=group.fence)
    except NotFound:
        report.events.append(f"{group.namespace}/{group.name}: deleted since it was read; nothing made for it")
        return False
    except ApiError as exc:
        report.errors.append(WriteError(f"{group.namespace}/{group.name}", "confirm InferenceGroup before creating", exc.code, exc.reason, exc.retryable, exc.message))
        report.events.append(str(report.errors[-1]))
        return False
    report.fences += 1
    return True


def _write(writer: Writer, action: Write, report: PassReport) -> None:
    _send(writer, action, report)
    verb = {CreateObject: "create", PatchObject: "patch", PatchStatus: "patch_status", DeleteObject: "delete"}[type(action)]
    report.by_kind[(verb, action.target[0])] += 1


def _send(writer: Writer, action: Write, report: PassReport) -> None:
    if isinstance(action, CreateObject):
        writer.create(action.obj)
        report.created += 1
    elif isinstance(action, PatchStatus):  # before PatchObject: a status patch is one
        writer.patch_status(action.kind, action.namespace, action.name, action.patch, resource_version=action.resource_version)
        report.status_patches += 1
    elif isinstance(action, PatchObject):
        writer.patch(action.kind, action.namespace, action.name, action.patch, resource_version=action.resource_version)
        report.patched += 1
    else:
        writer.delete(action.kind, action.namespace, action.name, uid=action.uid, resource_version=action.resource_version)
        report.deleted += 1


def _fail(report: PassReport, where: str, action: Write, exc: ApiError) -> None:
    """Keep the error; a refusal (terminal, not a 404) gets its line from `reconcile`, once."""
    report.errors.append(WriteError(where, _describe(action), exc.code, exc.reason, exc.retryable, exc.message))
    if not refused(report.errors[-1]):
        report.events.append(str(report.errors[-1]))


def refused(error: WriteError) -> bool:
    """A write the API will refuse again as sent (403, 409 AlreadyExists, 422, ...); a 404
    is a race (the object went meanwhile), not a refusal."""
    return not error.retryable and error.code != 404


def _describe(action: Write) -> str:
    verb = {CreateObject: "create", PatchObject: "patch", PatchStatus: "patch status of", DeleteObject: "delete"}[type(action)]
    kind, namespace, name = action.target
    return f"{verb} {kind} {namespace}/{name}" if namespace else f"{verb} {kind} {name}"
