"""Admission of a ClusterTopology: the verdict both webhooks give (the group operator's and
the topology controller's), as a pure function of the review's objects and the groups.

- CREATE and UPDATE: exactly what `tandem validate` says of it (the model, with field
  paths, and `check_topology`). On UPDATE a problem the stored object already had is a
  warning, not a refusal (as Kubernetes ratchets CRD validation): a topology admitted
  before a rule existed can still get its finalizer removed, a label, or a fix.
- UPDATE also re-checks every group naming the topology (`spec.topologyName`) against the
  new levels: a change that breaks one (a level it packs on removed, renamed, or reordered
  under its preferred) is refused naming the group and its problem. What was already wrong
  with a group is not this change's doing and does not refuse it.
- DELETE: refused while any group names the topology, naming them (sorted; the first
  `USERS_LISTED`, the rest counted), since deleting it would strand them.
"""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import ValidationError

from tandem.api.loading import validation_problems
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.api.topology_status import USERS_LISTED
from tandem.api.validation import check_group, check_topology
from tandem.errors import Problem

DEFAULT_TOPOLOGY = "default"  # what a group's absent spec.topologyName means


def review_topology(
    operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None, groups: list[dict[str, Any]]
) -> tuple[list[Problem], list[str]]:
    """(problems refusing the request, warnings for an admitted one) for a ClusterTopology
    CREATE, UPDATE or DELETE; `groups` are every InferenceGroup, as stored."""
    if operation == "DELETE":
        return _review_delete(old or obj or {}, groups), []
    if operation not in ("CREATE", "UPDATE") or obj is None:
        return [], []
    typed, problems = _checked(obj)
    warnings: list[str] = []
    if operation == "UPDATE" and old is not None:
        old_typed, before = _checked(old)
        kept = [p for p in problems if p in before]
        problems = [p for p in problems if p not in before]
        warnings += [f"{p}; already so before this change: fix it" for p in kept]
        if typed is not None and not problems:
            problems += _broken_groups(typed, old_typed, groups)
    return problems, warnings


def users(name: str, groups: list[dict[str, Any]]) -> list[str]:
    """`namespace/name` of every group naming the topology `name`, sorted."""
    return sorted(_key(g) for g in groups if named_topology(g) == name)


def _checked(obj: dict[str, Any]) -> tuple[ClusterTopology | None, list[Problem]]:
    """The typed topology (None if it does not parse) and what `tandem validate` says of it."""
    try:
        typed = ClusterTopology.model_validate(obj)
    except ValidationError as exc:
        return None, validation_problems(obj, exc, "")
    return typed, check_topology(typed)


def _broken_groups(new: ClusterTopology, old: ClusterTopology | None, groups: list[dict[str, Any]]) -> list[Problem]:
    """A problem per group naming `new` that the change breaks: found against the new levels,
    not against the old ones (or, with no valid old topology, not without one)."""
    out: list[Problem] = []
    for raw in sorted((g for g in groups if named_topology(g) == new.metadata.name), key=_key):
        try:
            group = InferenceGroup.model_validate({k: v for k, v in raw.items() if k != "status"})
        except ValidationError:
            continue  # already invalid, whatever the topology: not this change's doing
        before = set(check_group(group, old))
        for problem in check_group(group, new):
            if problem not in before:
                out.append(Problem("spec.levels", f"InferenceGroup {_key(raw)} uses this topology and the change breaks it: {problem}"))
    return out


def _review_delete(old: dict[str, Any], groups: list[dict[str, Any]]) -> list[Problem]:
    name = str((old.get("metadata") or {}).get("name") or "")
    using = users(name, groups)
    if not using:
        return []
    named = ", ".join(using[:USERS_LISTED]) + (f" and {len(using) - USERS_LISTED} more" if len(using) > USERS_LISTED else "")
    return [
        Problem(
            "",
            f"ClusterTopology {name!r} is used by {len(using)} InferenceGroup(s): {named}; "
            "delete them or point their spec.topologyName elsewhere first",
        )
    ]


def named_topology(group: Mapping[str, Any]) -> str:
    """The ClusterTopology a raw InferenceGroup names: `spec.topologyName`, or `default`."""
    spec = group.get("spec")
    name = spec.get("topologyName") if isinstance(spec, dict) else None
    return name if isinstance(name, str) and name else DEFAULT_TOPOLOGY


def _key(group: dict[str, Any]) -> str:
    meta = group.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '?')}"
