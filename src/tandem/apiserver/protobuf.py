"""Reading the protobuf bodies kubectl's typed commands send, for the few kinds they create here.

`kubectl create namespace`, `kubectl create configmap` and `kubectl autoscale` post protobuf
(`application/vnd.kubernetes.protobuf`): the `k8s\\x00` magic, then a `runtime.Unknown`
holding the object's own message. This reads those three kinds (and the ObjectMeta fields a
client sets) into the JSON shape; any other kind in protobuf is 415, and the caller says
to send JSON instead. Answers are always JSON, which such clients also accept.
"""

from __future__ import annotations

import base64
from typing import Any

MAGIC = b"k8s\x00"

# field number -> (JSON name, type); a type is "string", "bytes", "int", "bool", a nested
# schema (dict), ("map", value type), or ("list", item type).
Schema = dict[int, tuple[str, Any]]

OWNER_REFERENCE: Schema = {1: ("kind", "string"), 3: ("name", "string"), 4: ("uid", "string"), 5: ("apiVersion", "string"),
                           6: ("controller", "bool"), 7: ("blockOwnerDeletion", "bool")}
OBJECT_META: Schema = {
    1: ("name", "string"), 2: ("generateName", "string"), 3: ("namespace", "string"), 5: ("uid", "string"),
    6: ("resourceVersion", "string"), 7: ("generation", "int"), 11: ("labels", ("map", "string")),
    12: ("annotations", ("map", "string")), 13: ("ownerReferences", ("list", OWNER_REFERENCE)), 14: ("finalizers", ("list", "string")),
}
KINDS: dict[str, Schema] = {
    "Namespace": {1: ("metadata", OBJECT_META), 2: ("spec", {1: ("finalizers", ("list", "string"))})},
    "ConfigMap": {1: ("metadata", OBJECT_META), 2: ("data", ("map", "string")), 3: ("binaryData", ("map", "bytes")), 4: ("immutable", "bool")},
    # autoscaling/v1, as `kubectl autoscale` sends it (k8s.io/api/autoscaling/v1/generated.proto)
    "HorizontalPodAutoscaler": {1: ("metadata", OBJECT_META), 2: ("spec", {
        1: ("scaleTargetRef", {1: ("kind", "string"), 2: ("name", "string"), 3: ("apiVersion", "string")}),
        2: ("minReplicas", "int"), 3: ("maxReplicas", "int"), 4: ("targetCPUUtilizationPercentage", "int")})},
}
_UNKNOWN: Schema = {1: ("typeMeta", {1: ("apiVersion", "string"), 2: ("kind", "string")}), 2: ("raw", "bytes")}


class Unreadable(ValueError):
    """Not protobuf this server reads; the message says why."""


def decode(data: bytes) -> dict[str, Any]:
    """The object in a Kubernetes protobuf body, as JSON would carry it."""
    if not data.startswith(MAGIC):
        raise Unreadable("the body does not start with the Kubernetes protobuf magic")
    envelope = _message(data[len(MAGIC):], _UNKNOWN, raw_bytes=True)
    meta = envelope.get("typeMeta") or {}
    kind = meta.get("kind", "")
    schema = KINDS.get(kind)
    if schema is None:
        raise Unreadable(f"{kind or 'this kind'} in protobuf is not read here (only {', '.join(sorted(KINDS))})")
    obj = _message(envelope.get("raw", b""), schema)
    return {"apiVersion": meta.get("apiVersion", "v1"), "kind": kind, **obj}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data):
            raise Unreadable("truncated protobuf varint")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) in order: an int for varints and fixed widths, bytes for length-delimited."""
    out: list[tuple[int, int | bytes]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            out.append((number, value))
        elif wire == 2:
            length, at = _varint(data, at)
            if at + length > len(data):
                raise Unreadable("truncated protobuf field")
            out.append((number, data[at: at + length]))
            at += length
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            out.append((number, int.from_bytes(data[at: at + width], "little")))
            at += width
        else:
            raise Unreadable(f"unsupported protobuf wire type {wire}")
    return out


def _message(data: bytes, schema: Schema, raw_bytes: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, value in _fields(data):
        if number not in schema:
            continue  # a field this server does not need
        name, kind = schema[number]
        if isinstance(kind, tuple) and kind[0] == "map":
            entry = _message(_bytes(value), {1: ("key", "string"), 2: ("value", kind[1])})
            out.setdefault(name, {})[entry.get("key", "")] = entry.get("value", "")
        elif isinstance(kind, tuple) and kind[0] == "list":
            out.setdefault(name, []).append(_scalar(value, kind[1]))
        else:
            out[name] = value if raw_bytes and kind == "bytes" else _scalar(value, kind)
    return {k: v for k, v in out.items() if v != ""}  # an unset string is sent empty; JSON would omit it


def _scalar(value: int | bytes, kind: Any) -> Any:
    if isinstance(kind, dict):
        return _message(_bytes(value), kind)
    if kind == "string":
        return _bytes(value).decode("utf-8")
    if kind == "bytes":
        return base64.b64encode(_bytes(value)).decode()
    if kind == "bool":
        return bool(value)
    if isinstance(value, int):
        return value
    raise Unreadable(f"unexpected protobuf value for a {kind}")


def _bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise Unreadable("expected a length-delimited protobuf field")
    return value
