"""Provisioning: ask the cluster's node autoscaler for the nodes a unit that does not fit needs.

cluster-autoscaler skips pods behind a scheduling gate, and every pod tandem creates waits
behind tandem's gate until the engine has chosen its node: a cluster too short for a unit
would stall for ever without a word to the autoscaler. With provisioning on (off by
default; docs/provisioning.md), a unit the engine reports Unschedulable gets one
`ProvisioningRequest` (autoscaling.x-k8s.io/v1), as Kueue's ProvisioningRequest admission
check makes one per workload attempt:

- its pod sets are the unit's minimum not yet bound: per role, the missing complete
  replicas times the pods of a replica, each with a `PodTemplate` made from the role's
  template (the leader's and, with `workerTemplate`, the workers' apart);
- the class is the group's `spec.scheduler.provisioningClassName`, else the operator's
  `--provisioning-class`; the request, its templates and their names are deterministic
  (`<group>-<unit>-provision-<attempt>`, templates `<request>.<role>[.workers]`), all
  owned by the group and labelled with its group, unit and attempt;
- while the request is not `Provisioned` the unit waits (its status says on what); when
  nodes arrive the engine places the unit as it places any (nothing is held back);
- `Failed`, `BookingExpired` or `CapacityRevoked` while the unit still waits is reported
  once (a Warning event; an annotation on the request remembers it) and the request is
  replaced by the next attempt after a backoff (60 s, doubling, at most 30 min);
- the request and its templates are deleted once the unit's minimum is bound, when the unit
  goes away, or when provisioning is turned off for the group; a request that no longer
  matches what the unit needs (another class, other templates or counts) is replaced.

`plan_provisioning` is pure: a function of the group, its requests and templates, what
the pass knows of each unit, and the time.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from tandem.api.naming import GROUP_LABEL, LABEL_PREFIX, ROLE_LABEL, UNIT_LABEL
from tandem.api.resources import InferenceGroup
from tandem.api.timestamps import rfc3339, seconds
from tandem.cluster.payloads import GroupPayload
from tandem.cluster.ports import Object, ObjectRef
from tandem.cluster.writes import RecordEvent
from tandem.controller.actions import Action, CreateObject, DeleteObject, PatchObject
from tandem.controller.manifests import owner_reference

API_VERSION = "autoscaling.x-k8s.io/v1"
REQUEST_KIND = "ProvisioningRequest"
TEMPLATE_KIND = "PodTemplate"
# What a pass reads when provisioning is on: the requests and the templates they name.
PROVISIONING_KINDS = (TEMPLATE_KIND, REQUEST_KIND)
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
ATOMIC_SCALE_UP = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"

ATTEMPT_LABEL = LABEL_PREFIX + "provisioning-attempt"
# On a request: a digest of what it asks for (class, pod sets, templates), to tell a stale one.
SPEC_ANNOTATION = LABEL_PREFIX + "provisioning-spec"
# On a request: the failure already reported (`<condition>/<lastTransitionTime>`).
REPORTED_ANNOTATION = LABEL_PREFIX + "provisioning-reported"
FAILURES = ("Failed", "BookingExpired", "CapacityRevoked")
MAX_POD_SETS = 32  # the CRD's bound on spec.podSets
BACKOFF_MIN_S = 60.0
BACKOFF_MAX_S = 1800.0


@dataclass(frozen=True)
class ProvisioningSettings:
    """The operator's side: `enabled` when it watches ProvisioningRequests (and so may make
    them), `default_class` for groups that name none (None: only groups that name one)."""

    enabled: bool = False
    default_class: str | None = None

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds a pass must read on top of the usual ones."""
        return PROVISIONING_KINDS if self.enabled else ()

    def class_for(self, group: InferenceGroup) -> str | None:
        return group.spec.scheduler.provisioning_class_name or self.default_class


@dataclass(frozen=True)
class UnitNeed:
    """What the pass knows of one unit after its placement."""

    index: int
    unschedulable: bool  # the engine ran this pass and could not place the unit
    waiting: bool  # some of its pods still wait for a node
    missing: tuple[tuple[str, int], ...]  # per role, complete replicas short of the minimum bound

    @property
    def placed(self) -> bool:
        return not any(count for _, count in self.missing)


