"""Kubernetes label selectors (`a=b,c!=d,e in (x,y),f notin (z),g,!h`) and field
selectors (`spec.nodeName=n-1,status.phase!=Failed`), as text or a dict of equalities."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from tandem.errors import BadRequest

_SET = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*$")
_FIELD = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*([^,]*?)\s*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator in ("=", "in"):
            return present and value in self.values
        if self.operator in ("!=", "notin"):
            return not present or value not in self.values
        if self.operator == "exists":
            return present
        return not present


def parse(selector: str | Mapping[str, str] | None) -> tuple[Requirement, ...]:
    """Requirements of a label selector; raises BadRequest on bad syntax, as the API does."""
    if selector is None:
        return ()
    if not isinstance(selector, str):
        return tuple(Requirement(k, "=", frozenset({v})) for k, v in sorted(selector.items()))
    requirements = []
    for part in _split(selector):
        if not part.strip():
            continue
        if m := _SET.match(part):
            values = frozenset(v.strip() for v in m[3].split(",") if v.strip())
            requirements.append(Requirement(m[1], m[2], values))
        elif m := _EQ.match(part):
            requirements.append(Requirement(m[1], "!=" if m[2] == "!=" else "=", frozenset({m[3]})))
        elif m := _EXISTS.match(part):
            requirements.append(Requirement(m[2], "!exists" if m[1] else "exists"))
        else:
            raise BadRequest(f"unable to parse requirement {part.strip()!r} in label selector {selector!r}")
    return tuple(requirements)


def matches(selector: str | Mapping[str, str] | None, labels: Mapping[str, str]) -> bool:
    return all(r.matches(labels) for r in parse(selector))


def parse_fields(selector: str | Mapping[str, str] | None) -> tuple[Requirement, ...]:
    """Requirements of a field selector: `=`, `==` and `!=` on dotted paths, comma-separated."""
    if selector is None:
        return ()
    if not isinstance(selector, str):
        return tuple(Requirement(k, "=", frozenset({v})) for k, v in sorted(selector.items()))
    requirements = []
    for part in selector.split(","):
        if not part.strip():
            continue
        m = _FIELD.match(part)
        if not m:
            raise BadRequest(f"unable to parse requirement {part.strip()!r} in field selector {selector!r}")
        requirements.append(Requirement(m[1], "!=" if m[2] == "!=" else "=", frozenset({m[3]})))
    return tuple(requirements)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """A field's value as a field selector compares it; an absent field is the empty string."""
    value: Any = obj
    for step in path.split("."):
        value = value.get(step) if isinstance(value, Mapping) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def matches_fields(requirements: tuple[Requirement, ...], obj: Mapping[str, Any]) -> bool:
    return all(r.matches({r.key: field_value(obj, r.key)}) for r in requirements)


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts
