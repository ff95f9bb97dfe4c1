"""Validating admission: an AdmissionReview v1 in, the verdict out.

The same checks as `tandem validate` (the model with field paths, cross-field rules, the
ClusterTopology the group names and its levels, what its `scheduler.backend` can
honour), on create and update of InferenceGroups and ClusterTopologies; every problem is
one line of the answer's message, field path first, so `kubectl apply` prints them all.
A ClusterTopology is reviewed by `tandem.api.topology_admission` (shared with the topology
controller's webhook): besides its own checks, a change that would break a group naming it
is refused naming the group, and so is deleting it while groups name it.
A write of an InferenceGroup's scale subresource (`kubectl scale ig`, an HPA) is checked
as the group it would make: the stored group with the new `spec.replicas`.

Some answers are not refusals but warnings (`kubectl apply` prints them and the object is
admitted): what the group's scheduler backend keeps only approximately (the same lines
`tandem validate` prints as `warning:`); a group whose minimum could never fit the cluster's nodes even if they were
all empty (the engine's UnschedulableAndUnresolvable), which would otherwise sit Pending
for ever without a word; and a group naming a ClusterTopology that does not exist yet
(it may be applied next).

On update, a change of `spec.scheduler.backend` is admitted with a warning: the group is
handed over to the new scheduler as a rolling update, unit by unit (`controller/delegation.py`).
One rule only holds across versions: a role's `podsPerReplica` may not change
while pods of that role exist, because a replica's pods are created once and a replica
with a different size would be a different replica; scale the role to zero first, or
make a new role.

One autoscaler per group (`scaler_admission.py`): an HPA or KEDA ScaledObject targeting a
group with `spec.autoscaling` is refused, and so is a group gaining `spec.autoscaling`
while one targets it; a scale write (`kubectl scale ig`) is not refused on that account
(it sets units, which tandem's per-role policies never write).

`review(body, reader)` is a function of its inputs; the HTTPS server is `webhook.py`.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from tandem.api.kube import Node
from tandem.api.naming import GROUP_LABEL, ROLE_LABEL
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.api.topology_admission import named_topology, review_topology
from tandem.cluster.unit_autoscalers import UNIT_AUTOSCALER_KINDS
from tandem.backends.registry import get_backend
from tandem.cluster.payloads import as_pod
from tandem.cluster.pods import pod_failed
from tandem.cluster.ports import Reader
from tandem.controller import group_problems, topologies_of
from tandem.errors import NotFound, Problem
from tandem.operator.scaler_admission import autoscaled_group_problems, scaler_problems
from tandem.placement import place
from tandem.placement.bounds import beyond_capacity
from tandem.placement.demand import units_from_group
from tandem.runtime.admission_review import Malformed, Verdict, parse
from tandem.topology import ClusterSnapshot, TopologyView

KINDS = ("InferenceGroup", "ClusterTopology")


def review(body: bytes, reader: Reader) -> Verdict:
    """The verdict on one AdmissionReview (Malformed if it is not one)."""
    request = parse(body)
    uid, operation = request["uid"], request["operation"]
    obj = request.get("object") or {}
    kind = obj.get("kind") or (request.get("kind") or {}).get("kind")
    if operation == "UPDATE" and request.get("subResource") == "scale" and (request.get("resource") or {}).get("resource") == "inferencegroups":
        return _review_scale(uid, request, reader)
    if kind == "ClusterTopology":
        problems, warnings = review_topology(operation, request.get("object"), request.get("oldObject"), reader.list("InferenceGroup"))
        return Verdict(uid, not problems, tuple(str(p) for p in problems), tuple(warnings))
    if operation in ("CREATE", "UPDATE") and kind in UNIT_AUTOSCALER_KINDS:
        problems = scaler_problems(obj, request.get("oldObject"), request.get("namespace"), reader)
        return Verdict(uid, not problems, tuple(str(p) for p in problems))
    if operation not in ("CREATE", "UPDATE") or kind not in KINDS:
        return Verdict(uid, True)
    return _review_group(uid, obj, operation, request.get("oldObject") or {}, reader, namespace=request.get("namespace"))


def _review_scale(uid: str, request: dict[str, Any], reader: Reader) -> Verdict:
    """`kubectl scale ig` (and an HPA) write the scale subresource: the group as it would be
    with the new `spec.replicas` gets the same checks as an update of the group itself."""
    replicas = ((request.get("object") or {}).get("spec") or {}).get("replicas")
    try:
        current = reader.get("InferenceGroup", request.get("namespace"), str(request.get("name") or ""))
    except NotFound:
        return Verdict(uid, True)  # the server answers 404 itself
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        return Verdict(uid, True)  # the server's own schema check of a Scale refuses it
    scaled = {**current, "spec": {**current.get("spec", {}), "replicas": replicas}}
    return _review_group(uid, scaled, "UPDATE", current, reader)


def _review_group(uid: str, obj: dict[str, Any], operation: str, old: dict[str, Any], reader: Reader, namespace: str | None = None) -> Verdict:
    topologies, _ = topologies_of(reader.list("ClusterTopology"))
    typed, problems = group_problems(obj, topologies)
    problems += autoscaled_group_problems(obj, old, namespace, reader)  # a scale write keeps spec.autoscaling as it was: never refused here
    warnings: list[str] = []
    name = (typed.spec.topology_name if typed is not None else None)
    missing = [p for p in problems if p.path == "spec.topologyName" and name is not None and name not in topologies]
    problems = [p for p in problems if p not in missing]
    warnings += [f"{p.path}: {p.message}; the group waits until it exists" for p in missing]
    if typed is not None and operation == "UPDATE":
        problems += _across_versions(typed, old, reader)
    if typed is not None:
        problems += _onto_a_topology_going(typed, old, reader)
    snapshot = _empty_cluster(reader) if typed is not None else None
    if typed is not None and snapshot is not None:
        said = {p.path for p in problems}  # the controller's own cap (validity.MAX_COUNT) may have spoken
        problems += [p for p in beyond_capacity(typed, snapshot) if p.path not in said]  # a unit built for each
    if problems:
        return Verdict(uid, False, tuple(str(p) for p in problems))
    if typed is not None and name in topologies:
        # What the backend keeps only approximately, worded as `tandem validate` prints it.
        warnings += [str(p) for p in get_backend(typed.spec.scheduler.backend).warnings(typed, topologies[name])]
    if typed is not None and snapshot is not None and name in topologies:
        warnings += _never_fits(typed, topologies[name], snapshot)
    if typed is not None and operation == "UPDATE":
        warnings += _handed_over(typed, old)
    return Verdict(uid, True, (), tuple(warnings))


def _handed_over(group: InferenceGroup, old: dict[str, Any]) -> list[str]:
    """A change of scheduler is admitted and done as a rolling update (docs/backends.md):
    said, so whoever applies it knows its pods are replaced unit by unit."""
    scheduler = (old.get("spec") or {}).get("scheduler")
    before = (scheduler.get("backend") if isinstance(scheduler, dict) else None) or "native"
    after = group.spec.scheduler.backend
    if before == after:
        return []
    return [
        f"spec.scheduler.backend: changes from {before!r} to {after!r}: the group is handed over as a rolling update, "
        f"its replicas replaced unit by unit with pods for {after!r} (coordination.rollingUpdate paces it); "
        f"{before!r} keeps placing what it placed until each is replaced"
    ]


def _across_versions(group: InferenceGroup, old: dict[str, Any], reader: Reader) -> list[Problem]:
    before = {r.get("name"): r.get("podsPerReplica", 1) for r in (old.get("spec") or {}).get("roles") or [] if isinstance(r, dict)}
    problems = []
    for index, role in enumerate(group.spec.roles):
        if role.name not in before or before[role.name] == role.pods_per_replica:
            continue
        selector = {GROUP_LABEL: group.metadata.name, ROLE_LABEL: role.name}
        running = [p for p in reader.list("Pod", group.metadata.namespace, labels=selector) if not pod_failed(as_pod(p))]
        if running:
            problems.append(
                Problem(
                    f"spec.roles[{index}].podsPerReplica",
                    f"cannot change from {before[role.name]} to {role.pods_per_replica} while {len(running)} pod(s) of role "
                    f"{role.name!r} exist; scale the role to 0 first, or add a new role",
                )
            )
    return problems


def _onto_a_topology_going(group: InferenceGroup, old: dict[str, Any], reader: Reader) -> list[Problem]:
    """A group may not newly name a ClusterTopology whose deletion has begun: the topology
    controller takes its finalizer off once no group names it, and a group arriving in that
    moment would be left naming nothing. A group already naming it keeps being admitted (it
    holds the deletion until it goes or moves)."""
    name = group.spec.topology_name
    if old and named_topology(old) == name:
        return []
    try:
        topology = reader.get("ClusterTopology", None, name)
    except NotFound:
        return []
    if not (topology.get("metadata") or {}).get("deletionTimestamp"):
        return []
    return [Problem("spec.topologyName", f"ClusterTopology {name!r} is being deleted; name another topology")]


def _empty_cluster(reader: Reader) -> ClusterSnapshot | None:
    """The cluster's nodes as if every one were empty (None without a usable node)."""
    nodes = []
    for raw in reader.list("Node"):
        try:
            nodes.append(Node.model_validate(raw))
        except ValidationError:
            continue
    return ClusterSnapshot.build(nodes, [])[0] if nodes else None


def _never_fits(group: InferenceGroup, topology: ClusterTopology, snapshot: ClusterSnapshot) -> list[str]:
    """Warnings for units whose minimum would not fit even if every node were empty."""
    views = {topology.metadata.name: TopologyView.build(topology, snapshot)}
    units = units_from_group(group, count=1)  # every unit of a group is alike: one answers for all
    plan = place(snapshot, views, units, extras=False)
    return [
        f"the group's minimum cannot fit this cluster even with every node empty, so it would stay Pending: {unit.message}"
        for unit in plan.units
        if unit.state == "Unschedulable"  # on empty nodes: UnschedulableAndUnresolvable
    ]