@dataclass
class ProvisioningPlan:
    actions: list[Action] = field(default_factory=list)
    reasons: dict[int, str] = field(default_factory=dict)  # per unit, what it waits on
    deadlines: list[float] = field(default_factory=list)  # a retry's time


def backoff_seconds(attempt: int) -> float:
    """How long after the failure of a unit's `attempt`-th request the next one is made."""
    return float(min(BACKOFF_MIN_S * 2.0 ** min(max(attempt - 1, 0), 16), BACKOFF_MAX_S))


def request_name(group: str, unit: int, attempt: int) -> str:
    return f"{group}-{unit}-provision-{attempt}"


def template_name(request: str, role: str, workers: bool) -> str:
    """A role is a DNS label (no dots), so the dotted names of two pod sets never meet."""
    return f"{request}.{role}.workers" if workers else f"{request}.{role}"


@dataclass(frozen=True)
class _PodSet:
    role: str
    workers: bool
    count: int
    template: Mapping[str, Any]  # a PodTemplateSpec, as the group's role writes it


def plan_provisioning(
    group: GroupPayload,
    typed: InferenceGroup,
    units: Sequence[UnitNeed],
    existing: Sequence[Object],
    settings: ProvisioningSettings,
    now: float,
) -> ProvisioningPlan:
    """The writes, events, per-unit reasons and retry times of one group's requests."""
    plan = ProvisioningPlan()
    chosen = settings.class_for(typed)
    if not settings.enabled:  # nothing is watched, so nothing is made; say so where it matters
        if chosen is not None:
            for unit in units:
                if unit.unschedulable:
                    plan.reasons[unit.index] = (
                        f"spec.scheduler.provisioningClassName is {chosen} but this operator does not make ProvisioningRequests "
                        "(start it with --provisioning or --provisioning-class)"
                    )
        return plan
    requests: dict[int, list[Object]] = {}
    templates: dict[str, Object] = {}
    for obj in existing:
        owner = _unit_of(obj)
        if obj.get("kind") == REQUEST_KIND and owner is not None and not obj["metadata"].get("deletionTimestamp"):
            requests.setdefault(owner, []).append(obj)
        elif obj.get("kind") == TEMPLATE_KIND:
            templates[obj["metadata"]["name"]] = obj
    needs = {unit.index: unit for unit in units}
    kept: set[str] = set()  # the templates of the requests that stay or are made
    for index in sorted(set(requests) | set(needs)):
        current = sorted(requests.get(index, []), key=_attempt)
        need = needs.get(index)
        if need is None or chosen is None or need.placed:
            why = "its unit is gone" if need is None else "provisioning is off for the group" if chosen is None else "its unit's minimum is bound"
            for request in current:
                _delete(plan, request, why)
            continue
        pod_sets = _pod_sets(typed, group, need)
        if len(pod_sets) > MAX_POD_SETS:
            for request in current:
                _delete(plan, request, "too many pod sets")
            if need.unschedulable:
                plan.reasons[index] = f"cannot ask for nodes: the unit's minimum needs {len(pod_sets)} pod templates, a ProvisioningRequest holds at most {MAX_POD_SETS}"
            continue
        digest = _digest(chosen, pod_sets)
        latest = current[-1] if current else None
        active = latest if latest is not None and _annotation(latest, SPEC_ANNOTATION) == digest else None
        for request in current:
            if request is not active:
                _delete(plan, request, "replaced: what the unit needs changed" if request is latest else "an earlier attempt")
        if active is None:
            if need.unschedulable or (latest is not None and need.waiting):
                attempt = _attempt(latest) + 1 if latest is not None else 1
                name = _create(plan, group, index, attempt, chosen, digest, pod_sets, templates)
                kept.update(template_name(name, s.role, s.workers) for s in pod_sets)
                plan.reasons[index] = f"waiting for nodes: ProvisioningRequest {name} ({chosen}) created"
            continue
        name = active["metadata"]["name"]
        kept.update(template_name(name, s.role, s.workers) for s in pod_sets)
        _missing_templates(plan, group, index, _attempt(active), name, pod_sets, templates)
        failure = next((c for c in map(lambda t: _condition(active, t), FAILURES) if c is not None and c.get("status") == "True"), None)
        if failure is not None:
            _failed(plan, group, index, active, failure, need, chosen, digest, pod_sets, templates, kept, now)
        elif _true(active, "Provisioned"):
            plan.reasons[index] = f"ProvisioningRequest {name} Provisioned{_said(active, 'Provisioned')}; waiting for the new nodes to take the unit"
        elif _true(active, "Accepted"):
            plan.reasons[index] = f"ProvisioningRequest {name} accepted by the autoscaler; waiting for nodes{_said(active, 'Provisioned')}"
        else:
            plan.reasons[index] = f"ProvisioningRequest {name} ({chosen}) waiting for the autoscaler to accept it"
    for name, template in sorted(templates.items()):
        if name not in kept and _unit_of(template) is not None:
            meta = template["metadata"]
            plan.actions.append(DeleteObject(TEMPLATE_KIND, meta.get("namespace"), name, uid=meta.get("uid"), why="its ProvisioningRequest is gone"))
    return plan


def _failed(
    plan: ProvisioningPlan,
    group: GroupPayload,
    index: int,
    active: Object,
    failure: Mapping[str, Any],
    need: UnitNeed,
    chosen: str,
    digest: str,
    pod_sets: list[_PodSet],
    templates: Mapping[str, Object],
    kept: set[str],
    now: float,
) -> None:
    """Report a failure once; replace the request with the next attempt after the backoff."""
    name, attempt = active["metadata"]["name"], _attempt(active)
    since = seconds(failure.get("lastTransitionTime")) or now
    retry_at = since + backoff_seconds(attempt)
    said = f"{failure.get('type')}: {failure.get('reason') or 'NoReason'}{': ' + failure['message'] if failure.get('message') else ''}"
    mark = f"{failure.get('type')}/{failure.get('lastTransitionTime', '')}"
    if _annotation(active, REPORTED_ANNOTATION) != mark:
        meta = active["metadata"]
        plan.actions.append(RecordEvent(ObjectRef.of(group), "Warning", "ProvisioningFailed",
                                        f"unit {index}: ProvisioningRequest {name} {said}; retrying after {backoff_seconds(attempt):.0f}s"))
        plan.actions.append(PatchObject(REQUEST_KIND, meta.get("namespace"), name, {"metadata": {"annotations": {REPORTED_ANNOTATION: mark}}},
                                        None, "failure reported"))
    if now < retry_at or not need.waiting:
        plan.reasons[index] = f"ProvisioningRequest {name} {said}; next attempt at {rfc3339(retry_at)}"
        if need.waiting:
            plan.deadlines.append(retry_at)
        return
    _delete(plan, active, "failed; replaced by the next attempt")
    kept.difference_update(template_name(name, s.role, s.workers) for s in pod_sets)
    fresh = _create(plan, group, index, attempt + 1, chosen, digest, pod_sets, templates)
    kept.update(template_name(fresh, s.role, s.workers) for s in pod_sets)
    plan.reasons[index] = f"waiting for nodes: ProvisioningRequest {fresh} ({chosen}) created after {name} failed"


def _pod_sets(typed: InferenceGroup, group: GroupPayload, need: UnitNeed) -> list[_PodSet]:
    """The unit's missing minimum, per role: leaders and workers apart when their templates differ."""
    written = {r.get("name"): r for r in group["spec"]["roles"]}
    missing = dict(need.missing)
    out = []
    for role in typed.spec.roles:
        count = missing.get(role.name, 0)
        if count <= 0:
            continue
        raw = written[role.name]
        worker = raw.get("workerTemplate") if role.pods_per_replica > 1 else None
        if worker:
            out.append(_PodSet(role.name, False, count, raw["template"]))
            out.append(_PodSet(role.name, True, count * (role.pods_per_replica - 1), worker))
        else:
            out.append(_PodSet(role.name, False, count * role.pods_per_replica, raw["template"]))
    return out


