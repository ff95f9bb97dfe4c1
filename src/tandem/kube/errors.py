"""The client's errors as tandem's (`tandem.errors`), so the controller can tell a retryable
failure (409 Conflict, 429, 5xx, a time-out, no connection) from a terminal one (403, 404,
409 AlreadyExists, 422) without knowing which client or world it talks to.

A 409 is told apart by the `reason` of the Status the server sends (`AlreadyExists` or
`Conflict`); the wait a server asks for comes from `Retry-After` (seconds or an HTTP
date), else from the Status's `details.retryAfterSeconds`. Callers chain the client's
error: `raise translate(exc) from exc`.
"""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any, Mapping

import httpx2
from lightkube.core.exceptions import ApiError as LightkubeApiError

from tandem.errors import ApiError, api_error


def translate(exc: BaseException) -> ApiError:
    """tandem's error for anything the HTTP client (or lightkube's `Client`) raised."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, LightkubeApiError):
        status = exc.status
        response = getattr(exc, "response", None)
        code = int(status.code or (response.status_code if response is not None else 500))
        details = status.details.to_dict() if status.details is not None else {}
        headers = response.headers if response is not None else {}
        return _error(code, status.reason or "", status.message or "", headers, details)
    if isinstance(exc, httpx2.HTTPStatusError):
        return from_response(exc.response)
    if isinstance(exc, httpx2.TimeoutException):
        return api_error(504, f"the API server did not answer in time ({type(exc).__name__}: {exc})", "Timeout")
    if isinstance(exc, httpx2.TransportError):
        return api_error(503, f"cannot reach the API server ({type(exc).__name__}: {exc})", "ServiceUnavailable")
    return api_error(500, f"{type(exc).__name__}: {exc}", "InternalError")


def from_response(response: httpx2.Response) -> ApiError:
    """The error an HTTP answer of 400 or more carries (a `Status` object, or any text)."""
    status = _status_body(response)
    code = int(status.get("code") or response.status_code)
    message = str(status.get("message") or "") or response.text.strip()[:500] or f"HTTP {response.status_code}"
    return _error(code, str(status.get("reason") or ""), message, response.headers, status.get("details") or {})


def status_error(status: Mapping[str, Any]) -> ApiError:
    """The error in a watch's ERROR event (a `Status` object; 410 when the version expired)."""
    return _error(int(status.get("code") or 500), str(status.get("reason") or ""), str(status.get("message") or ""), {}, status.get("details") or {})


def retry_after(headers: Mapping[str, str], details: Mapping[str, Any] | None = None, now: float | None = None) -> float | None:
    """Seconds to wait, from `Retry-After` (delta-seconds or an HTTP date) or the Status details."""
    value = headers.get("retry-after") or headers.get("Retry-After")
    if value:
        value = value.strip()
        try:
            return max(float(value), 0.0)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                when = None
            if when is not None:
                return max(when.timestamp() - (time.time() if now is None else now), 0.0)
    seconds = (details or {}).get("retryAfterSeconds")
    return float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds > 0 else None


def _error(code: int, reason: str, message: str, headers: Mapping[str, str], details: Mapping[str, Any]) -> ApiError:
    wait = retry_after(headers, details) if code in (429, 503) or "retryAfterSeconds" in details else None
    error = api_error(code, message or f"HTTP {code} {reason}".strip(), reason, wait)
    if error.retry_after is None and wait is not None:
        error.retry_after = wait  # api_error drops it for an AlreadyExists; keep it anywhere else
    return error


def _status_body(response: httpx2.Response) -> dict[str, Any]:
    try:
        body = json.loads(response.content or b"null")
    except ValueError:
        return {}
    return body if isinstance(body, dict) and body.get("kind", "Status") == "Status" else {}
