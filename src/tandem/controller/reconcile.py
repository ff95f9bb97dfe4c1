"""One level-triggered pass over every InferenceGroup: read what the cluster reports, then act.

1. **Sync**: list groups, topologies, nodes and pods; each unit's pods become replicas
   with a phase (`pods.replicas_of_unit`). Pods placed but not bound within
   `scheduler.gangTimeoutSeconds` are released first (their replicas then count as
   failed and are replaced).
2. **Coordinate**: per unit, the coordination planner decides the next step from those
   replicas and the status persisted with the group; its creates, ungates and deletes
   are executed (pods are created gated, owned by the group).
3. **Place**: the admitted replicas still gated wait for the engine, which places them
   for all groups together, with each unit's running replicas fixed; a placed pod gets
   a `kubernetes.io/hostname` node selector and loses tandem's gate, so kube-scheduler
   (or the simulator's kubelet) binds it there.
4. **Status**: conditions, per-role counts, `observedGeneration` and each unit's
   coordination status are written with compare-and-swap; a conflict waits for the
   next pass.

Nothing is kept between passes: the same cluster state gives the same actions, and a
pass on a settled cluster writes nothing.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import ValidationError

from tandem.api.kube import Node, Pod
from tandem.api.naming import GROUP_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.controller.cluster import ApiError, Cluster, Conflict, NotFound, rfc3339, seconds
from tandem.controller.pods import ADMITTED, ASSIGNED_AT, GATE, HOSTNAME, assigned_node, replica_pods, replicas_of_unit, revision_of
from tandem.coordination.model import CoordinationStatus, Decision, Observed, UnitSpec
from tandem.coordination.planner import plan as coordinate
from tandem.placement import Plan, place
from tandem.placement.demand import PlacedReplica, UnitDemand, units_from_group
from tandem.topology import ClusterSnapshot, TopologyView


# A unit released after its gang timeout is requeued after 30 s x 2^(releases-1), at most 600 s.
RELEASE_BACKOFF_S = 30.0
RELEASE_BACKOFF_CAP_S = 600.0


@dataclass
class PassReport:
    """What one pass did, for logs, the simulator's event log and tests."""

    created: int = 0
    deleted: int = 0
    ungated: int = 0
    placed: int = 0
    conflicts: int = 0
    events: list[str] = field(default_factory=list)

    @property
    def writes(self) -> int:
        return self.created + self.deleted + self.ungated + self.placed


Placer = Callable[..., Plan]


def reconcile(cluster: Cluster, now: float, placer: Placer = place) -> PassReport:
    """One pass; `placer` is the engine (a baseline can stand in, to compare policies)."""
    report = PassReport()
    groups = _groups(cluster, report)
    released = {_key(raw): _release_stuck(cluster, raw, typed, now, report) for raw, typed in groups}
    decisions: dict[tuple[str, str], dict[int, Decision]] = {}
    for raw, typed in groups:
        decisions[_key(raw)] = _coordinate_group(cluster, raw, typed, now, released[_key(raw)], report)
    _place(cluster, groups, now, placer, report)
    for raw, typed in groups:
        _write_status(cluster, raw, typed, decisions[_key(raw)], released[_key(raw)], now, report)
    return report


# ----------------------------------------------------------------------------- sync


def _groups(cluster: Cluster, report: PassReport) -> list[tuple[dict[str, Any], InferenceGroup]]:
    out = []
    for raw in cluster.list("InferenceGroup").items:
        if raw["metadata"].get("deletionTimestamp"):
            continue
        try:
            out.append((raw, InferenceGroup.model_validate(raw)))
        except ValidationError as exc:
            report.events.append(f"{_name(raw)}: invalid, skipped: {exc.errors()[0]['msg']}")
    return out


