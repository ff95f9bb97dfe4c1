"""How every world names a kind: its plain name, or `Kind.group` where it is registered so.

The ports name objects by one string per kind, the key. Kinds whose name is unique keep
their plain name (`Pod`, `InferenceGroup`, `HyperNode`); a kind whose name another group
also uses (KAI's and Kueue's `Topology`) is registered under its group-qualified name, as
kubectl writes a resource (`Topology.kai.scheduler`). One rule (`key_of`) then gives an
object's key from its `apiVersion` and `kind` and the world's registered qualified keys,
so the memory store, the local API server and the Kubernetes adapter key alike.
"""

from __future__ import annotations

from typing import Any, Collection, Mapping


def group_of(api_version: str) -> str:
    """`kai.scheduler/v1alpha1` -> `kai.scheduler`; `v1` (core) -> ``."""
    return api_version.rpartition("/")[0]


def qualified(kind: str, group: str) -> str:
    """`Topology`, `kai.scheduler` -> `Topology.kai.scheduler` (core kinds: the plain name)."""
    return f"{kind}.{group}" if group else kind


def is_qualified(key: str) -> bool:
    """Whether `key` names its group (kind names have no dots, groups always do)."""
    return "." in key


def split(key: str) -> tuple[str, str | None]:
    """`Topology.kai.scheduler` -> (`Topology`, `kai.scheduler`); `Pod` -> (`Pod`, None)."""
    kind, dot, group = key.partition(".")
    return (kind, group) if dot else (kind, None)


def key_of(api_version: str, kind: str, qualified_keys: Collection[str]) -> str:
    """The key of a kind: `Kind.group` when that is one of the world's registered qualified
    keys, else the plain kind name."""
    name = qualified(kind, group_of(api_version))
    return name if name in qualified_keys else kind


def object_key(obj: Mapping[str, Any], qualified_keys: Collection[str]) -> str:
    """`key_of` an object's own `apiVersion` and `kind`."""
    return key_of(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""), qualified_keys)
