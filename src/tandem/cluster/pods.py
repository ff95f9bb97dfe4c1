"""What any world reads off a pod: readiness, failure, its index in its replica, the GPUs
it asks for, and the node it is (or will be) on. One definition each, shared by the
controller, the simulator, the local API server and the operator."""

from __future__ import annotations

from tandem.api.naming import GATE, GPU_RESOURCE, HOSTNAME_LABEL, POD_INDEX_LABEL
from tandem.api.quantity import MILLI, parse_quantity
from tandem.cluster.payloads import PodPayload


def pod_ready(pod: PodPayload) -> bool:
    """The pod's Ready condition is True (the one Ready check every part of tandem uses)."""
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions", []))


def pod_failed(pod: PodPayload) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded")


def pod_index(pod: PodPayload) -> int:
    return int(pod["metadata"].get("labels", {}).get(POD_INDEX_LABEL, "0"))


def serving_leader(pod: PodPayload) -> bool:
    """The leader (pod 0) of its replica, Ready and not being deleted: a pod whose engine
    takes requests and reports the replica's load (what the metrics sources read)."""
    return pod_ready(pod) and pod_index(pod) == 0 and not pod.get("metadata", {}).get("deletionTimestamp")


def pod_gpus(pod: PodPayload) -> int:
    """Whole GPUs a pod requests, over its containers."""
    return sum(
        parse_quantity(c.get("resources", {}).get("requests", {}).get(GPU_RESOURCE, 0)) // MILLI for c in pod["spec"].get("containers", [])
    )


def assigned_node(pod: PodPayload) -> str | None:
    """The node a pod is bound to, or that tandem chose for it (hostname selector, gate gone)."""
    spec = pod.get("spec", {})
    node = spec.get("nodeName")
    if node:
        return node
    gated = any(g.get("name") == GATE for g in spec.get("schedulingGates", []))
    return None if gated else spec.get("nodeSelector", {}).get(HOSTNAME_LABEL)
