"""Answers that are not objects: `Status` (kind Status, apiVersion v1), as the API server sends them.

Every failure is a `tandem.errors.ApiError` (its `code` and `reason`) turned into a
Status here; messages name the resource as kubectl users know it
(`inferencegroups.tandem.dev "x" not found`). An invalid object carries one cause per
field (`details.causes`).
"""

from __future__ import annotations

from typing import Any

from tandem.apiserver.kinds import Resource
from tandem.apiserver.schema import Cause
from tandem.errors import AlreadyExists, ApiError, Conflict, Invalid, NotFound


class InvalidObject(Invalid):
    """422 naming every field that is wrong."""

    def __init__(self, resource: Resource | None, name: str, causes: list[Cause]):
        kind = resource.qualified_kind if resource else "object"
        shown = str(causes[0]) if len(causes) == 1 else "[" + ", ".join(str(c) for c in causes) + "]"
        super().__init__(f'{kind} "{name}" is invalid: {shown}')
        self.causes = causes
        self.kind_name = resource.kind if resource else ""
        self.group = resource.group if resource else ""
        self.name = name


class StatusError(ApiError):
    """An error answered with a Status made elsewhere: a webhook's refusal (its code, reason
    and details, as the webhook gave them), or a failure to call one (500 and its cause)."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code, self.reason, self.details = code, reason, details


class Refused(Exception):
    """A refused write: the error to answer, and the warnings to send with it (a webhook's,
    an unknown field's), as the real server sends warnings on a refusal too."""

    def __init__(self, error: ApiError, warnings: list[str]):
        super().__init__(error.message)
        self.error, self.warnings = error, warnings


class UnsupportedMediaType(ApiError):
    code, reason, retryable = 415, "UnsupportedMediaType", False


class MethodNotAllowed(ApiError):
    code, reason, retryable = 405, "MethodNotAllowed", False


class NotAcceptable(ApiError):
    code, reason, retryable = 406, "NotAcceptable", False


class Expired(ApiError):
    """410 with reason Expired: a watch's or a continue token's resourceVersion is too old."""

    code, reason, retryable = 410, "Expired", True


def not_found(resource: Resource, name: str) -> NotFound:
    return NotFound(f'{resource.qualified} "{name}" not found')


def already_exists(resource: Resource, name: str) -> AlreadyExists:
    return AlreadyExists(f'{resource.qualified} "{name}" already exists')


def conflict(resource: Resource, name: str) -> Conflict:
    return Conflict(
        f'Operation cannot be fulfilled on {resource.qualified} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def failure(error: ApiError, resource: Resource | None = None, name: str | None = None) -> dict[str, Any]:
    """The Status for `error`, about `name` of `resource` when known."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": error.message,
        "reason": error.reason,
        "code": error.code,
    }
    if not error.reason:
        del body["reason"]  # a webhook's Status may have none
    details: dict[str, Any] = {}
    if isinstance(error, StatusError):
        details = dict(error.details or {})
    elif isinstance(error, InvalidObject):
        details = {"name": error.name, "kind": error.kind_name}
        if error.group:
            details["group"] = error.group
        details["causes"] = [{"reason": c.reason, "message": c.message, "field": c.field} for c in error.causes]
    elif resource is not None:
        details = {"kind": resource.plural}
        if resource.group:
            details["group"] = resource.group
        if name:
            details["name"] = name
    if error.retry_after is not None:
        details["retryAfterSeconds"] = int(error.retry_after)
    if details:
        body["details"] = details
    return body


def success(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """What a delete of a custom resource answers once the object is gone."""
    meta = obj.get("metadata") or {}
    details = {"name": meta.get("name", ""), "group": resource.group, "kind": resource.plural, "uid": meta.get("uid", "")}
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


def gone_event(message: str) -> dict[str, Any]:
    """The ERROR event a watch sends when asked to start before the history it keeps."""
    return {"type": "ERROR", "object": failure(Expired(message))}
