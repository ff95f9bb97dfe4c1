"""A Reader of one InferenceGroup and its pods, for the metrics sources' tests: the group as
given, its pods from wherever the test keeps them (`pods`)."""

from __future__ import annotations

from typing import Any

from tandem.errors import NotFound


class OneGroup:
    def __init__(self, namespace: str, name: str, roles: list[str]):
        self.name = name
        self.group: dict[str, Any] | None = {"metadata": {"name": name, "namespace": namespace}, "spec": {"roles": [{"name": r} for r in roles]}}

    def __call__(self) -> "OneGroup":
        return self  # the snapshot callable and the Reader it gives, at once

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        if kind != "InferenceGroup" or self.group is None or name != self.name:
            raise NotFound(f"{kind} {name} not found")
        return self.group

    def list(self, kind: str, namespace: str | None = None, labels: Any = None, fields: Any = None) -> list[dict[str, Any]]:
        assert kind == "Pod" and labels == {"tandem.dev/group": self.name}
        return self.pods(namespace)

    def pods(self, namespace: str | None) -> list[dict[str, Any]]:
        raise NotImplementedError


class HeldPods(OneGroup):
    """One group and a list of pods the test holds (and may change)."""

    def __init__(self, namespace: str, name: str, roles: list[str], pods: list[dict[str, Any]]):
        super().__init__(namespace, name, roles)
        self.held = pods

    def pods(self, namespace: str | None) -> list[dict[str, Any]]:
        return self.held
