"""Times as the API server writes them: RFC 3339 text, in UTC, to the microsecond.

Controller time is seconds since the epoch (a float from the simulator's clock or the
wall clock, always passed in explicitly); everything stored in objects is RFC 3339, so a
`kubectl get -o yaml` reads naturally and no precision is lost at a real epoch.
"""

from __future__ import annotations

from datetime import datetime, timezone


def rfc3339(seconds: float) -> str:
    """Seconds since the epoch as RFC 3339 text (`1970-01-01T00:16:40Z`, `...:40.25Z`)."""
    text = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")
    return text.rstrip("0").rstrip(".") + "Z"


def seconds(timestamp: str | None) -> float:
    """RFC 3339 text back to seconds since the epoch (0 when absent)."""
    if not timestamp:
        return 0.0
    return datetime.fromisoformat(str(timestamp).replace("Z", "+00:00")).timestamp()


def optional_rfc3339(value: float | None) -> str | None:
    return None if value is None else rfc3339(value)


def optional_seconds(value: str | None) -> float | None:
    return None if value is None else seconds(value)
