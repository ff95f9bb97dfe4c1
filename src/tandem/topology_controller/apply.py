"""Apply: run a topology pass's actions through the `Writer`, each write on its own.

One ClusterTopology's failed write never stops another's, nor another object's: the
only write that waits for others is a finalizer's removal, skipped when a delete before
it failed (the objects would outlive their topology). A delete of an object already gone
counts as done. Every failure is kept with whether it is retryable (409, 429, 5xx,
time-outs: the next pass tries again, soon) or terminal (403, 422, ...: it will not
succeed as sent: kept with its write, for the memo, `refusal_gate.py`). A write the client itself fails on (an answer it cannot decode, any
exception not an API error) is that write's failure only, retryable, kept with the
exception for the log. Events are best effort: a refused one is counted and dropped.
TopologyUpdated counts the writes that went through, not those decided.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from tandem.cluster.ports import ApiError, NotFound, Writer
from tandem.cluster.writes import RecordEvent, WriteError
from tandem.topology_controller.actions import (
    CreateObject,
    DeleteObject,
    PatchObject,
    PatchStatus,
    RecordWrites,
    TopologyActions,
    TopologyDecisions,
    Write,
)


@dataclass
class Applied:
    created: int = 0
    patched: int = 0
    deleted: int = 0
    status_patches: int = 0
    skipped: int = 0
    events: list[str] = field(default_factory=list)
    events_dropped: int = 0
    errors: list[WriteError] = field(default_factory=list)
    refused: list[tuple[Write, WriteError]] = field(default_factory=list)  # of the errors, refusals for good (403, 422; not a 404), with their write
    by_kind: Counter[tuple[str, str]] = field(default_factory=Counter)  # (verb, kind) -> writes that went through


def apply(writer: Writer, decisions: TopologyDecisions) -> Applied:
    applied = Applied()
    for topology in decisions.topologies:
        _apply_topology(writer, topology, applied)
    return applied


def _apply_topology(writer: Writer, topology: TopologyActions, applied: Applied) -> None:
    deletes_failed = False
    done: Counter[tuple[str, str]] = Counter()  # (verb, kind) -> this topology's writes that went through
    for position, action in enumerate(topology.actions):
        if isinstance(action, RecordWrites):
            counts = {verb: sum(n for (v, kind), n in done.items() if v == verb and kind in action.kinds) for verb in ("create", "patch", "delete")}
            if not any(counts.values()):
                continue
            action = RecordEvent(action.involved, "Normal", "TopologyUpdated",
                                 f"{action.backends}: created {counts['create']}, updated {counts['patch']}, deleted {counts['delete']}")
        if isinstance(action, RecordEvent):
            applied.events.append(action.line)
            try:
                writer.record_event(action.involved, action.type, action.reason, action.message)
            except Exception:  # an API refusal or a client failure alike: events are best effort
                applied.events_dropped += 1
            continue
        if position == topology.after_deletes and deletes_failed:
            applied.skipped += 1
            continue
        try:
            done[(_send(writer, action, applied), action.target[0])] += 1
        except NotFound:
            if isinstance(action, DeleteObject):
                continue  # already gone: what the delete wanted
            _fail(applied, topology.topology, action, NotFound(f"{_describe(action)}: not found"))
        except ApiError as exc:
            _fail(applied, topology.topology, action, exc)
            deletes_failed |= isinstance(action, DeleteObject)
        except Exception as exc:  # the client could not carry it out (an answer it cannot decode, ...): this write only
            _keep(applied, WriteError(topology.topology, _describe(action), 0, type(exc).__name__, True, str(exc) or repr(exc), cause=exc))
            deletes_failed |= isinstance(action, DeleteObject)


def _send(writer: Writer, action: Write, applied: Applied) -> str:
    """Send one write; its verb as the metrics name it."""
    if isinstance(action, CreateObject):
        writer.create(action.obj)
        applied.created += 1
        verb = "create"
    elif isinstance(action, PatchStatus):  # before PatchObject: a status patch is one
        writer.patch_status(action.kind, None, action.name, action.patch, resource_version=action.resource_version)
        applied.status_patches += 1
        verb = "patch_status"
    elif isinstance(action, PatchObject):
        writer.patch(action.kind, None, action.name, action.patch, resource_version=action.resource_version)
        applied.patched += 1
        verb = "patch"
    else:
        writer.delete(action.kind, None, action.name, uid=action.uid, resource_version=action.resource_version)
        applied.deleted += 1
        verb = "delete"
    applied.by_kind[(verb, action.target[0])] += 1
    return verb


def _fail(applied: Applied, topology: str, action: Write, exc: ApiError) -> None:
    error = WriteError(topology, _describe(action), exc.code, exc.reason, exc.retryable, exc.message)
    _keep(applied, error)
    if not exc.retryable and exc.code != 404:  # a 404 is a race (the object went meanwhile), not a refusal
        applied.refused.append((action, error))


def _keep(applied: Applied, error: WriteError) -> None:
    applied.errors.append(error)
    applied.events.append(str(error))


def _describe(action: Write) -> str:
    verb = {CreateObject: "create", PatchObject: "patch", PatchStatus: "patch status of", DeleteObject: "delete"}[type(action)]
    kind, name = action.target
    return f"{verb} {kind} {name}"
