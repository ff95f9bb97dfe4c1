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
import math
from typing import Any, Callable

from tandem.api.autoscaling import AutoscalingSpec
from tandem.api.group_status import AUTOSCALER_KEYS, AUTOSCALING_CONDITION, AutoscalingStatus, Condition, InferenceGroupStatus
from tandem.api.resources import InferenceGroup
from tandem.api.timestamps import rfc3339, seconds
from tandem.api.validation import check_group
from tandem.autoscaling.group import group_inputs
from tandem.autoscaling.memory import AutoscalerState
from tandem.autoscaling.metrics_source import OPERATOR_HAS_NONE, NoSource
from tandem.autoscaling.scaler import ScaleDecision, scale
from tandem.autoscaling.signals import Signals
from tandem.cluster.payloads import as_group
from tandem.cluster.unit_autoscalers import unit_autoscalers
from tandem.cluster.ports import ApiError, Cluster, Conflict, EventType, Object, ObjectRef, Reader, Writer
from tandem.controller.status_patch import autoscaler_memory_of, autoscaler_state_of, condition, owned_patch, read_status

# (namespace, name, now) -> the group's signals, or None when there are none.
Metrics = Callable[[str, str, float], Signals | None]
# A group -> the source that reads its signals, or why it has none (the operator's: its
# `spec.autoscaling.metrics` over the flags, `tandem.autoscaling.metrics_source`).
Sources = Callable[[InferenceGroup], Metrics | NoSource]

SCALED = "ScaledTo"  # the Normal event's reason for a change written
# The condition's reasons: the autoscaler decides from signals, or why it cannot.
VALID_SIGNALS, NO_METRICS_SOURCE, NO_SIGNALS, STALE_SIGNALS, MISSING_SIGNAL = (
    "ValidSignals", "NoMetricsSource", "NoSignals", "StaleSignals", "MissingSignal",
)
# An HPA or KEDA ScaledObject scales the group's units too (admission refuses it; it may
# exist anyway): the group's counts are left alone until one of the two goes.
CONFLICTING_AUTOSCALER = "ConflictingAutoscaler"


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
    unsourced: str | None = None  # why the group has no metrics source (None: it has one)
    rivals: tuple[str, ...] = ()  # the HPAs and ScaledObjects scaling its units (cluster/unit_autoscalers.py)


@dataclass(frozen=True)
class AutoscalingState:
    """The groups that configure `spec.autoscaling`, in the order listed."""

    groups: tuple[Due | Skipped, ...] = ()


def observe_autoscaling(reader: Reader, now: float, metrics: Metrics | None, sources: Sources | None = None) -> AutoscalingState:
    """Read the groups that configure autoscaling, and the signals of those due a decision
    from each one's source: `sources` picks it per group; without it, `metrics` reads every
    group (None: no source at all)."""
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
        rivals = unit_autoscalers(reader, typed.metadata.namespace, typed.metadata.name)
        if rivals:  # another autoscaler scales the units: no signals are read for a group tandem leaves alone
            groups.append(Due(key, raw, typed, spec, stored, None, rivals=rivals))
            continue
        source = sources(typed) if sources is not None else metrics if metrics is not None else NoSource(OPERATOR_HAS_NONE)
        if isinstance(source, NoSource):
            groups.append(Due(key, raw, typed, spec, stored, None, unsourced=source.message))
            continue
        groups.append(Due(key, raw, typed, spec, stored, source(typed.metadata.namespace, typed.metadata.name, now)))
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
    # `ScalingActive` as it should be; `conditions` the list to write (the stored one with
    # it in place) when it changed, else None; `warning` when it turned False or changed why.
    active: Condition | None = None
    conditions: list[dict[str, Any]] | None = None
    warning: bool = False
    scaled_message: str = ""  # the ScaledTo event's message, for a change
    signals: Signals | None = None  # what the decision read, for the operator's metrics
    panic: bool = False
    decided: dict[str, int] = field(default_factory=dict)  # every managed role's count per unit after the decision
    involved: ObjectRef | None = None  # the group, as the events name it


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
    if group.rivals:  # another autoscaler scales the units: the roles are not written, the memory kept as it was
        kept = dict(inputs.current)
        decision = ScaleDecision(kept, False, f"no action: the units are scaled by {', '.join(group.rivals)}", False, memory, kept)
    else:
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
    stored = group.stored.condition(AUTOSCALING_CONDITION)
    active = _active(group, decision, now)
    same = stored is not None and (stored.status, stored.reason, stored.message) == (active.status, active.reason, active.message)
    conditions = None
    if not same:
        written = [c if c.type != AUTOSCALING_CONDITION else active for c in group.stored.conditions]
        written += [] if stored is not None else [active]
        conditions = [c.model_dump(by_alias=True, mode="json") for c in written]
    order = [role["name"] for role in group.raw["spec"]["roles"] if role["name"] in desired]
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
        active=active,
        conditions=conditions,
        warning=active.status == "False" and not same,
        scaled_message=" ".join(f"{role}={desired[role]}" for role in order) + f": {decision.reason}",
        signals=group.signals,
        panic=decision.panic,
        decided=desired,
        involved=ObjectRef.of(group.raw),
    )


