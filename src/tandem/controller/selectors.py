"""Kubernetes label selectors: `a=b,c!=d,e in (x,y),f notin (z),g,!h`, or a dict of equalities."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from tandem.controller.cluster import Invalid

_SET = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "=":
            return present and value in self.values
        if self.operator == "!=":
            return not present or value not in self.values
        if self.operator == "in":
            return present and value in self.values
        if self.operator == "notin":
            return not present or value not in self.values
        if self.operator == "exists":
            return present
        return not present


def parse(selector: str | Mapping[str, str] | None) -> tuple[Requirement, ...]:
    """Requirements of a selector; raises Invalid on bad syntax."""
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
            raise Invalid(f"unable to parse requirement {part.strip()!r} in label selector {selector!r}")
    return tuple(requirements)


def matches(selector: str | Mapping[str, str] | None, labels: Mapping[str, str]) -> bool:
    return all(r.matches(labels) for r in parse(selector))


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, []
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
