"""The pods tandem makes for a replica, and what a unit's pods say about its replicas.

Labels name group, unit, role, replica, pod index and revision; tandem's own scheduling
gate keeps kube-scheduler away until the engine has chosen a node. The annotation
`tandem.dev/admitted` marks a replica the coordination planner let through (a gated pod
without it is held back by coordination, not waiting for placement).

So a serving engine can find its peers, every pod gets (DESIGN.md §5): a DNS name
through the group's headless Service (`hostname` = pod name, `subdomain` = group); the
`TANDEM_*` environment (group, unit, role, replica, pod index with 0 the leader, replica
size, the leader's address, the peers file); and its unit's peers file, a ConfigMap
mounted at `/etc/tandem/peers.json` listing each role's Ready replicas and their pods'
addresses (`peers_config_map`). What the template says is kept as the user wrote it: an
environment variable or volume of the same name is not overridden.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections import defaultdict
from typing import Any

from tandem.api.naming import (
    EXCLUSIVE_LABEL,
    GATE,
    GPU_RESOURCE,
    GROUP_LABEL,
    PEERS_DIR,
    PEERS_FILE,
    PEERS_VOLUME,
    POD_INDEX_LABEL,
    REPLICA_LABEL,
    REVISION_LABEL,
    ROLE_LABEL,
    UNIT_LABEL,
    peers_config_map,
    pod_address,
    pod_name,
    service_name,
)
from tandem.api.quantity import MILLI, parse_quantity
from tandem.api.resources import InferenceGroup
from tandem.api.timestamps import seconds
from tandem.coordination.model import Replica

ADMITTED = "tandem.dev/admitted"
ASSIGNED_AT = "tandem.dev/assigned-at"  # when tandem chose the pod's node (RFC 3339, for the gang timeout)
HOSTNAME = "kubernetes.io/hostname"


def revision_of(group: InferenceGroup, raw: dict[str, Any]) -> str:
    """A short hash of everything that defines the pods: each role's templates as written
    in `raw` (every field: the typed model keeps only what placement reads, so a new
    argument or environment variable must come from the manifest) and pods per replica."""
    written = {r.get("name"): r for r in raw["spec"]["roles"]}
    roles = [
        {
            "name": r.name,
            "podsPerReplica": r.pods_per_replica,
            "template": written[r.name].get("template"),
            "workerTemplate": written[r.name].get("workerTemplate"),
        }
        for r in group.spec.roles
    ]
    return hashlib.sha256(json.dumps(roles, sort_keys=True).encode()).hexdigest()[:10]


def replica_pods(group: dict[str, Any], typed: InferenceGroup, unit: int, role: str, replica: int, revision: str, admitted: bool) -> list[dict[str, Any]]:
    """The pods of one replica, gated, owned by the group."""
    spec_role = typed.role(role)
    meta = group["metadata"]
    raw_role = next(r for r in group["spec"]["roles"] if r["name"] == role)
    pods = []
    for index in range(spec_role.pods_per_replica):
        template = raw_role.get("workerTemplate") if index > 0 and raw_role.get("workerTemplate") else raw_role["template"]
        template = copy.deepcopy(template)
        labels = dict(template.get("metadata", {}).get("labels", {}))
        labels.update(
            {
                GROUP_LABEL: meta["name"],
                UNIT_LABEL: str(unit),
                ROLE_LABEL: role,
                REPLICA_LABEL: str(replica),
                POD_INDEX_LABEL: str(index),
                REVISION_LABEL: revision,
            }
        )
        if typed.spec.topology.exclusive is not None:
            labels[EXCLUSIVE_LABEL] = typed.spec.topology.exclusive
        annotations = dict(template.get("metadata", {}).get("annotations", {}))
        if admitted:
            annotations[ADMITTED] = "true"
        spec = template["spec"]
        spec["schedulingGates"] = [*spec.get("schedulingGates", []), {"name": GATE}]
        namespace = meta.get("namespace", "default")
        name = pod_name(meta["name"], unit, role, replica, index)
        spec.setdefault("hostname", name)
        spec.setdefault("subdomain", service_name(meta["name"]))
        leader = pod_address(pod_name(meta["name"], unit, role, replica, 0), meta["name"], namespace)
        environment = {
            "TANDEM_GROUP": meta["name"],
            "TANDEM_UNIT": str(unit),
            "TANDEM_ROLE": role,
            "TANDEM_REPLICA": str(replica),
            "TANDEM_POD_INDEX": str(index),
            "TANDEM_REPLICA_SIZE": str(spec_role.pods_per_replica),
            "TANDEM_LEADER_ADDRESS": leader,
            "TANDEM_PEERS_FILE": f"{PEERS_DIR}/{PEERS_FILE}",
        }
        _add_peers_volume(spec, peers_config_map(meta["name"], unit))
        for container in spec.get("containers", []):
            _add_environment(container, environment)
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": labels,
                    "annotations": annotations,
                    "ownerReferences": [owner_reference(group)],
                },
                "spec": spec,
            }
        )
    return pods


def _add_environment(container: dict[str, Any], values: dict[str, str]) -> None:
    env = list(container.get("env", []))
    taken = {e.get("name") for e in env}
    env += [{"name": k, "value": v} for k, v in values.items() if k not in taken]
    container["env"] = env
    mounts = list(container.get("volumeMounts", []))
    if not any(m.get("name") == PEERS_VOLUME or m.get("mountPath") == PEERS_DIR for m in mounts):
        mounts.append({"name": PEERS_VOLUME, "mountPath": PEERS_DIR, "readOnly": True})
    container["volumeMounts"] = mounts


def _add_peers_volume(spec: dict[str, Any], config_map: str) -> None:
    volumes = list(spec.get("volumes", []))
    if not any(v.get("name") == PEERS_VOLUME for v in volumes):
        volumes.append({"name": PEERS_VOLUME, "configMap": {"name": config_map, "items": [{"key": PEERS_FILE, "path": PEERS_FILE}]}})
    spec["volumes"] = volumes


def owner_reference(group: dict[str, Any]) -> dict[str, Any]:
    meta = group["metadata"]
    return {"apiVersion": group["apiVersion"], "kind": "InferenceGroup", "name": meta["name"], "uid": meta["uid"], "controller": True}


def headless_service(group: dict[str, Any]) -> dict[str, Any]:
    """The group's headless Service: a DNS name for every pod, Ready or not (an engine
    must reach its leader before anything is Ready)."""
    meta = group["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": service_name(meta["name"]),
            "namespace": meta.get("namespace", "default"),
            "labels": {GROUP_LABEL: meta["name"]},
            "ownerReferences": [owner_reference(group)],
        },
        "spec": {"clusterIP": "None", "selector": {GROUP_LABEL: meta["name"]}, "publishNotReadyAddresses": True},
    }


def peers_document(
    group: dict[str, Any], unit: int, pods: list[dict[str, Any]], typed: InferenceGroup, read: UnitRead | None = None
) -> str:
    """The unit's peers file: per role, its Ready replicas (complete and Ready) with each
    pod's address and index (0 = leader), in a fixed order so equal peers are equal bytes.
    `read` is `replicas_of_unit(pods, ...)` when the caller has it already."""
    meta = group["metadata"]
    namespace = meta.get("namespace", "default")
    replicas, pods_of = read or replicas_of_unit(pods, {r.name: r.pods_per_replica for r in typed.spec.roles})
    roles: dict[str, list[dict[str, Any]]] = {r.name: [] for r in typed.spec.roles}
    for replica in replicas:
        if replica.phase != "Ready" or replica.role not in roles:
            continue
        members = sorted(pods_of[(replica.role, replica.index)], key=lambda p: int(p["metadata"]["labels"][POD_INDEX_LABEL]))
        roles[replica.role].append(
            {
                "replica": replica.index,
                "pods": [
                    {
                        "name": p["metadata"]["name"],
                        "index": int(p["metadata"]["labels"][POD_INDEX_LABEL]),
                        "address": pod_address(p["metadata"]["name"], meta["name"], namespace),
                        **({"ip": p["status"]["podIP"]} if (p.get("status") or {}).get("podIP") else {}),
                    }
                    for p in members
                ],
            }
        )
    document = {"group": meta["name"], "namespace": namespace, "unit": unit, "roles": roles}
    return json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n"


def peers_config_map_object(group: dict[str, Any], unit: int, document: str) -> dict[str, Any]:
    meta = group["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": peers_config_map(meta["name"], unit),
            "namespace": meta.get("namespace", "default"),
            "labels": {GROUP_LABEL: meta["name"], UNIT_LABEL: str(unit)},
            "ownerReferences": [owner_reference(group)],
        },
        "data": {PEERS_FILE: document},
    }


# What `replicas_of_unit` reads of a unit: its replicas, and the pods of each.
UnitRead = tuple[list[Replica], dict[tuple[str, int], list[dict[str, Any]]]]


def replicas_of_unit(pods: list[dict[str, Any]], pods_per_replica: dict[str, int], revision: str | None = None) -> UnitRead:
    """The unit's replicas as the coordination planner sees them, and the pods of each
    (in teardown order: workers first, the leader, index 0, last).

    A replica's pods are created workers first and the leader last, and deleted in the same
    order, so a replica missing pods tells how it got there. Without its leader, holding a
    run of the highest indices, none failed, it is an unfinished creation (a writer stopped
    between two creates): it is completed, not replaced, and its phase counts the missing
    pods as just created. With its leader and missing a worker, with a failed pod, or with
    pods of two revisions (a replacement created beside a pod whose delete failed), it is
    Failed (it will be replaced whole). With `revision`, only a replica of that revision can
    be completed (the template of another is gone). Otherwise its phase is that of its least
    advanced pod: Gated (held by coordination), Pending (admitted, not yet bound),
    Scheduled, Ready.
    """
    by_replica: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for pod in pods:
        labels = pod["metadata"].get("labels", {})
        by_replica[(labels[ROLE_LABEL], int(labels[REPLICA_LABEL]))].append(pod)
    replicas = []
    for (role, index), members in sorted(by_replica.items()):
        members.sort(key=pod_index, reverse=True)
        own_revision = members[0]["metadata"]["labels"].get(REVISION_LABEL, "")
        phases = [_pod_phase(p) for p in members]
        size = pods_per_replica.get(role, 1)
        mixed = any(p["metadata"]["labels"].get(REVISION_LABEL, "") != own_revision for p in members)
        if "Failed" in phases or mixed:
            phase = "Failed"
        elif len(members) >= size:
            phase = min(phases, key=PHASE_ORDER.index)
        elif unfinished(members, size) and (revision is None or own_revision == revision):
            phase = min([*phases, "Pending"], key=PHASE_ORDER.index)
        else:
            phase = "Failed"
        created = min(seconds(p["metadata"].get("creationTimestamp")) for p in members)
        replicas.append(Replica(role, index, own_revision, phase, created))  # type: ignore[arg-type]
    return replicas, dict(by_replica)


PHASE_ORDER = ["Gated", "Pending", "Scheduled", "Ready"]


def pod_index(pod: dict[str, Any]) -> int:
    return int(pod["metadata"].get("labels", {}).get(POD_INDEX_LABEL, "0"))


def unfinished(members: list[dict[str, Any]], size: int) -> bool:
    """A replica's pods are the highest indices of `size` and lack the leader: a creation cut short."""
    indices = sorted(pod_index(p) for p in members)
    return 0 < len(indices) < size and indices == list(range(size - len(indices), size))


