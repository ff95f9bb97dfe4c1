"""Stabilisation windows, as Kubernetes' HPA applies them (behavior.stabilizationWindowSeconds).

Every decision records its recommendation. Scaling up goes only as far as the LOWEST
recommendation within the scale-up window, scaling down only as far as the HIGHEST
within the scale-down window, so a short dip or spike moves nothing:

    up   = min(recommendations of the last scaleUpSeconds, this one included)
    down = max(recommendations of the last scaleDownSeconds, this one included)
    desired = min(max(current, up), down)

With the defaults (up 0 s, down 300 s) scale-ups are immediate and a scale-down waits
until five minutes of recommendations all agree to it. Like the HPA, the first
decision records the current count as if it had been recommended, so a new group is
not scaled down before its window has passed.
"""

from __future__ import annotations

from typing import Iterable

from tandem.autoscaling.memory import Recommendation


def window(history: Iterable[Recommendation], key: str, now: float, seconds: float, newest: int) -> list[int]:
    """`key`'s recommendations newer than `seconds` ago, and the newest one."""
    return [r.values[key] for r in history if key in r.values and r.at > now - seconds] + [newest]


def stabilize(history: Iterable[Recommendation], key: str, now: float, current: int, newest: int, up_seconds: float, down_seconds: float) -> int:
    """The HPA rule: move from `current` towards `newest` only as far as both windows allow."""
    history = list(history)
    up = min(window(history, key, now, up_seconds, newest))
    down = max(window(history, key, now, down_seconds, newest))
    return min(max(current, up), down)


def prune(history: Iterable[Recommendation], now: float, seconds: float) -> tuple[Recommendation, ...]:
    """Only what a window of `seconds` can still see."""
    return tuple(r for r in history if r.at > now - seconds)
