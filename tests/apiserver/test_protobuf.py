"""The protobuf bodies of `kubectl create namespace|configmap`, read into JSON objects."""

from __future__ import annotations

import pytest

from apiserver.helpers import Client
from tandem.apiserver.protobuf import MAGIC, Unreadable, decode

PROTOBUF = "application/vnd.kubernetes.protobuf"


def _varint(value: int) -> bytes:
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def _field(number: int, value: bytes | int | str) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _envelope(kind: str, raw: bytes) -> bytes:
    return MAGIC + _field(1, _field(1, "v1") + _field(2, kind)) + _field(2, raw)


def _config_map() -> bytes:
    meta = _field(1, "cfg") + _field(2, "") + _field(11, _field(1, "app") + _field(2, "web")) + _field(14, "f1") + _field(14, "f2")
    raw = _field(1, meta) + _field(2, _field(1, "a") + _field(2, "b")) + _field(3, _field(1, "bin") + _field(2, b"\x00\x01")) + _field(4, 1)
    return _envelope("ConfigMap", raw)


def test_config_maps_and_namespaces_are_read():
    assert decode(_config_map()) == {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "labels": {"app": "web"}, "finalizers": ["f1", "f2"]},
        "data": {"a": "b"}, "binaryData": {"bin": "AAE="}, "immutable": True,
    }
    assert decode(_envelope("Namespace", _field(1, _field(1, "team")))) == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}


def test_other_kinds_and_broken_bodies_are_refused():
    with pytest.raises(Unreadable, match="Secret"):
        decode(_envelope("Secret", b""))
    with pytest.raises(Unreadable):
        decode(b"not protobuf")
    with pytest.raises(Unreadable):
        decode(MAGIC + b"\x0a\x7f")  # a field longer than the body


def test_a_protobuf_create_over_http(client: Client):
    created = client.post("/api/v1/namespaces/default/configmaps", _config_map(), content_type=PROTOBUF)
    assert created.code == 201 and created.body["data"] == {"a": "b"}
    refused = client.post("/api/v1/namespaces/default/configmaps", _envelope("Secret", b""), content_type=PROTOBUF)
    assert refused.code == 415 and "send JSON" in refused.body["message"]
