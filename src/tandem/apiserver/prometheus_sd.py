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
IP, ready (the Ready condition's status in lower case, `unknown` without one), phase, node,
host IP, UID, controller, labels and annotations with their `...present_` twins) and the
container's (name, image, init, port name, number, protocol). An IPv6 address is bracketed
in the target, as Go's `net.JoinHostPort` writes it.
Label and annotation names are sanitised as Prometheus does (every character outside
`[a-zA-Z0-9_]` becomes `_`).
"""

from __future__ import annotations

import re
from typing import Any, Iterable


_INVALID = re.compile(r"[^a-zA-Z0-9_]")
POD = "__meta_kubernetes_pod_"


def _sanitised(name: str) -> str:
    return _INVALID.sub("_", name)


def _pod_labels(pod: dict[str, Any], ip: str) -> dict[str, str]:
    meta, status, spec = pod["metadata"], pod.get("status") or {}, pod.get("spec") or {}
    labels = {"__meta_kubernetes_namespace": meta.get("namespace", ""), POD + "name": meta["name"], POD + "ip": ip,
              POD + "ready": _ready(status), POD + "phase": status.get("phase", ""),
              POD + "node_name": spec.get("nodeName", ""), POD + "host_ip": status.get("hostIP", ""), POD + "uid": meta.get("uid", "")}
    controller = next((ref for ref in meta.get("ownerReferences") or [] if ref.get("controller")), None)
    for field in ("kind", "name"):
        value = (controller or {}).get(field)
        if value:  # as pod.go: no controller, or an empty kind or name, gives no label
            labels[POD + "controller_" + field] = value
    for source, prefix in (("labels", "label"), ("annotations", "annotation")):
        for key, value in sorted((meta.get(source) or {}).items()):
            labels[f"{POD}{prefix}_{_sanitised(key)}"] = value
            labels[f"{POD}{prefix}present_{_sanitised(key)}"] = "true"
    return labels


def _ready(status: dict[str, Any]) -> str:
    """pod.go's podReady: the Ready condition's status in lower case, `unknown` without one."""
    found = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    return str(found.get("status") or "").lower() if found is not None else "unknown"


def _address(ip: str, port: int | None) -> str:
    """`ip:port` as Go's net.JoinHostPort writes it (an IPv6 address in brackets); a port-less
    target is the bare IP, bracketed when IPv6, as pod.go writes it."""
    bracketed = f"[{ip}]" if ":" in ip else ip
    return bracketed if port is None else f"{bracketed}:{port}"


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
                groups.append({"targets": [_address(ip, None)], "labels": {**labels, **own}})
            for port in ports:
                groups.append({"targets": [_address(ip, port["containerPort"])], "labels": {
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
