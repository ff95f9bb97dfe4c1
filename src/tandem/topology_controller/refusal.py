"""A write the API refused for good, as a pass remembers it (see `refusal_gate.py`)."""

from __future__ import annotations

from dataclasses import dataclass

RefusalTarget = tuple[str, str, str]  # (verb, kind, name): at most one write of each per pass


@dataclass(frozen=True)
class Refusal:
    """One write the API refused: whose, what, the API's answer, and when it last refused it."""

    topology: str  # the ClusterTopology the write was for ("" : one whose topology is gone)
    action: str  # e.g. "create HyperNode default-rack-r1"
    code: int
    reason: str
    message: str
    target: RefusalTarget
    key: str  # what makes it this write (`write_key`)
    at: float  # when the API last refused it
    new: bool = True  # learnt by the last pass: not yet told by an event when the status cannot tell it

    def __str__(self) -> str:
        return f"{self.action}: {self.code} {self.reason}: {self.message}"

    @property
    def words(self) -> tuple[str, int, str, str]:
        return (self.action, self.code, self.reason, self.message)
