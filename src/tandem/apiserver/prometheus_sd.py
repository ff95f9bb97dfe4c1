"""Prometheus' Kubernetes pod discovery, served over HTTP service discovery.

Debian's `prometheus` is built without Kubernetes service discovery (`kubernetes_sd_configs`
is not a field of its config), so a Prometheus on this machine cannot watch `tandem
apiserver` itself. Every build has `http_sd_configs`, though: the server answers
`GET /tandem/prometheus/pods` (or `/tandem/prometheus/namespaces/NS/pods`) with what the
pod role of `kubernetes_sd_configs` makes of the pods it stores, so a scrape job written for
Kubernetes (examples/prometheus/prometheus.yml) keeps its relabel rules unchanged and finds
the pods as they come, turn Ready and go.

What the pod role gives, after Prometheus' discovery/kubernetes/pod.go: a pod without an IP
gives nothing; otherwise one target per declared port of each container and init container
(`podIP:port`), and one port-less target (`podIP`) for a container that declares none, each
with the pod's meta labels (`__meta_kubernetes_namespace`, `__meta_kubernetes_pod_*`: name,
IP, ready, phase, node, host IP, UID, controller, labels and annotations with their
`...present_` twins) and the container's (name, image, init, port name, number, protocol).
Label and annotation names are sanitised as Prometheus does (every character outside
`[a-zA-Z0-9_]` becomes `_`).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from tandem.cluster.payloads import as_pod
from tandem.cluster.pods import pod_ready

_INVALID = re.compile(r"[^a-zA-Z0-9_]")
POD = "__meta_kubernetes_pod_"


def _sanitised(name: str) -> str:
    return _INVALID.sub("_", name)


def _pod_labels(pod: dict[str, Any], ip: str) -> dict[str, str]:
    meta, status, spec = pod["metadata"], pod.get("status") or {}, pod.get("spec") or {}
    labels = {"__meta_kubernetes_namespace": meta.get("namespace", ""), POD + "name": meta["name"], POD + "ip": ip,
              POD + "ready": str(pod_ready(as_pod(pod))).lower(), POD + "phase": status.get("phase", ""),
              POD + "node_name": spec.get("nodeName", ""), POD + "host_ip": status.get("hostIP", ""), POD + "uid": meta.get("uid", "")}
    controller = next((ref for ref in meta.get("ownerReferences") or [] if ref.get("controller")), None)
    if controller is not None:
        labels[POD + "controller_kind"] = controller.get("kind", "")
        labels[POD + "controller_name"] = controller.get("name", "")
    for source, prefix in (("labels", "label"), ("annotations", "annotation")):
        for key, value in sorted((meta.get(source) or {}).items()):
            labels[f"{POD}{prefix}_{_sanitised(key)}"] = value
            labels[f"{POD}{prefix}present_{_sanitised(key)}"] = "true"
    return labels


def pod_targets(pods: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pod role's targets, as `http_sd` target groups (one target each, in pod order)."""
    groups: list[dict[str, Any]] = []
    for pod in pods:
        ip = (pod.get("status") or {}).get("podIP")
        if not ip:
            continue
        labels = _pod_labels(pod, ip)
        spec = pod.get("spec") or {}
        containers = [(c, "false") for c in spec.get("containers") or []] + [(c, "true") for c in spec.get("initContainers") or []]
        for container, init in containers:
            own = {POD + "container_name": container["name"], POD + "container_image": container.get("image", ""),
                   POD + "container_init": init}
            ports = container.get("ports") or []
            if not ports:
                groups.append({"targets": [ip], "labels": {**labels, **own}})
            for port in ports:
                groups.append({"targets": [f"{ip}:{port['containerPort']}"], "labels": {
                    **labels, **own, POD + "container_port_name": port.get("name", ""),
                    POD + "container_port_number": str(port["containerPort"]), POD + "container_port_protocol": port.get("protocol", "TCP")}})
    return groups


def namespace_of(path: str) -> tuple[bool, str | None]:
    """Whether `path` asks for the discovery (and then the namespace it names, or None for all)."""
    parts = path.strip("/").split("/")
    if parts == ["tandem", "prometheus", "pods"]:
        return True, None
    if len(parts) == 5 and parts[:3] == ["tandem", "prometheus", "namespaces"] and parts[4] == "pods" and parts[3]:
        return True, parts[3]
    return False, None
