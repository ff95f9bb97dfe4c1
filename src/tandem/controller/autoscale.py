"""The autoscaler's pass: read signals, decide, and write the new per-role counts into the
group's spec, where the coordination scaling planner takes them up step by step.

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
from typing import Callable

from tandem.api.resources import InferenceGroup
from tandem.api.status import AUTOSCALER_KEYS, AutoscalingStatus
from tandem.api.timestamps import rfc3339, seconds
from tandem.api.validation import check_group
from tandem.autoscaling.decide import decide
from tandem.autoscaling.group import group_inputs
from tandem.autoscaling.signals import Signals
from tandem.autoscaling.state import AutoscalerState
from tandem.cluster.ports import ApiError, Cluster, Conflict
from tandem.controller.status import autoscaler_memory_of, autoscaler_state_of, owned_patch, read_status

# (namespace, name, now) -> the group's signals, or None when there are none.
Metrics = Callable[[str, str, float], Signals | None]


@dataclass
class AutoscaleReport:
    events: list[str] = field(default_factory=list)
    changes: list[tuple[str, dict[str, int]]] = field(default_factory=list)  # (namespace/name, desired per role)
    conflicts: int = 0
    requeue_after: float | None = None  # until the next group is due a decision


def autoscale(cluster: Cluster, now: float, metrics: Metrics) -> AutoscaleReport:
    """One pass over the groups that configure `spec.autoscaling` and are due a decision."""
    report = AutoscaleReport()
    due: list[float] = []
    for raw in cluster.snapshot().list("InferenceGroup"):
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
                report.events.append(f"{key}: autoscaler: invalid, skipped: {problems[0]}")
            continue
        stored = read_status(raw)
        saved = stored.autoscaling
        if saved is not None and now - seconds(saved.last_decision_at) < spec.interval_seconds:
            due.append(seconds(saved.last_decision_at) + spec.interval_seconds)
            continue
        state = autoscaler_state_of(saved.state) if saved is not None else AutoscalerState()
        inputs = group_inputs(typed)
        signals = metrics(typed.metadata.namespace, typed.metadata.name, now)
        decision = decide(spec, inputs.bounds, inputs.gpus_per_replica, inputs.current, inputs.units, signals, state, now)
        if decision.changed:
            roles = [
                {**role, "replicas": int(decision.desired[role["name"]])} if role["name"] in decision.desired else role
                for role in raw["spec"]["roles"]
            ]
            try:
                cluster.patch(
                    "InferenceGroup", meta.get("namespace"), meta["name"], {"spec": {"roles": roles}}, resource_version=meta.get("resourceVersion")
                )
            except Conflict:
                report.conflicts += 1
                continue  # someone changed the group since we read it: decide again next pass
            except ApiError as exc:
                report.events.append(f"{key}: autoscaler: spec not written: {exc.message}")
                continue
            report.events.append(f"{key}: autoscaler: {decision.reason}")
            report.changes.append((key, {k: int(v) for k, v in sorted(decision.desired.items())}))
        memory = AutoscalingStatus(
            last_decision_at=rfc3339(now),
            reason=decision.reason,
            panic=decision.panic,
            desired={k: int(v) for k, v in sorted(decision.desired.items())},
            state=autoscaler_memory_of(decision.state),
        )
        patch = owned_patch(stored.model_copy(update={"autoscaling": memory}), AUTOSCALER_KEYS)
        try:
            # Its own key only, so no precondition: the reconcile pass's keys are not in it.
            cluster.patch_status("InferenceGroup", meta.get("namespace"), meta["name"], patch)
        except ApiError as exc:
            report.events.append(f"{key}: autoscaler: memory not written: {exc.message}")
        due.append(now + spec.interval_seconds)
    report.requeue_after = max(min(due) - now, 0.0) if due else None
    return report
