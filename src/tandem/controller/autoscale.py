"""The autoscaler's pass: read signals, decide, and write the new per-role counts into the
group's spec, where the coordination scaling planner takes them up step by step.

Like the HPA, it writes the desired counts and nothing else: pods are created and
deleted by `reconcile`, within `coordination.scaling.maxSkew`, so an autoscaler change
goes through the same ratio-keeping steps as a change a person makes. What the policy
remembers between decisions (recommendations inside the stabilisation windows, panic)
lives in `status.autoscaling`, written with compare-and-swap; a restarted autoscaler
picks up where it was, and a conflicting write waits for the next pass.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import ValidationError

from tandem.api.resources import InferenceGroup
from tandem.api.validation import check_group
from tandem.autoscaling.decide import ScaleDecision, decide
from tandem.autoscaling.group import group_inputs
from tandem.autoscaling.signals import Signals
from tandem.autoscaling.state import AutoscalerState
from tandem.controller.cluster import ApiError, Cluster, Conflict

# (namespace, name, now) -> the group's signals, or None when there are none.
Metrics = Callable[[str, str, float], Signals | None]


@dataclass
class AutoscaleReport:
    events: list[str] = field(default_factory=list)
    changes: list[tuple[str, dict[str, int]]] = field(default_factory=list)  # (namespace/name, desired per role)
    conflicts: int = 0


def autoscale(cluster: Cluster, now: float, metrics: Metrics) -> AutoscaleReport:
    """One pass over the groups that configure `spec.autoscaling` and are due a decision."""
    report = AutoscaleReport()
    for raw in cluster.list("InferenceGroup").items:
        if not raw.get("spec", {}).get("autoscaling") or raw["metadata"].get("deletionTimestamp"):
            continue
        key = f"{raw['metadata'].get('namespace', 'default')}/{raw['metadata']['name']}"
        try:
            typed = InferenceGroup.model_validate(raw)
        except ValidationError:
            continue  # reconcile reports an invalid group; there is nothing to scale
        problems = check_group(typed, None)
        spec = typed.spec.autoscaling
        if problems or spec is None:
            if problems:
                report.events.append(f"{key}: autoscaler: invalid, skipped: {problems[0]}")
            continue
        saved = (raw.get("status") or {}).get("autoscaling") or {}
        last = saved.get("lastDecisionAt")
        if last is not None and now - float(last) < spec.interval_seconds:
            continue
        try:
            state = AutoscalerState.from_dict(saved.get("state"))
        except ValueError:
            state = AutoscalerState()  # unreadable memory: start over rather than stop scaling
        inputs = group_inputs(typed)
        signals = metrics(typed.metadata.namespace, typed.metadata.name, now)
        decision = decide(spec, inputs.bounds, inputs.gpus_per_replica, inputs.current, inputs.units, signals, state, now)
        current = raw
        if decision.changed:
            new = copy.deepcopy(raw)
            for role in new["spec"]["roles"]:
                if role["name"] in decision.desired:
                    role["replicas"] = int(decision.desired[role["name"]])
            try:
                current = cluster.update(new)
            except Conflict:
                report.conflicts += 1
                continue  # someone changed the group since we read it: decide again next pass
            report.events.append(f"{key}: autoscaler: {decision.reason}")
            report.changes.append((key, {k: int(v) for k, v in sorted(decision.desired.items())}))
        _write_status(cluster, current, decision, now, report)
    return report


def _write_status(cluster: Cluster, current: dict[str, Any], decision: ScaleDecision, now: float, report: AutoscaleReport) -> None:
    """Write the decision's memory beside the controller's status. On a conflict (the
    controller wrote its status meanwhile) read again and retry once: losing this write
    after the spec changed would forget the stabilisation history and let the next pass
    scale down before its window."""
    memory = {
        "lastDecisionAt": now,
        "reason": decision.reason,
        "panic": decision.panic,
        "desired": {k: int(v) for k, v in sorted(decision.desired.items())},
        "state": decision.state.to_dict(),
    }
    for attempt in range(2):
        new = dict(current)
        new["status"] = {**(current.get("status") or {}), "autoscaling": memory}
        try:
            cluster.update_status(new)
            return
        except Conflict:
            report.conflicts += 1
            if attempt == 0:
                try:
                    current = cluster.get("InferenceGroup", current["metadata"].get("namespace", "default"), current["metadata"]["name"])
                except ApiError:
                    return  # deleted meanwhile
        except ApiError:
            return  # deleted meanwhile
