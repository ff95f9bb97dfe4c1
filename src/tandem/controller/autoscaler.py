"""The autoscaler's pass: observe the groups and their signals, decide the new per-role
counts (pure), apply them to the groups' spec, where the coordination scaling planner
takes them up step by step.

    observed = observe_autoscaling(cluster.snapshot(), now, metrics)   # groups due, signals
    decisions = decide_scaling(observed, now)                          # pure: patches, events
    report = apply_scaling(cluster, decisions)                         # writes, group by group

Like the HPA, it writes the desired counts and nothing else: pods are created and
deleted by `reconcile`, within `coordination.scaling.maxSkew`, so an autoscaler change
goes through the same ratio-keeping steps as a change a person makes. The spec change is
a merge patch of `spec.roles` preconditioned on the resourceVersion it decided from (a
concurrent edit makes it conflict and wait for the next pass). What the policy remembers
between decisions (recommendations inside the stabilisation windows, panic) is its own
part of the status, `status.autoscaling`, merge-patched alone: the reconcile pass's
status keys are never read back or rewritten here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from tandem.api.autoscaling import AutoscalingSpec
from tandem.api.group_status import AUTOSCALER_KEYS, AutoscalingStatus, InferenceGroupStatus
from tandem.api.resources import InferenceGroup
from tandem.api.timestamps import rfc3339, seconds
from tandem.api.validation import check_group
from tandem.autoscaling.group import group_inputs
from tandem.autoscaling.memory import AutoscalerState
from tandem.autoscaling.scaler import scale
from tandem.autoscaling.signals import Signals
from tandem.cluster.payloads import as_group
from tandem.cluster.ports import ApiError, Cluster, Conflict, Object, Reader, Writer
from tandem.controller.status_patch import autoscaler_memory_of, autoscaler_state_of, owned_patch, read_status

# (namespace, name, now) -> the group's signals, or None when there are none.
Metrics = Callable[[str, str, float], Signals | None]


# ----------------------------------------------------------------------------- observe


@dataclass(frozen=True)
class Skipped:
    """A group with `spec.autoscaling` that is not scaled in this pass: invalid (`note`
    says why), or not yet due (`due_at`)."""

    key: str
    note: str | None = None
    due_at: float | None = None


@dataclass(frozen=True)
class Due:
    """A group due a decision, with what the decision reads."""

    key: str
    raw: Object
    typed: InferenceGroup
    spec: AutoscalingSpec
    stored: InferenceGroupStatus
    signals: Signals | None


@dataclass(frozen=True)
class AutoscalingState:
    """The groups that configure `spec.autoscaling`, in the order listed."""

    groups: tuple[Due | Skipped, ...] = ()


def observe_autoscaling(reader: Reader, now: float, metrics: Metrics) -> AutoscalingState:
    """Read the groups that configure autoscaling, and the signals of those due a decision."""
    groups: list[Due | Skipped] = []
    for raw in reader.list("InferenceGroup"):
        if not raw.get("spec", {}).get("autoscaling") or raw["metadata"].get("deletionTimestamp"):
            continue
        meta = raw["metadata"]
        key = f"{meta.get('namespace', 'default')}/{meta['name']}"
        try:
            typed = InferenceGroup.model_validate({k: v for k, v in raw.items() if k != "status"})
        except ValueError:
            continue  # reconcile reports an invalid group; there is nothing to scale
        problems = check_group(typed, None)
        spec = typed.spec.autoscaling
        if problems or spec is None:
            if problems:
                groups.append(Skipped(key, note=f"{key}: autoscaler: invalid, skipped: {problems[0]}"))
            continue
        stored = read_status(as_group(raw))
        saved = stored.autoscaling
        if saved is not None and now - seconds(saved.last_decision_at) < spec.interval_seconds:
            groups.append(Skipped(key, due_at=seconds(saved.last_decision_at) + spec.interval_seconds))
            continue
        signals = metrics(typed.metadata.namespace, typed.metadata.name, now)
        groups.append(Due(key, raw, typed, spec, stored, signals))
    return AutoscalingState(tuple(groups))


# ----------------------------------------------------------------------------- decide


@dataclass(frozen=True)
class GroupScaling:
    """One group's decision: the spec patch when the counts change, the status patch, and
    when the group is next due once both are written."""

    key: str
    namespace: str | None
    name: str
    reason: str
    next_due: float
    status_patch: dict[str, Any]
    roles_patch: dict[str, Any] | None = None  # `{"spec": {"roles": [...]}}`
    resource_version: str | None = None  # the precondition of the spec patch
    desired: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ScalingDecisions:
    """Per group, in order: a decision, or a group skipped (a note, or when it is due)."""

    groups: tuple[GroupScaling | Skipped, ...] = ()


def decide_scaling(state: AutoscalingState, now: float) -> ScalingDecisions:
    """The new counts and status of every group due a decision: a pure function of the
    observation and the time."""
    return ScalingDecisions(tuple(_decide_group(group, now) if isinstance(group, Due) else group for group in state.groups))


def _decide_group(group: Due, now: float) -> GroupScaling:
    saved = group.stored.autoscaling
    memory = autoscaler_state_of(saved.state) if saved is not None else AutoscalerState()
    inputs = group_inputs(group.typed)
    decision = scale(group.spec, inputs.bounds, inputs.gpus_per_replica, inputs.current, inputs.units, group.signals, memory, now)
    desired = {k: int(v) for k, v in sorted(decision.desired.items())}
    meta = group.raw["metadata"]
    roles_patch = None
    if decision.changed:
        roles = [
            {**role, "replicas": int(decision.desired[role["name"]])} if role["name"] in decision.desired else role
            for role in group.raw["spec"]["roles"]
        ]
        roles_patch = {"spec": {"roles": roles}}
    status = AutoscalingStatus(
        last_decision_at=rfc3339(now),
        reason=decision.reason,
        panic=decision.panic,
        desired=desired,
        state=autoscaler_memory_of(decision.state),
    )
    return GroupScaling(
        key=group.key,
        namespace=meta.get("namespace"),
        name=meta["name"],
        reason=decision.reason,
        next_due=now + group.spec.interval_seconds,
        status_patch=owned_patch(group.stored.model_copy(update={"autoscaling": status}), AUTOSCALER_KEYS),
        roles_patch=roles_patch,
        resource_version=meta.get("resourceVersion"),
        desired=desired if decision.changed else {},
    )


# ----------------------------------------------------------------------------- apply


@dataclass
class AutoscaleReport:
    events: list[str] = field(default_factory=list)
    changes: list[tuple[str, dict[str, int]]] = field(default_factory=list)  # (namespace/name, desired per role)
    conflicts: int = 0
    requeue_after: float | None = None  # until the next group is due a decision


def apply_scaling(writer: Writer, decisions: ScalingDecisions, now: float) -> AutoscaleReport:
    """Write each group's spec change, then its status; a group whose spec could not be
    written is decided again on the next pass (it is due at once)."""
    report = AutoscaleReport()
    due: list[float] = []
    for group in decisions.groups:
        if isinstance(group, Skipped):
            if group.note is not None:
                report.events.append(group.note)
            if group.due_at is not None:
                due.append(group.due_at)
            continue
        if group.roles_patch is not None:
            try:
                writer.patch("InferenceGroup", group.namespace, group.name, group.roles_patch, resource_version=group.resource_version)
            except Conflict:
                report.conflicts += 1
                continue  # someone changed the group since we read it: decide again next pass
            except ApiError as exc:
                report.events.append(f"{group.key}: autoscaler: spec not written: {exc.message}")
                continue
            report.events.append(f"{group.key}: autoscaler: {group.reason}")
            report.changes.append((group.key, group.desired))
        try:
            # Its own key only, so no precondition: the reconcile pass's keys are not in it.
            writer.patch_status("InferenceGroup", group.namespace, group.name, group.status_patch)
        except ApiError as exc:
            report.events.append(f"{group.key}: autoscaler: memory not written: {exc.message}")
        due.append(group.next_due)
    report.requeue_after = max(min(due) - now, 0.0) if due else None
    return report


# ----------------------------------------------------------------------------- the pass


def autoscale(cluster: Cluster, now: float, metrics: Metrics) -> AutoscaleReport:
    """One pass over the groups that configure `spec.autoscaling` and are due a decision."""
    return apply_scaling(cluster, decide_scaling(observe_autoscaling(cluster.snapshot(), now, metrics), now), now)
