"""What the autoscaler remembers between decisions, kept in the group's `status.autoscaling`.

Each role's recommendations within the longest stabilisation window, when each panic
ends (key "total" for the ratio-keeping policies, the role for Independent), and when
the desired counts last changed. `to_dict()` is JSON-safe with a fixed key
order, so the same state always serialises to the same bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class Recommendation:
    at: float  # seconds, in the caller's clock
    values: Mapping[str, int]  # recommended replicas per unit, by role


@dataclass(frozen=True)
class AutoscalerState:
    history: tuple[Recommendation, ...] = ()
    panic_until: Mapping[str, float] = field(default_factory=dict)
    last_change_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "history": [{"at": r.at, "values": {k: r.values[k] for k in sorted(r.values)}} for r in self.history],
            "panicUntil": {k: self.panic_until[k] for k in sorted(self.panic_until)},
            "lastChangeAt": self.last_change_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "AutoscalerState":
        """The state `to_dict` wrote; None or {} is a fresh state. Raises ValueError on anything else."""
        if not data:
            return cls()
        if not isinstance(data, Mapping):
            raise ValueError(f"autoscaler state must be a mapping, got {type(data).__name__}")
        unknown = set(data) - {"history", "panicUntil", "lastChangeAt"}
        if unknown:
            raise ValueError(f"autoscaler state has unknown keys: {', '.join(sorted(unknown))}")
        history = []
        for index, entry in enumerate(data.get("history") or []):
            if not isinstance(entry, Mapping) or not isinstance(entry.get("values"), Mapping):
                raise ValueError(f"autoscaler state history[{index}] must be {{at, values}}")
            values = {str(k): _count(v, f"history[{index}].values.{k}") for k, v in entry["values"].items()}
            history.append(Recommendation(_time(entry.get("at"), f"history[{index}].at"), values))
        panic = data.get("panicUntil") or {}
        if not isinstance(panic, Mapping):
            raise ValueError("autoscaler state panicUntil must be a mapping")
        last = data.get("lastChangeAt")
        return cls(
            history=tuple(history),
            panic_until={str(k): _time(v, f"panicUntil.{k}") for k, v in panic.items()},
            last_change_at=None if last is None else _time(last, "lastChangeAt"),
        )


def _time(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"autoscaler state {where} must be a finite number, got {value!r}")
    return float(value)


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"autoscaler state {where} must be a count, got {value!r}")
    return value
