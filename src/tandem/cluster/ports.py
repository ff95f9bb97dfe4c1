"""The two ports through which the controller sees and changes a cluster.

Every world serves them: the simulator's in-memory store, the local API server, and a
real cluster through `tandem.kube`. Objects are plain dicts shaped exactly as the
Kubernetes API serves them (`apiVersion`, `kind`, `metadata`, `spec`, `status`);
resourceVersions are opaque strings, compared for equality only. A `kind` argument is the
kind's key (`cluster/kind_keys.py`): its plain name, or `Kind.group` for a kind whose name
another group also uses (`Topology.kai.scheduler`, `Topology.kueue.x-k8s.io`).

- `Reader`: get and list, with label and field selectors, over one consistent snapshot
  (`Cluster.snapshot()` gives one per pass). Objects it returns are shared with the
  snapshot and must not be mutated.
- `Writer`: create; JSON merge patch (RFC 7386) of an object or of its `/status`, with an
  optional resourceVersion precondition; delete with uid and resourceVersion
  preconditions and a propagation policy; events, aggregated by the world.
- `Discovery`: which kinds the API server serves right now (`served`). A kind a CRD
  brings (a scheduler backend's PodGroup) is served only while that CRD is installed; a
  world answers from what it knows without a request (the memory store: its registered
  kinds and the built-in ones; `KubeCluster`: whether each kind's informer lists it), so
  a pass may ask every time. The controller writes a kind only while it is served.

Watching and binding are not here: they belong to the worlds that need them (the
simulator's kubelet binds, the operator's informers watch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal, Mapping, Protocol

from tandem.errors import (  # re-exported: the controller's callers catch these
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerTimeout,
    ServiceUnavailable,
    TooManyRequests,
)

Object = dict[str, Any]
Selector = str | Mapping[str, str] | None
Propagation = Literal["Background", "Foreground", "Orphan"]
EventType = Literal["Normal", "Warning"]
MERGE_PATCH = "application/merge-patch+json"  # the content type every patch is sent as

__all__ = [
    "AlreadyExists",
    "ApiError",
    "Cluster",
    "Conflict",
    "Discovery",
    "EventType",
    "Forbidden",
    "Gone",
    "Invalid",
    "MERGE_PATCH",
    "NotFound",
    "Object",
    "ObjectRef",
    "Propagation",
    "Reader",
    "Selector",
    "ServerTimeout",
    "ServiceUnavailable",
    "TooManyRequests",
    "Writer",
]


@dataclass(frozen=True)
class ObjectRef:
    """The object an event is about (`involvedObject`)."""

    kind: str
    namespace: str | None
    name: str
    uid: str = ""
    api_version: str = ""

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> "ObjectRef":
        meta = obj.get("metadata", {})
        return cls(obj.get("kind", ""), meta.get("namespace"), meta.get("name", ""), meta.get("uid", ""), obj.get("apiVersion", ""))


class Reader(Protocol):
    def get(self, kind: str, namespace: str | None, name: str) -> Object: ...

    def list(self, kind: str, namespace: str | None = None, labels: Selector = None, fields: Selector = None) -> list[Object]: ...


class Writer(Protocol):
    def create(self, obj: Object) -> Object: ...

    def patch(
        self, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any], *, resource_version: str | None = None
    ) -> Object: ...

    def patch_status(
        self, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any], *, resource_version: str | None = None
    ) -> Object: ...

    def delete(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation: Propagation = "Background",
    ) -> None: ...

    def record_event(self, involved: ObjectRef, type: EventType, reason: str, message: str) -> None: ...


class Discovery(Protocol):
    def served(self, kinds: Iterable[str]) -> frozenset[str]:
        """Which of `kinds` (keys, `cluster/kind_keys.py`) the world serves now: a kind
        whose CRD is not installed is not, and neither is one the world cannot tell about."""
        ...


class Cluster(Writer, Discovery, Protocol):
    """A world as the controller sees it: a snapshot to read for each pass, a writer, and
    which kinds it serves."""

    def snapshot(self) -> Reader: ...