def _unit_pods(cluster: Cluster, raw: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    namespace = raw["metadata"].get("namespace", "default")
    by_unit: dict[int, list[dict[str, Any]]] = {}
    for pod in cluster.list("Pod", namespace, {GROUP_LABEL: raw["metadata"]["name"]}).items:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        by_unit.setdefault(int(pod["metadata"]["labels"][UNIT_LABEL]), []).append(pod)
    return by_unit


# ----------------------------------------------------------------------------- gang timeout


def _release_stuck(cluster: Cluster, raw: dict[str, Any], typed: InferenceGroup, now: float, report: PassReport) -> set[int]:
    """Two releases after `scheduler.gangTimeoutSeconds`, so nothing holds capacity half-done:

    - a pod placed but not bound in time (its node died, say): released, and its replica
      is then replaced;
    - a unit partially placed (some pods bound, a role below its minimum bound) for
      longer than the timeout, per `partialSince` in its status: all its pods are
      released, and it is requeued: rolled out again as a whole after a backoff of
      30 s × 2^(releases−1), at most 600 s (`retryAfter` in its status).
    """
    timeout = typed.spec.scheduler.gang_timeout_seconds
    namespace = raw["metadata"].get("namespace", "default")
    units = (raw.get("status") or {}).get("units", {})
    pods = cluster.list("Pod", namespace, {GROUP_LABEL: raw["metadata"]["name"]}).items
    expired = {
        unit for unit, saved in units.items() if saved.get("partialSince") is not None and now - float(saved["partialSince"]) > timeout
    }
    for pod in pods:
        meta, spec = pod["metadata"], pod.get("spec", {})
        if meta.get("deletionTimestamp"):
            continue
        if meta["labels"].get(UNIT_LABEL) in expired:
            report.deleted += _delete_pod(cluster, namespace, meta["name"])
            continue
        assigned = meta.get("annotations", {}).get(ASSIGNED_AT)
        if assigned is not None and not spec.get("nodeName") and now - seconds(assigned) > timeout:
            report.deleted += _delete_pod(cluster, namespace, meta["name"])
            report.events.append(f"{meta['name']}: not bound within gangTimeoutSeconds ({timeout}s); released")
    for unit in sorted(expired):
        report.events.append(f"{_name(raw)}[{unit}]: partially placed for more than {timeout}s; released to be placed again as a unit")
    return {int(unit) for unit in expired}


# ----------------------------------------------------------------------------- coordinate


def _coordinate_group(
    cluster: Cluster, raw: dict[str, Any], typed: InferenceGroup, now: float, released: set[int], report: PassReport
) -> dict[int, Decision]:
    revision = revision_of(typed)
    spec = UnitSpec.from_group(typed, revision)
    pods_per_replica = {r.name: r.pods_per_replica for r in typed.spec.roles}
    saved = (raw.get("status") or {}).get("units", {})
    by_unit = _unit_pods(cluster, raw)
    namespace = raw["metadata"].get("namespace", "default")
    for unit in sorted(u for u in by_unit if u >= typed.spec.replicas):
        for pod in by_unit[unit]:  # units beyond spec.replicas go, whole
            report.deleted += _delete_pod(cluster, namespace, pod["metadata"]["name"])
    decisions = {}
    for unit in range(typed.spec.replicas):
        replicas, pods_of = replicas_of_unit(by_unit.get(unit, []), pods_per_replica)
        status = _load_status(saved.get(str(unit), {}).get("coordination"))
        retry_after = saved.get(str(unit), {}).get("retryAfter")
        if unit in released or (retry_after is not None and now < float(retry_after) and not replicas):
            decisions[unit] = Decision("Stalled", "requeued after a gang timeout; backing off", {}, (), (), status)
            continue
        decision = coordinate(spec, Observed(tuple(replicas), status), now)
        decisions[unit] = decision
        for delete in decision.delete:
            for pod in pods_of.get((delete.role, delete.index), []):
                report.deleted += _delete_pod(cluster, namespace, pod["metadata"]["name"])
        for ungate in decision.ungate:
            for pod in pods_of.get((ungate.role, ungate.index), []):
                cluster.patch("Pod", namespace, pod["metadata"]["name"], {"metadata": {"annotations": {ADMITTED: "true"}}})
                report.ungated += 1
        gone = {(d.role, d.index) for d in decision.delete}
        used = {(r.role, r.index) for r in replicas if (r.role, r.index) not in gone}
        for create in decision.create:
            free = _lowest_free({i for role, i in used if role == create.role}, create.count)
            for index in free:
                used.add((create.role, index))
                for pod in replica_pods(raw, typed, unit, create.role, index, create.revision, admitted=True):
                    try:
                        cluster.create(pod)
                        report.created += 1
                    except ApiError as exc:
                        report.events.append(f"{pod['metadata']['name']}: not created: {exc.message}")
        if decision.state == "Stalled":
            report.events.append(f"{_name(raw)}[{unit}]: Stalled: {decision.reason}")
    return decisions


def _lowest_free(taken: set[int], count: int) -> list[int]:
    out, candidate = [], 0
    while len(out) < count:
        if candidate not in taken:
            out.append(candidate)
        candidate += 1
    return out


def _delete_pod(cluster: Cluster, namespace: str, name: str) -> int:
    try:
        cluster.delete("Pod", namespace, name)
        return 1
    except NotFound:
        return 0


# ----------------------------------------------------------------------------- place


def _place(
    cluster: Cluster, groups: list[tuple[dict[str, Any], InferenceGroup]], now: float, placer: Placer, report: PassReport
) -> None:
    pods = cluster.list("Pod").items
    waiting = [p for p in pods if _waits_for_placement(p)]
    if not waiting:
        return
    topologies = {t["metadata"]["name"]: ClusterTopology.model_validate(t) for t in cluster.list("ClusterTopology").items}
    nodes = [Node.model_validate(n) for n in cluster.list("Node").items]
    holding = []
    for pod in pods:
        node = assigned_node(pod)
        if node and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
            copy_ = copy.deepcopy(pod)
            copy_.setdefault("spec", {})["nodeName"] = node
            holding.append(Pod.model_validate(copy_))
    snapshot, _ = ClusterSnapshot.build(nodes, holding)
    views = {name: TopologyView.build(t, snapshot) for name, t in topologies.items()}
    demands: list[UnitDemand] = []
    for raw, typed in groups:
        if typed.spec.topology_name not in views:
            report.events.append(f"{_name(raw)}: ClusterTopology {typed.spec.topology_name!r} not found; not placed")
            continue
        demands += _unit_demands(raw, typed, pods)
    plan = placer(snapshot, views, demands)
    by_name = {(p["metadata"].get("namespace"), p["metadata"]["name"]): p for p in waiting}
    for unit in plan.units:
        if unit.state == "Unschedulable":
            report.events.append(f"{unit.unit.label}: Unschedulable: {unit.message}")
        for _, replicas in unit.roles:
            for replica in replicas:
                if replica.existing:
                    continue
                for assignment in replica.pods:
                    pod = by_name.get((unit.unit.namespace, assignment.name))
                    if pod is None:
                        continue
                    gates = [g for g in pod["spec"].get("schedulingGates", []) if g.get("name") != GATE]
                    try:
                        cluster.patch(
                            "Pod",
                            unit.unit.namespace,
                            assignment.name,
                            {
                                "metadata": {"annotations": {ASSIGNED_AT: rfc3339(now)}},
                                "spec": {"nodeSelector": {HOSTNAME: assignment.node}, "schedulingGates": gates or None},
                            },
                            resource_version=pod["metadata"]["resourceVersion"],
                        )
                        report.placed += 1
                    except Conflict:
                        report.conflicts += 1


def _waits_for_placement(pod: dict[str, Any]) -> bool:
    meta, spec = pod["metadata"], pod.get("spec", {})
    return (
        GROUP_LABEL in meta.get("labels", {})
        and meta.get("annotations", {}).get(ADMITTED) == "true"
        and any(g.get("name") == GATE for g in spec.get("schedulingGates", []))
        and not meta.get("deletionTimestamp")
    )


def _unit_demands(raw: dict[str, Any], typed: InferenceGroup, pods: list[dict[str, Any]]) -> list[UnitDemand]:
    """Per unit with waiting pods: the admitted replicas as the demand, the running ones as existing."""
    namespace = raw["metadata"].get("namespace", "default")
    mine = [p for p in pods if p["metadata"].get("namespace") == namespace and p["metadata"]["labels"].get(GROUP_LABEL) == raw["metadata"]["name"]]
    out = []
    for demand in units_from_group(typed):
        members = [p for p in mine if p["metadata"]["labels"].get(UNIT_LABEL) == str(demand.unit)]
        if not any(_waits_for_placement(p) for p in members):
            continue
        pods_per_replica = {r.name: r.pods_per_replica for r in typed.spec.roles}
        replicas, pods_of = replicas_of_unit(members, pods_per_replica)
        admitted = {r.name: 0 for r in typed.spec.roles}
        existing = []
        for replica in replicas:
            if replica.phase in ("Gated", "Failed"):
                continue
            admitted[replica.role] += 1
            group_pods = sorted(pods_of[(replica.role, replica.index)], key=lambda p: int(p["metadata"]["labels"]["tandem.dev/pod-index"]))
            nodes = [assigned_node(p) for p in group_pods]
            if all(nodes):
                existing.append(PlacedReplica(replica.role, replica.index, tuple(n for n in nodes if n)))
        roles = tuple(dataclasses.replace(r, desired=admitted[r.name]) for r in demand.roles)
        out.append(dataclasses.replace(demand, roles=roles, existing=tuple(existing)))
    return out


# ----------------------------------------------------------------------------- status


def _write_status(
    cluster: Cluster,
    raw: dict[str, Any],
    typed: InferenceGroup,
    decisions: dict[int, Decision],
    released: set[int],
    now: float,
    report: PassReport,
) -> None:
    namespace = raw["metadata"].get("namespace", "default")
    try:
        current = cluster.get("InferenceGroup", namespace, raw["metadata"]["name"])
    except NotFound:
        return
    pods = [p for p in cluster.list("Pod", namespace, {GROUP_LABEL: raw["metadata"]["name"]}).items if not p["metadata"].get("deletionTimestamp")]
    revision = revision_of(typed)
    roles = []
    available = scheduled_all = True
    for role in typed.spec.roles:
        role_pods = [p for p in pods if p["metadata"]["labels"].get(ROLE_LABEL) == role.name]
        per_unit = {}
        for unit in range(typed.spec.replicas):
            unit_pods = [p for p in role_pods if p["metadata"]["labels"].get(UNIT_LABEL) == str(unit)]
            replicas, _ = replicas_of_unit(unit_pods, {role.name: role.pods_per_replica})
            per_unit[unit] = replicas
            ready = sum(1 for r in replicas if r.phase == "Ready")
            available &= ready >= role.minimum
        every = [r for replicas in per_unit.values() for r in replicas]
        scheduled = sum(1 for r in every if r.phase in ("Scheduled", "Ready"))
        scheduled_all &= scheduled >= role.replicas * typed.spec.replicas
        roles.append(
            {
                "name": role.name,
                "replicas": sum(1 for r in every if r.phase != "Failed"),
                "scheduledReplicas": scheduled,
                "readyReplicas": sum(1 for r in every if r.phase == "Ready"),
                "updatedReplicas": sum(1 for r in every if r.revision == revision and r.phase != "Failed"),
            }
        )
    states = {unit: d.state for unit, d in decisions.items()}
    stalled = [f"unit {u}: {d.reason}" for u, d in sorted(decisions.items()) if d.state == "Stalled"]
    progressing = any(state == "Progressing" for state in states.values())
    conditions = [
        _condition("Scheduled", scheduled_all, "AllScheduled" if scheduled_all else "Waiting", ""),
        _condition("Available", available, "MinimumsReady" if available else "BelowMinimum", ""),
        _condition("Progressing", progressing, "Progressing" if progressing else "Settled", ""),
        _condition("Stalled", bool(stalled), "StepTimedOut" if stalled else "None", "; ".join(stalled)),
        _condition("Degraded", not available and any(r["readyReplicas"] for r in roles), "BelowMinimum" if not available else "None", ""),
    ]
    saved_units = (current.get("status") or {}).get("units", {})
    partial_since: dict[int, float | None] = {}
    backoff: dict[int, tuple[int, float | None]] = {}
    for unit in range(typed.spec.replicas):
        unit_pods = [p for p in pods if p["metadata"]["labels"].get(UNIT_LABEL) == str(unit)]
        holding = any(p["spec"].get("nodeName") for p in unit_pods)
        placed_enough = True
        for role in typed.spec.roles:
            role_pods = [p for p in unit_pods if p["metadata"]["labels"].get(ROLE_LABEL) == role.name]
            replicas, _ = replicas_of_unit(role_pods, {role.name: role.pods_per_replica})
            placed_enough &= sum(1 for r in replicas if r.phase in ("Scheduled", "Ready")) >= role.minimum
        if holding and not placed_enough:
            since = saved_units.get(str(unit), {}).get("partialSince")
            partial_since[unit] = now if since is None else since
        else:
            partial_since[unit] = None
        saved = saved_units.get(str(unit), {})
        count, retry = saved.get("releases", 0), saved.get("retryAfter")
        if unit in released:
            count += 1
            retry = now + min(RELEASE_BACKOFF_S * 2 ** (count - 1), RELEASE_BACKOFF_CAP_S)
        elif holding and placed_enough:
            count, retry = 0, None  # placed whole again: the backoff starts over
        backoff[unit] = (count, retry)
    status = {
        "observedGeneration": current["metadata"].get("generation", 1),
        "revision": revision,
        "conditions": conditions,
        "roles": roles,
        "units": {
            str(u): {
                "state": d.state,
                "reason": d.reason,
                "partialSince": partial_since.get(u),
                "releases": backoff[u][0],
                "retryAfter": backoff[u][1],
                "coordination": _dump_status(d.status),
            }
            for u, d in sorted(decisions.items())
        },
    }
    # The autoscaler (controller/autoscale.py) keeps its own memory beside ours.
    if "autoscaling" in (current.get("status") or {}):
        status["autoscaling"] = current["status"]["autoscaling"]
    if current.get("status") == status:
        return
    new = dict(current)
    new["status"] = status
    try:
        cluster.update_status(new)
    except Conflict:
        report.conflicts += 1


def _condition(kind: str, value: bool, reason: str, message: str) -> dict[str, Any]:
    return {"type": kind, "status": "True" if value else "False", "reason": reason, "message": message}


def _dump_status(status: CoordinationStatus) -> dict[str, Any]:
    return {k: (dict(v) if isinstance(v, dict) or hasattr(v, "items") else v) for k, v in dataclasses.asdict(status).items()}


def _load_status(saved: dict[str, Any] | None) -> CoordinationStatus:
    if not saved:
        return CoordinationStatus()
    fields = {f.name for f in dataclasses.fields(CoordinationStatus)}
    return CoordinationStatus(**{k: v for k, v in saved.items() if k in fields})


def _key(raw: dict[str, Any]) -> tuple[str, str]:
    return (raw["metadata"].get("namespace", "default"), raw["metadata"]["name"])


def _name(raw: dict[str, Any]) -> str:
    return "/".join(_key(raw))
