"""The objects the controller writes for a group: a replica's pods, the headless Service,
each unit's peers ConfigMap, and the revision that names a template.

Labels name group, unit, role, replica, pod index and revision; tandem's own scheduling
gate keeps kube-scheduler away until the engine has chosen a node. The annotation
`tandem.dev/admitted` marks a replica the coordination planner let through (a gated pod
without it is held back by coordination, not waiting for placement).

So a serving engine can find its peers, every pod gets (DESIGN.md §5): a DNS name
through the group's headless Service (`hostname` = pod name, `subdomain` = group); the
`TANDEM_*` environment (group, unit, role, replica, pod index with 0 the leader, replica
size, the leader's address, the peers file); and its unit's peers file, a ConfigMap
mounted at `/etc/tandem/peers.json` (`peers.py`). A container that runs a serving engine
(`api.engines`) declares the ports it listens on when its template declares none (`http`,
and `bootstrap` for an SGLang prefill), and an SGLang prefill pod carries
`sglang.ai/bootstrap-port`, where SGLang's router reads it. What the template says is kept
as the user wrote it: an environment variable, volume, port or annotation of the same name
is not overridden.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from tandem.api.naming import (
    ADMITTED,
    EXCLUSIVE_LABEL,
    GATE,
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
from tandem.api.engines import SGLANG_BOOTSTRAP_ANNOTATION, engine_of, listening_ports, serving_role
from tandem.api.resources import InferenceGroup
from tandem.cluster.payloads import GroupPayload, OwnerReference, PodPayload


def revision_of(group: InferenceGroup, raw: GroupPayload) -> str:
    """A short hash of everything that defines the pods: each role's templates as written
    in `raw` (every field: the typed model keeps only what placement reads, so a new
    argument or environment variable must come from the manifest), pods per replica, and
    the scheduler a delegated group's pods are made for."""
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
    backend = group.spec.scheduler.backend
    # A delegated group's pods are its scheduler's: a change of backend is a new revision, a
    # rolling hand-over (a native group's revision is as it always was).
    hashed: Any = roles if backend == "native" else {"roles": roles, "backend": backend}
    return hashlib.sha256(json.dumps(hashed, sort_keys=True).encode()).hexdigest()[:10]


def replica_pods(group: GroupPayload, typed: InferenceGroup, unit: int, role: str, replica: int, revision: str, admitted: bool) -> list[PodPayload]:
    """The pods of one replica, gated, owned by the group."""
    spec_role = typed.role(role)
    meta = group["metadata"]
    raw_role = next(r for r in group["spec"]["roles"] if r["name"] == role)
    pods: list[PodPayload] = []
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
        pod: PodPayload = {
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
        _declare_engine(pod)
        pods.append(pod)
    return pods


def _declare_engine(pod: PodPayload) -> None:
    """An engine container's ports, named, when it declares none; SGLang's bootstrap port
    annotation on an SGLang prefill pod (from its port named `bootstrap`, else its flag)."""
    engine = engine_of(pod)
    if engine is None:
        return
    role = serving_role(engine, pod)
    container = pod["spec"]["containers"][engine.container]
    if not container.get("ports"):
        container["ports"] = [{"name": n, "containerPort": p} for n, p in listening_ports(engine, role).items()]
    if engine.kind == "sglang" and role == "prefill":
        pod["metadata"]["annotations"].setdefault(SGLANG_BOOTSTRAP_ANNOTATION, str(engine.bootstrap_port))


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


def owner_reference(group: GroupPayload) -> OwnerReference:
    meta = group["metadata"]
    return {"apiVersion": group["apiVersion"], "kind": "InferenceGroup", "name": meta["name"], "uid": meta["uid"], "controller": True}


def headless_service(group: GroupPayload) -> dict[str, Any]:
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