def pod_ready(pod: dict[str, Any]) -> bool:
    """The pod's Ready condition is True (the one Ready check every part of tandem uses)."""
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions", []))


def pod_failed(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded")


def unit_replicas(pods: list[dict[str, Any]], group: InferenceGroup, read: UnitRead | None = None) -> dict[str, list[Replica]]:
    """One unit's replicas per role (every role present, possibly empty); `read` as for
    `peers_document`."""
    replicas, _ = read or replicas_of_unit(pods, {r.name: r.pods_per_replica for r in group.spec.roles})
    out: dict[str, list[Replica]] = {r.name: [] for r in group.spec.roles}
    for replica in replicas:
        out.setdefault(replica.role, []).append(replica)
    return out


def is_functional(replicas: dict[str, list[Replica]], group: InferenceGroup) -> bool:
    """Every role has at least its minimum of complete, Ready replicas: the unit serves."""
    return all(sum(1 for r in replicas.get(role.name, []) if r.phase == "Ready") >= role.minimum for role in group.spec.roles)


def minimum_placed(replicas: dict[str, list[Replica]], group: InferenceGroup) -> bool:
    """Every role has at least its minimum of complete replicas bound to nodes."""
    return all(
        sum(1 for r in replicas.get(role.name, []) if r.phase in ("Scheduled", "Ready")) >= role.minimum for role in group.spec.roles
    )


def _pod_phase(pod: dict[str, Any]) -> str:
    if pod.get("metadata", {}).get("deletionTimestamp") or pod_failed(pod):
        return "Failed"
    if pod_ready(pod):
        return "Ready"
    if pod.get("spec", {}).get("nodeName"):
        return "Scheduled"
    if pod.get("metadata", {}).get("annotations", {}).get(ADMITTED) == "true":
        return "Pending"
    return "Gated"


def pod_gpus(pod: dict[str, Any]) -> int:
    """Whole GPUs a pod requests, over its containers."""
    return sum(
        parse_quantity(c.get("resources", {}).get("requests", {}).get(GPU_RESOURCE, 0)) // MILLI for c in pod["spec"].get("containers", [])
    )


def assigned_node(pod: dict[str, Any]) -> str | None:
    """The node a pod is bound to, or that tandem chose for it (hostname selector, gate gone)."""
    spec = pod.get("spec", {})
    if spec.get("nodeName"):
        return spec["nodeName"]
    gated = any(g.get("name") == GATE for g in spec.get("schedulingGates", []))
    return None if gated else spec.get("nodeSelector", {}).get(HOSTNAME)