def _digest(chosen: str, pod_sets: list[_PodSet]) -> str:
    body = [chosen, [(s.role, s.workers, s.count, s.template) for s in pod_sets]]
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _create(
    plan: ProvisioningPlan, group: GroupPayload, index: int, attempt: int, chosen: str, digest: str, pod_sets: list[_PodSet], templates: Mapping[str, Object]
) -> str:
    """The templates first (the autoscaler reads them when it sees the request), then the request."""
    meta = group["metadata"]
    name = request_name(meta["name"], index, attempt)
    _missing_templates(plan, group, index, attempt, name, pod_sets, templates)
    request = {
        "apiVersion": API_VERSION,
        "kind": REQUEST_KIND,
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace", "default"),
            "labels": _labels(group, index, attempt),
            "annotations": {SPEC_ANNOTATION: digest},
            "ownerReferences": [owner_reference(group)],
        },
        "spec": {
            "provisioningClassName": chosen,
            "podSets": [{"podTemplateRef": {"name": template_name(name, s.role, s.workers)}, "count": s.count} for s in pod_sets],
        },
    }
    counts = ", ".join(f"{s.count} {s.role}{' worker' if s.workers else ''} pod{'s' if s.count != 1 else ''}" for s in pod_sets)
    plan.actions.append(CreateObject(request, f"unit {index}: ask for nodes ({counts})"))
    plan.actions.append(RecordEvent(ObjectRef.of(group), "Normal", "ProvisioningRequestCreated",
                                    f"unit {index} does not fit: ProvisioningRequest {name} ({chosen}) asks for {counts}"))
    return name


def _missing_templates(
    plan: ProvisioningPlan, group: GroupPayload, index: int, attempt: int, request: str, pod_sets: list[_PodSet], templates: Mapping[str, Object]
) -> None:
    meta = group["metadata"]
    for pod_set in pod_sets:
        name = template_name(request, pod_set.role, pod_set.workers)
        if name in templates:
            continue
        spec = copy.deepcopy(dict(pod_set.template))
        pod_meta = dict(spec.get("metadata") or {})
        pod_meta["labels"] = {**(pod_meta.get("labels") or {}), GROUP_LABEL: meta["name"], UNIT_LABEL: str(index), ROLE_LABEL: pod_set.role}
        spec["metadata"] = pod_meta
        template = {
            "apiVersion": "v1",
            "kind": TEMPLATE_KIND,
            "metadata": {
                "name": name,
                "namespace": meta.get("namespace", "default"),
                "labels": {**_labels(group, index, attempt), ROLE_LABEL: pod_set.role},
                "ownerReferences": [owner_reference(group)],
            },
            "template": spec,
        }
        plan.actions.append(CreateObject(template, f"unit {index}: pod template of {request}"))


def _delete(plan: ProvisioningPlan, request: Object, why: str) -> None:
    meta = request["metadata"]
    plan.actions.append(DeleteObject(REQUEST_KIND, meta.get("namespace"), meta["name"], uid=meta.get("uid"), why=f"ProvisioningRequest: {why}"))


def _labels(group: GroupPayload, index: int, attempt: int) -> dict[str, str]:
    return {GROUP_LABEL: group["metadata"]["name"], UNIT_LABEL: str(index), ATTEMPT_LABEL: str(attempt)}


def _unit_of(obj: Object) -> int | None:
    value = (obj["metadata"].get("labels") or {}).get(UNIT_LABEL)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _attempt(obj: Object | None) -> int:
    value = ((obj or {}).get("metadata", {}).get("labels") or {}).get(ATTEMPT_LABEL)
    return int(value) if isinstance(value, str) and value.isdigit() else 1


def _annotation(obj: Object, key: str) -> str | None:
    value = (obj["metadata"].get("annotations") or {}).get(key)
    return value if isinstance(value, str) else None


def _condition(obj: Object, kind: str) -> Mapping[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == kind:
            return condition
    return None


def _true(obj: Object, kind: str) -> bool:
    condition = _condition(obj, kind)
    return condition is not None and condition.get("status") == "True"


def _said(obj: Object, kind: str) -> str:
    """`: <message>` of a condition, when it has one."""
    condition = _condition(obj, kind)
    message = (condition or {}).get("message")
    return f": {message}" if message else ""
