"""Server-side printing: a `meta.k8s.io/v1` Table, which `kubectl get` asks for and prints.

Custom resources get Name and their CRD's `additionalPrinterColumns` (Age alone when it
has none), evaluated with the simple JSONPath forms CRDs use (`.spec.replicas`,
`.spec.levels[0].name`, `.status.conditions[?(@.type=="Available")].status`, `[*]`);
`date` columns print as an age (`5m`), as the real server prints them. Built-in kinds get
the columns kubectl users know (Pods: Ready, Status, Restarts, Age; wide: IP, Node).
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from tandem.api.timestamps import seconds
from tandem.apiserver.kinds import Column, Resource

TABLE_VERSIONS = ("v1", "v1beta1")
NAME = Column("Name", "string", ".metadata.name", "Name must be unique within a namespace.", 0, "name")
AGE = Column("Age", "date", ".metadata.creationTimestamp", "CreationTimestamp is a timestamp representing the server time when this object was created.")


def wants_table(accept: str) -> bool:
    """Whether an Accept header asks for a Table (kubectl get sends `application/json;as=Table;v=v1;g=meta.k8s.io,...`)."""
    for part in accept.split(","):
        params = {k.strip(): v.strip() for k, _, v in (p.partition("=") for p in part.split(";")[1:])}
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and params.get("v", "v1") in TABLE_VERSIONS:
            return True
    return False


def table(resource: Resource, objects: list[dict[str, Any]], now: float, include: str = "Metadata", metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    columns, cells = _printer(resource)
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": cells(obj, now)}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata") or {}}
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata or {},
        "columnDefinitions": [
            {"name": c.name, "type": c.type, "format": c.format, "description": c.description, "priority": c.priority}
            for c in columns
        ],
        "rows": rows,
    }


Cells = Callable[[dict[str, Any], float], list[Any]]


def _printer(resource: Resource) -> tuple[list[Column], Cells]:
    if resource.custom:
        columns = list(resource.columns) if resource.columns else [AGE]
        return [NAME, *columns], lambda obj, now: [_name(obj)] + [_cell(c, obj, now) for c in columns]
    built_in = BUILT_IN.get(resource.kind)
    if built_in is None:
        return [NAME, AGE], lambda obj, now: [_name(obj), age(_created(obj), now)]
    names, cells = built_in
    return [_column(n) for n in names], cells


def _column(spec: str) -> Column:
    """`Name`, `IP:1` (priority 1), `Restarts/integer`."""
    text, _, priority = spec.partition(":")
    name, _, kind = text.partition("/")
    return Column(name, kind or ("date" if name in ("Age", "Last Seen") else "string"), "", "", int(priority or 0), "name" if name == "Name" else "")


# ----------------------------------------------------------------------------- JSONPath

_STEP = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-$]+)"""
    r"""|\[(?P<index>-?\d+|\*)\]"""
    r"""|\[(?P<start>-?\d*):(?P<stop>-?\d*)\]"""
    r"""|\[\?\(@\.(?P<test>[A-Za-z0-9_.\-]+)\s*(?P<op>==|!=)\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>[^)\s]+))\)\]"""
    r"""|\[['"](?P<quoted>[^'"]+)['"]\]"""
)


def evaluate(path: str, obj: Any) -> list[Any]:
    """Every value `path` selects in `obj` (a small JSONPath: fields, indices, slices, `[*]`, `[?(@.f=="v")]`)."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    text = text.removeprefix("$")
    values = [obj]
    position = 0
    while position < len(text):
        m = _STEP.match(text, position)
        if not m:
            return []
        position = m.end()
        step = m.groupdict()
        out: list[Any] = []
        for value in values:
            key = step["field"] if step["field"] is not None else step["quoted"]
            if key is not None:
                if isinstance(value, dict) and key in value:
                    out.append(value[key])
            elif step["index"] is not None:
                if step["index"] == "*":
                    out += value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else []
                elif isinstance(value, list) and -len(value) <= int(step["index"]) < len(value):
                    out.append(value[int(step["index"])])
            elif step["op"] is None:
                if isinstance(value, list):
                    begin = int(step["start"]) if step["start"] else None
                    stop = int(step["stop"]) if step["stop"] else None
                    out += value[begin:stop]
            elif isinstance(value, list):
                wanted = next(v for v in (step["dq"], step["sq"], step["bare"]) if v is not None)
                for element in value:
                    got = evaluate("." + step["test"], element)
                    hit = bool(got) and _text(got[0]) == wanted
                    if hit == (step["op"] == "=="):
                        out.append(element)
        values = out
    return values


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _cell(column: Column, obj: dict[str, Any], now: float) -> Any:
    values = evaluate(column.json_path, obj)
    if not values or values[0] is None:
        return None
    value = values[0]
    if column.type == "string":
        return " ".join(_text(v) for v in values)
    if column.type == "integer":
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if column.type == "number":
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if column.type == "boolean":
        return value if isinstance(value, bool) else None
    if column.type == "date":
        return age(value, now) if isinstance(value, str) else None
    return None


# ----------------------------------------------------------------------------- ages


def age(timestamp: str | None, now: float) -> str:
    """How long ago, as kubectl prints it: `45s`, `3m20s`, `2h5m`, `4d`."""
    if not timestamp:
        return "<unknown>"
    try:
        return human_duration(now - seconds(timestamp))
    except ValueError:
        return "<invalid>"


def human_duration(delta: float) -> str:
    s = int(delta)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24 % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


# ----------------------------------------------------------------------------- built-in kinds


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _created(obj: dict[str, Any]) -> str | None:
    return (obj.get("metadata") or {}).get("creationTimestamp")


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition.get("status")
    return None


def _pod(obj: dict[str, Any], now: float) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    containers = spec.get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        phase = "Terminating"
    elif spec.get("schedulingGates"):
        phase = "SchedulingGated"
    else:
        phase = status.get("reason") or status.get("phase") or "Pending"
    return [_name(obj), f"{ready}/{len(containers)}", phase, restarts, age(_created(obj), now),
            status.get("podIP") or "<none>", spec.get("nodeName") or "<none>"]


def _node(obj: dict[str, Any], now: float) -> list[Any]:
    ready = _condition(obj, "Ready")
    state = "NotReady" if ready not in (None, "True") else "Ready"
    if (obj.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = (obj.get("metadata") or {}).get("labels") or {}
    roles = sorted(k.rpartition("/")[2] for k in labels if k.startswith("node-role.kubernetes.io/"))
    version = ((obj.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion") or ""
    gpus = ((obj.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu") or "<none>"
    return [_name(obj), state, ",".join(roles) or "<none>", age(_created(obj), now), version, gpus]


def _service(obj: dict[str, Any], now: float) -> list[Any]:
    spec = obj.get("spec") or {}
    ports = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []) or "<none>"
    external = ",".join(spec.get("externalIPs") or []) or "<none>"
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items())) or "<none>"
    return [_name(obj), spec.get("type", "ClusterIP"), spec.get("clusterIP") or "<none>", external, ports, age(_created(obj), now), selector]


def _event(obj: dict[str, Any], now: float) -> list[Any]:
    involved = obj.get("involvedObject") or {}
    last = obj.get("lastTimestamp") or obj.get("eventTime") or _created(obj)
    what = f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"
    return [age(last, now), obj.get("type", ""), obj.get("reason", ""), what, obj.get("message", ""), _name(obj)]


def _lease(obj: dict[str, Any], now: float) -> list[Any]:
    return [_name(obj), (obj.get("spec") or {}).get("holderIdentity") or "<none>", age(_created(obj), now)]


def _pod_template(obj: dict[str, Any], now: float) -> list[Any]:
    """kubectl's columns for a PodTemplate: its containers, their images, the pods' labels."""
    template = obj.get("template") or {}
    containers = [c for c in (template.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]
    labels = (template.get("metadata") or {}).get("labels") or {}
    return [_name(obj), ",".join(str(c.get("name", "")) for c in containers), ",".join(str(c.get("image", "")) for c in containers),
            ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "<none>"]


def _endpoints(obj: dict[str, Any], now: float) -> list[Any]:
    addresses = [
        f"{a.get('ip')}:{p.get('port')}" for s in obj.get("subsets") or [] for a in s.get("addresses") or [] for p in s.get("ports") or [{}]
    ]
    return [_name(obj), ",".join(addresses) or "<none>", age(_created(obj), now)]


def _hpa(obj: dict[str, Any], now: float) -> list[Any]:
    """kubectl's columns for an HPA, without Targets (no metrics are read here)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    ref = spec.get("scaleTargetRef") or {}
    return [_name(obj), f"{ref.get('kind', '')}/{ref.get('name', '')}", spec.get("minReplicas", 1), spec.get("maxReplicas", ""),
            status.get("currentReplicas", 0), age(_created(obj), now)]


BUILT_IN: dict[str, tuple[tuple[str, ...], Cells]] = {
    "HorizontalPodAutoscaler": (("Name", "Reference", "MinPods/integer", "MaxPods/integer", "Replicas/integer", "Age"), _hpa),
    "Pod": (("Name", "Ready", "Status", "Restarts/integer", "Age", "IP:1", "Node:1"), _pod),
    "Node": (("Name", "Status", "Roles", "Age", "Version", "GPUs:1"), _node),
    "Namespace": (("Name", "Status", "Age"), lambda o, now: [_name(o), (o.get("status") or {}).get("phase", "Active"), age(_created(o), now)]),
    "Service": (("Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector:1"), _service),
    "ConfigMap": (("Name", "Data/integer", "Age"), lambda o, now: [_name(o), len(o.get("data") or {}) + len(o.get("binaryData") or {}), age(_created(o), now)]),
    "Endpoints": (("Name", "Endpoints", "Age"), _endpoints),
    "PodTemplate": (("Name", "Containers", "Images", "Pod Labels"), _pod_template),
    "Event": (("Last Seen", "Type", "Reason", "Object", "Message", "Name:1"), _event),
    "Lease": (("Name", "Holder", "Age"), _lease),
    "CustomResourceDefinition": (("Name", "Created At"), lambda o, now: [_name(o), _created(o) or ""]),
    "ValidatingWebhookConfiguration": (("Name", "Webhooks/integer", "Age"), lambda o, now: [_name(o), len(o.get("webhooks") or []), age(_created(o), now)]),
}
