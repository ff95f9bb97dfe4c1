"""tandem's own error hierarchy.

Every error a user can cause is an `InputError`: it names where (file, document, field
path) and what, on one line. The CLI turns it into exit status 2; nothing else should
ever reach the user as a traceback.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def key_path(key: str) -> str:
    """A mapping key as a field-path step: `.name`, or `["nvidia.com/gpu"]` (quoted, escaped)
    for any key that is not plain, so a path stays one unambiguous line."""
    return f".{key}" if _PLAIN_KEY.match(key) else f"[{json.dumps(key)}]"


class TandemError(Exception):
    """Base of every error tandem raises on purpose."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input: where it is and what is wrong."""

    path: str
    message: str
    source: str = ""

    def __str__(self) -> str:
        where = ": ".join(part for part in (self.source, self.path) if part)
        return f"{where}: {self.message}" if where else self.message


class InputError(TandemError):
    """The input is invalid. Carries every problem found; `str()` is one line."""

    def __init__(self, problems: list[Problem] | Problem):
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        if not self.problems:
            raise ValueError("InputError needs at least one problem")
        first = str(self.problems[0])
        more = len(self.problems) - 1
        super().__init__(first + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""))


# ----------------------------------------------------------------------------- the API


class ApiError(TandemError):
    """An answer of the API server (or of the in-memory store that stands in for it).

    `code` is the HTTP status it carries. `retryable` says whether the same request may
    succeed later (a conflict, throttling, a server error, a time-out) or never will as
    sent (forbidden, invalid, not found): the controller retries the first kind on its
    next pass and reports the second. An adapter chains the client's own error as the
    cause (`raise Conflict(...) from exc`).
    """

    code = 500
    reason = "InternalError"
    retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after  # seconds the server asked us to wait (429, 503)


class BadRequest(ApiError):
    code, reason, retryable = 400, "BadRequest", False


class Unauthorized(ApiError):
    code, reason, retryable = 401, "Unauthorized", False


class Forbidden(ApiError):
    code, reason, retryable = 403, "Forbidden", False


class NotFound(ApiError):
    code, reason, retryable = 404, "NotFound", False


class Conflict(ApiError):
    """A stale resourceVersion or uid precondition: re-read and try again (409)."""

    code, reason, retryable = 409, "Conflict", True


class AlreadyExists(ApiError):
    """A create of a name that exists (409); repeating the create cannot succeed."""

    code, reason, retryable = 409, "AlreadyExists", False


class Gone(ApiError):
    """A watch asked for a resourceVersion older than the history kept (410): re-list."""

    code, reason, retryable = 410, "Gone", True


class Invalid(ApiError):
    """The server refused the object as invalid (422)."""

    code, reason, retryable = 422, "Invalid", False


class TooManyRequests(ApiError):
    code, reason, retryable = 429, "TooManyRequests", True


class InternalError(ApiError):
    code, reason, retryable = 500, "InternalError", True


class ServiceUnavailable(ApiError):
    code, reason, retryable = 503, "ServiceUnavailable", True


class ServerTimeout(ApiError):
    """The server, or the connection to it, timed out (504, or no answer at all)."""

    code, reason, retryable = 504, "Timeout", True


_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
    500: InternalError,
    503: ServiceUnavailable,
    504: ServerTimeout,
}


def api_error(code: int, message: str, reason: str = "", retry_after: float | None = None) -> ApiError:
    """The error for an HTTP status (and the Status `reason`, which tells 409s apart)."""
    if code == 409 and reason == "AlreadyExists":
        return AlreadyExists(message)
    kind = _BY_CODE.get(code)
    if kind is None:
        kind = InternalError if code >= 500 else BadRequest
    error = kind(message, retry_after=retry_after)
    if kind in (InternalError, BadRequest) and code not in _BY_CODE:
        error.code = code
    return error