def _active(group: Due, decision: ScaleDecision, now: float) -> Condition:
    """`ScalingActive`: whether the decision read usable signals, and if not, why not."""
    generation = int(group.raw["metadata"].get("generation") or 0)
    before = group.stored.conditions
    signals = group.signals
    if group.rivals:
        why, message = CONFLICTING_AUTOSCALER, (
            f"the group's units are scaled by {', '.join(group.rivals)}: tandem does not autoscale it while another autoscaler does; "
            "delete that one, or remove spec.autoscaling")
    elif group.unsourced is not None:
        why, message = NO_METRICS_SOURCE, group.unsourced
    elif signals is None:
        why, message = NO_SIGNALS, "the metrics source has no signals for the group: counts held (missing data never scales down)"
    elif now - signals.at > group.spec.metric_max_age_seconds or math.isnan(signals.at):
        why, message = STALE_SIGNALS, (
            f"the newest signals are older than metricMaxAgeSeconds ({group.spec.metric_max_age_seconds} s): counts held "
            "(missing data never scales down)")
    elif decision.reason.startswith("no action: "):
        why, message = MISSING_SIGNAL, decision.reason.removeprefix("no action: ").split(" -> ")[0] + ": counts held"
    else:
        return condition(before, AUTOSCALING_CONDITION, True, VALID_SIGNALS, f"{group.spec.policy} sizes the roles from the group's signals", now,
                         generation)
    return condition(before, AUTOSCALING_CONDITION, False, why, message, now, generation)


# ----------------------------------------------------------------------------- apply


@dataclass(frozen=True)
class Decided:
    """What one group's decision read and wrote, for the operator's metrics."""

    namespace: str
    name: str
    outcome: str  # scaled, unchanged (usable signals, nothing to change), held (the condition's False reason), conflict, failed
    desired: dict[str, int]  # every managed role per unit, as decided
    panic: bool
    signals: Signals | None
    age: float | None  # seconds from the signals' measurement to the decision


@dataclass
class AutoscaleReport:
    events: list[str] = field(default_factory=list)
    changes: list[tuple[str, dict[str, int]]] = field(default_factory=list)  # (namespace/name, desired per role)
    conflicts: int = 0
    requeue_after: float | None = None  # until the next group is due a decision
    warnings: list[str] = field(default_factory=list)  # of `events`, the ones that are Warning events
    decided: list[Decided] = field(default_factory=list)  # a row per group decided this pass
    groups: list[tuple[str, str]] = field(default_factory=list)  # every group with spec.autoscaling, decided or not

    failures: int = 0  # decisions whose spec change was not written (a conflict, a refusal)

    @property
    def retryable(self) -> bool:
        """A decision not written (a concurrent edit, the API refusing): the schedule tries
        again soon, backing off while it keeps failing."""
        return self.failures > 0


