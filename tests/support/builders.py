"""Small builders for clusters and groups as manifests, loaded through the real loader."""

from __future__ import annotations

import json
from typing import Any

from tandem.api.loading import Inputs, load_texts
from tandem.placement import units_from_groups
from tandem.topology import ClusterSnapshot, TopologyView
from tandem.topology.generate import generate_cluster

GPU = "nvidia.com/gpu"


def container(gpus: int = 0, cpu: str | None = None, memory: str | None = None) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if gpus:
        requests[GPU] = str(gpus)
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    return {"name": "engine", "image": "vllm", "resources": {"requests": requests}}


def role(
    name: str,
    replicas: int,
    minimum: int | None = None,
    *,
    gpus: int = 8,
    pods: int = 1,
    required: str | None = None,
    preferred: str | None = None,
    **spec_extra: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "podsPerReplica": pods,
        "template": {"spec": {"containers": [container(gpus)], **spec_extra}},
    }
    if minimum is not None:
        out["minReplicas"] = minimum
    pack = {k: v for k, v in (("required", required), ("preferred", preferred)) if v}
    if pack:
        out["topology"] = {"pack": pack}
    return out


def group(
    name: str,
    roles: list[dict[str, Any]],
    *,
    replicas: int = 1,
    priority: int = 0,
    required: str | None = None,
    preferred: str | None = None,
    affinity: list[dict[str, Any]] | None = None,
    namespace: str = "serving",
    topology: str = "default",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"topologyName": topology, "replicas": replicas, "priority": priority, "roles": roles}
    pack = {k: v for k, v in (("required", required), ("preferred", preferred)) if v}
    if pack:
        spec["topology"] = {"pack": pack}
    if affinity:
        spec["affinity"] = affinity
    return {
        "apiVersion": "tandem.dev/v1alpha1",
        "kind": "InferenceGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def bound_pod(name: str, node: str, gpus: int, phase: str = "Running") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "other"},
        "spec": {"nodeName": node, "containers": [container(gpus)]},
        "status": {"phase": phase},
    }


def cluster(shape: str = "block=2,rack=2,host=4", gpus: int = 8) -> list[dict[str, Any]]:
    levels = [(part.split("=")[0], int(part.split("=")[1])) for part in shape.split(",")]
    topology, nodes = generate_cluster(levels, gpus)
    return [topology, *nodes]


def load(objects: list[dict[str, Any]]) -> Inputs:
    return load_texts([("test", "\n---\n".join(json.dumps(obj) for obj in objects))])


def world(objects: list[dict[str, Any]]):
    """(snapshot, views, units) for a list of manifests."""
    inputs = load(objects)
    snapshot, _ = ClusterSnapshot.build(inputs.nodes, inputs.pods)
    views = {name: TopologyView.build(topology, snapshot) for name, topology in inputs.topologies.items()}
    return snapshot, views, units_from_groups(inputs.groups)
