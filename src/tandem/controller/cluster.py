"""The narrow cluster API the controller uses, and its errors.

Both worlds implement it: `tandem.sim.store.MemoryStore` (the embedded default) and,
later, a Kubernetes adapter. Objects are plain dicts shaped exactly as the Kubernetes
API serves them (`apiVersion`, `kind`, `metadata`, `spec`, `status`), so the same
controller code runs against either. Writes are compare-and-swap on
`metadata.resourceVersion`: a stale write fails with `Conflict` and the caller re-reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal, Mapping, Protocol

Object = dict[str, Any]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]


class ApiError(Exception):
    """An error the API server returns; `code` is the HTTP status it would carry."""

    code = 500
    reason = "InternalError"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class NotFound(ApiError):
    code, reason = 404, "NotFound"


class Conflict(ApiError):
    """A stale resourceVersion, or an operation the object's state forbids (409)."""

    code, reason = 409, "Conflict"


class AlreadyExists(ApiError):
    code, reason = 409, "AlreadyExists"


class Invalid(ApiError):
    code, reason = 422, "Invalid"


class Gone(ApiError):
    """A watch asked for a resourceVersion older than the history kept (410): re-list."""

    code, reason = 410, "Gone"


@dataclass(frozen=True)
class Event:
    type: EventType
    object: Object
    resource_version: int


@dataclass(frozen=True)
class ListResult:
    items: list[Object]
    resource_version: int  # watch from here to see every later change


class Cluster(Protocol):
    """What the controller may do to the cluster; nothing else."""

    def get(self, kind: str, namespace: str | None, name: str) -> Object: ...

    def list(
        self, kind: str, namespace: str | None = None, selector: str | Mapping[str, str] | None = None
    ) -> ListResult: ...

    def watch(
        self,
        kind: str,
        since: int,
        namespace: str | None = None,
        selector: str | Mapping[str, str] | None = None,
    ) -> list[Event]: ...

    def create(self, obj: Object) -> Object: ...

    def update(self, obj: Object) -> Object: ...

    def update_status(self, obj: Object) -> Object: ...

    def patch(self, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any], resource_version: str | None = None) -> Object: ...

    def delete(self, kind: str, namespace: str | None, name: str, resource_version: str | None = None) -> None: ...

    def bind(self, namespace: str, pod: str, node: str) -> Object: ...


def rfc3339(seconds: float) -> str:
    """Seconds since the epoch as the RFC 3339 text the API server writes in timestamps."""
    text = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")
    return text.rstrip("0").rstrip(".") + "Z"


def seconds(timestamp: str | None) -> float:
    """An RFC 3339 timestamp back to seconds since the epoch (0 when absent)."""
    if not timestamp:
        return 0.0
    return datetime.fromisoformat(str(timestamp).replace("Z", "+00:00")).timestamp()