def apply_scaling(writer: Writer, decisions: ScalingDecisions, now: float) -> AutoscaleReport:
    """Write each group's spec change, then its status; a group whose spec could not be
    written is decided again on the next pass (it is due at once)."""
    report = AutoscaleReport()
    due: list[float] = []
    for group in decisions.groups:
        namespace, _, name = group.key.partition("/")
        report.groups.append((namespace, name))
        if isinstance(group, Skipped):
            if group.note is not None:
                report.events.append(group.note)
            if group.due_at is not None:
                due.append(group.due_at)
            continue
        outcome = _apply_group(writer, group, report)
        age = None if group.signals is None else max(now - group.signals.at, 0.0)
        report.decided.append(Decided(namespace, name, outcome, group.decided, group.panic, group.signals, age))
        if outcome in ("conflict", "failed"):
            report.failures += 1  # not written: the group is decided again on the next pass
        else:
            due.append(group.next_due)
    report.requeue_after = max(min(due) - now, 0.0) if due else None
    return report


def _apply_group(writer: Writer, group: GroupScaling, report: AutoscaleReport) -> str:
    """Write one group's decision: the spec, then the status with the condition when it
    changed; the outcome for the metrics."""
    version = group.resource_version
    involved = group.involved or ObjectRef("InferenceGroup", group.namespace, group.name)
    if group.roles_patch is not None:
        try:
            written = writer.patch("InferenceGroup", group.namespace, group.name, group.roles_patch, resource_version=group.resource_version)
        except Conflict:
            report.conflicts += 1
            return "conflict"  # someone changed the group since we read it: decide again next pass
        except ApiError as exc:
            report.events.append(f"{group.key}: autoscaler: spec not written: {exc.message}")
            report.warnings.append(report.events[-1])
            return "failed"
        version = (written.get("metadata") or {}).get("resourceVersion", version)
        involved = ObjectRef.of(written)
        report.events.append(f"{group.key}: autoscaler: {group.reason}")
        report.changes.append((group.key, group.desired))
        _event(writer, involved, "Normal", SCALED, group.scaled_message)
    turned = _write_status(writer, group, version, report)
    if turned and group.warning and group.active is not None:  # said when the condition turns, once
        line = f"{group.key}: autoscaler: {group.active.reason}: {group.active.message}"
        report.events.append(line)
        report.warnings.append(line)
        _event(writer, involved, "Warning", group.active.reason, group.active.message)
    if group.roles_patch is not None:
        return "scaled"
    return "unchanged" if group.active is None or group.active.status == "True" else group.active.reason


def _write_status(writer: Writer, group: GroupScaling, version: str | None, report: AutoscaleReport) -> bool:
    """The autoscaler's memory alone needs no precondition (its own key); with the
    condition, the whole conditions list goes, so it is preconditioned on the version read
    (or just written): a concurrent reconcile write makes it fall back to the memory alone,
    and the condition is compared again at the next decision. Whether the condition was written."""
    if group.conditions is not None:
        patch = {"status": {**group.status_patch["status"], "conditions": group.conditions}}
        try:
            writer.patch_status("InferenceGroup", group.namespace, group.name, patch, resource_version=version)
            return True
        except Conflict:
            pass
        except ApiError as exc:
            report.events.append(f"{group.key}: autoscaler: status not written: {exc.message}")
            report.warnings.append(report.events[-1])
            return False
    try:
        writer.patch_status("InferenceGroup", group.namespace, group.name, group.status_patch)
    except ApiError as exc:
        report.events.append(f"{group.key}: autoscaler: memory not written: {exc.message}")
        report.warnings.append(report.events[-1])
    return False


def _event(writer: Writer, involved: ObjectRef, kind: EventType, reason: str, message: str) -> None:
    try:
        writer.record_event(involved, kind, reason, message)
    except ApiError:
        pass  # events are best effort, as in Kubernetes


# ----------------------------------------------------------------------------- the pass


def autoscale(cluster: Cluster, now: float, metrics: Metrics | None, *, sources: Sources | None = None) -> AutoscaleReport:
    """One pass over the groups that configure `spec.autoscaling` and are due a decision;
    `sources` picks each group's source, else `metrics` reads them all (None: there is no
    metrics source, the groups' condition says so)."""
    return apply_scaling(cluster, decide_scaling(observe_autoscaling(cluster.snapshot(), now, metrics, sources), now), now)
