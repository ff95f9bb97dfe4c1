"""What the informer caches keep of each object: what tandem reads, and no more.

A cluster's pods are most of an informer's memory, and most of a pod is what tandem never
reads (environment, volumes, probes, container statuses, managed fields). A Pod keeps the
fields the controller (`controller/manifests.py`, `controller/decide.py`, `cluster/replicas.py`), the placement models
(`api/kube.py`: requests, init containers, overhead, node selector, tolerations) and the
peers file (`status.podIP`, and a group's pod's named container ports) read; every object loses `metadata.managedFields` and the
`last-applied-configuration` annotation; a Node loses its image list; a
CustomResourceDefinition keeps only what says which kind it serves (group, names, scope,
versions without their schemas, conditions), not its schemas, often the biggest objects in a
cluster; an HPA or a KEDA ScaledObject keeps only its `spec.scaleTargetRef`. A Pod keeps
only the conditions tandem reads (Ready, PodScheduled), and the equal parts of Pods and
of Nodes are kept once, their strings interned (`Shared`): these two took a trimmed pod
from about 6.0 to 1.4 KB. A trimmed object is a new dict: the one the server sent is not
changed.

Trimmed objects are for reading: nothing tandem writes is built from a cached Pod (patches
name only what they change), so a dropped field is never written back as absent.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, Mapping

from tandem.api.naming import GROUP_LABEL

Object = dict[str, Any]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

POD_METADATA = (
    "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
    "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers",
)
POD_SPEC = (
    "nodeName", "nodeSelector", "schedulingGates", "tolerations", "affinity", "priority", "priorityClassName",
    "schedulerName", "overhead", "hostname", "subdomain", "topologySpreadConstraints",
)
CONTAINER = ("name", "image", "resources", "restartPolicy")  # restartPolicy: a sidecar init container
POD_STATUS = ("phase", "conditions", "podIP", "hostIP", "reason", "nominatedNodeName")
# The pod conditions tandem reads: Ready (a replica's readiness) and PodScheduled (a
# scheduler's "unschedulable", backend_words.py); a kubelet writes three more to every pod.
POD_CONDITIONS = ("Ready", "PodScheduled")
# Fields of metadata, spec or status every object has its own value of (its name, uid,
# version, stamps, hostname, IP): not interned.
UNIQUE = frozenset({"name", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "hostname", "podIP"})


def trim_metadata(meta: Mapping[str, Any], keep: tuple[str, ...] | None = None) -> Object:
    out = {k: v for k, v in meta.items() if k != "managedFields" and (keep is None or k in keep)}
    annotations = out.get("annotations")
    if isinstance(annotations, Mapping) and LAST_APPLIED in annotations:
        out["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    return out


# Fields whose values (lists and maps) many objects hold equal: kept once (`Shared`).
SHARED_FIELDS = frozenset({
    "tolerations", "containers", "initContainers", "nodeSelector", "affinity", "topologySpreadConstraints", "overhead",
    "schedulingGates", "conditions", "ownerReferences", "finalizers", "allocatable", "capacity", "taints", "nodeInfo",
})


class Shared:
    """Equal parts of many objects, kept once. A cluster's pods repeat the same
    tolerations, containers, condition lists and owner references (three DaemonSet pods on
    every node, ten pods a group) and the same few hundred strings (namespaces, label keys
    and values, node names, images, quantities); decoded JSON makes a new object of each,
    every time. Per field of `SHARED_FIELDS` a memo maps a part's text (`repr`) to the
    first part seen equal to it, its strings interned; other short strings are interned
    (`sys.intern`), but for the values of the `UNIQUE` fields.

    With the conditions below, a trimmed pod of `bench/settled_cluster.py --nodes 10000`
    went from about 6.0 KB to 1.4 KB (tracemalloc), for about 30 µs a pod to trim against 18.
    Each memo holds at most `limit` parts and starts afresh when full (a field whose
    values seldom repeat, a node's selector, costs a look-up and shares little). One
    per informer: no state outside it. Shared parts are safe because cached objects are
    never changed in place (informer.py)."""

    def __init__(self, limit: int = 2048):
        self._memos: dict[str, dict[str, Any]] = {}
        self._limit = limit

    def compact(self, part: Mapping[str, Any]) -> Object:
        """An object's metadata, spec or status with its equal parts shared and its short strings interned."""
        out: Object = {}
        for key, value in part.items():
            kind = type(value)
            if key in UNIQUE:
                out[key] = value
            elif kind is str:
                out[key] = sys.intern(value) if len(value) <= 64 else value
            elif key in SHARED_FIELDS and (kind is dict or kind is list):
                out[key] = self._kept(key, value)
            else:
                out[key] = _interned(value)
        return out

    def _kept(self, field: str, value: Any) -> Any:
        memo = self._memos.setdefault(field, {})
        text = repr(value)  # equal parts, as decoded from JSON, have equal text (and 1, 1.0 and True differ)
        kept = memo.get(text)
        if kept is None:
            if len(memo) >= self._limit:
                memo.clear()
            kept = memo[text] = _interned(value)
        return kept


def _interned(value: Any, intern: Callable[[str], str] = sys.intern) -> Any:
    """`value` rebuilt with its short strings interned."""
    kind = type(value)  # exact types first: this runs for every string of every pod listed or watched
    if kind is str:
        return intern(value) if len(value) <= 64 else value
    if kind is dict or isinstance(value, Mapping):
        return {intern(k) if type(k) is str else k: _interned(v) for k, v in value.items()}
    if kind is list:
        return [_interned(v) for v in value]
    return value


def trim_object(obj: Mapping[str, Any]) -> Object:
    """Any kind: everything but managed fields and the last-applied annotation."""
    out = dict(obj)
    if isinstance(obj.get("metadata"), Mapping):
        out["metadata"] = trim_metadata(obj["metadata"])
    return out


def trim_pod(pod: Mapping[str, Any], shared: Shared | None = None) -> Object:
    """`shared`: the memo of equal parts this pod's may be kept as (none: a fresh one, which
    still interns its strings)."""
    shared = Shared() if shared is None else shared
    out: Object = {k: pod[k] for k in ("apiVersion", "kind") if k in pod}
    out["metadata"] = shared.compact(trim_metadata(pod.get("metadata") or {}, POD_METADATA))
    spec = pod.get("spec") or {}
    trimmed_spec: Object = {k: spec[k] for k in POD_SPEC if k in spec}
    for field in ("containers", "initContainers"):
        if field in spec:
            trimmed_spec[field] = [{k: c[k] for k in CONTAINER if k in c} for c in spec[field] or []]
    if GROUP_LABEL in (out["metadata"].get("labels") or {}):  # a group's pod: its peers file lists its named ports
        for trimmed, container in zip(trimmed_spec.get("containers", []), spec.get("containers") or []):
            named = [_named_port(p) for p in container.get("ports") or [] if isinstance(p, Mapping) and p.get("name")]
            if named:
                trimmed["ports"] = named
    out["spec"] = shared.compact(trimmed_spec)
    if "status" in pod:
        status = pod.get("status") or {}
        trimmed_status = {k: status[k] for k in POD_STATUS if k in status}
        if isinstance(trimmed_status.get("conditions"), list):
            trimmed_status["conditions"] = [c for c in trimmed_status["conditions"] if isinstance(c, Mapping) and c.get("type") in POD_CONDITIONS]
        out["status"] = shared.compact(trimmed_status)
    return out


def _named_port(port: Mapping[str, Any]) -> Object:
    """What the peers file reads of a port (its name is one of a few: interned)."""
    return {"name": sys.intern(str(port["name"])), "containerPort": port.get("containerPort")}


def trim_node(node: Mapping[str, Any], shared: Shared | None = None) -> Object:
    shared = Shared() if shared is None else shared
    out = trim_object(node)
    status = node.get("status")
    if isinstance(status, Mapping):
        out["status"] = {k: v for k, v in status.items() if k != "images"}
    return {k: shared.compact(v) if k in ("metadata", "spec", "status") and isinstance(v, Mapping) else v for k, v in out.items()}


CRD_SPEC = ("group", "names", "scope")
CRD_VERSION = ("name", "served", "storage")


def trim_crd(crd: Mapping[str, Any]) -> Object:
    out: Object = {k: crd[k] for k in ("apiVersion", "kind") if k in crd}
    out["metadata"] = trim_metadata(crd.get("metadata") or {}, POD_METADATA)
    spec = crd.get("spec") or {}
    out["spec"] = {k: spec[k] for k in CRD_SPEC if k in spec}
    out["spec"]["versions"] = [{k: v[k] for k in CRD_VERSION if k in v} for v in spec.get("versions") or []]
    status = crd.get("status") or {}
    if "conditions" in status:
        out["status"] = {"conditions": status["conditions"]}
    return out


def trim_scaler(obj: Mapping[str, Any]) -> Object:
    """An HPA or a KEDA ScaledObject: only what says what it scales (`spec.scaleTargetRef`),
    not its metrics, triggers, behaviour or status."""
    out: Object = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    out["metadata"] = trim_metadata(obj.get("metadata") or {}, POD_METADATA)
    spec = obj.get("spec")
    if isinstance(spec, Mapping) and "scaleTargetRef" in spec:
        out["spec"] = {"scaleTargetRef": spec["scaleTargetRef"]}
    return out


TRIMS: dict[str, Callable[[Mapping[str, Any]], Object]] = {
    "Pod": trim_pod, "Node": trim_node, "CustomResourceDefinition": trim_crd, "HorizontalPodAutoscaler": trim_scaler, "ScaledObject": trim_scaler,
}


def trimmer(kind: str) -> Callable[[Mapping[str, Any]], Object]:
    """The trim for `kind`; a Pod's or Node's with a memo of shared parts of its own (one per call: per informer)."""
    if kind == "Pod":
        return functools.partial(trim_pod, shared=Shared())
    if kind == "Node":
        return functools.partial(trim_node, shared=Shared())
    return TRIMS.get(kind, trim_object)
