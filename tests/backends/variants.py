"""Groups for the backend tests: the nearest variant of a group a backend accepts, and one small
group per feature that relies on that feature (for the rejection tests)."""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

from support.builders import group, load, role
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.backends.base import Backend


def typed(raw: dict[str, Any]) -> InferenceGroup:
    return load([raw]).groups[0]


# ----------------------------------------------------------------------------- relaxing


def _drop_affinity(raw: dict[str, Any]) -> None:
    raw["spec"].pop("affinity", None)


def _whole_roles(raw: dict[str, Any]) -> None:
    raw["spec"].pop("autoscaling", None)  # its bounds refer to the minimums changed here
    for r in raw["spec"]["roles"]:
        r["minReplicas"] = r.get("replicas", 1)


def _drop_role_packs(raw: dict[str, Any]) -> None:
    for r in raw["spec"]["roles"]:
        r.pop("topology", None)


def _one_role_with_minimum(raw: dict[str, Any]) -> None:
    raw["spec"].pop("autoscaling", None)
    kept = False
    for r in raw["spec"]["roles"]:
        if kept:
            r["minReplicas"] = 0
        elif r.get("replicas", 1) > 0 and r.get("minReplicas", 1) > 0:
            kept = True


def _drop_exclusive(raw: dict[str, Any]) -> None:
    raw["spec"].get("topology", {}).pop("exclusive", None)


def _drop_unit_pack(raw: dict[str, Any]) -> None:
    raw["spec"].pop("topology", None)


def _first_role_only(raw: dict[str, Any]) -> None:
    raw["spec"]["roles"] = raw["spec"]["roles"][:1]
    raw["spec"].pop("affinity", None)
    raw["spec"].pop("autoscaling", None)
    if "coordination" in raw["spec"]:
        raw["spec"]["coordination"].get("rollout", {}).pop("steps", None)


RELAX_STEPS: tuple[Callable[[dict[str, Any]], None], ...] = (
    _drop_affinity,
    _whole_roles,
    _drop_role_packs,
    _one_role_with_minimum,
    _drop_exclusive,
    _drop_unit_pack,
    _first_role_only,
)


def accepted_variant(raw: dict[str, Any], backend: Backend, topology: ClusterTopology | None) -> tuple[dict[str, Any], int]:
    """The group itself if `backend` accepts it, else the nearest relaxation it accepts, and how
    many relaxation steps that took. Steps are tried in order and kept only when they remove a
    problem, so a step one backend needs (one role with a minimum) does not strip a group
    another step alone would make acceptable (drop the unit pack); if that leaves problems,
    every step is applied. Fails when even the plainest variant is refused."""
    current = copy.deepcopy(raw)
    problems = backend.validate(typed(current), topology)
    kept = 0
    for step in RELAX_STEPS:
        if not problems:
            return current, kept
        candidate = copy.deepcopy(current)
        step(candidate)
        fewer = backend.validate(typed(candidate), topology)
        if len(fewer) < len(problems):
            current, problems, kept = candidate, fewer, kept + 1
    if not problems:
        return current, kept
    current = copy.deepcopy(raw)
    for step in RELAX_STEPS:
        step(current)
    if not backend.validate(typed(current), topology):
        return current, len(RELAX_STEPS)
    raise AssertionError(f"{backend.label} refuses even {json.dumps(current)}: {backend.validate(typed(current), topology)}")


# ----------------------------------------------------------------------------- one group per feature


def _pd(**extra: Any) -> dict[str, Any]:
    """Prefill and decode, one single-pod replica each, both needed."""
    return group("pd", [role("prefill", 1, 1, gpus=1), role("decode", 1, 1, gpus=1)], **extra)


def feature_examples() -> dict[str, dict[str, Any]]:
    """A group relying on each feature, otherwise as plain as the feature allows."""
    examples = {
        "replica-gang": group("rg", [role("decode", 2, 0, gpus=1, pods=2)]),
        "complete-replica-minimum": group("cm", [role("decode", 2, 1, gpus=1, pods=2)]),
        "unit-gang": _pd(),
        "role-minimums": group("rm", [role("prefill", 3, 1, gpus=1)]),
        "minimums-before-extras": group("mx", [role("prefill", 3, 1, gpus=1)]),
        # Two roles of several replicas each: Kueue cannot group them (a single pod beside a role it can).
        "unit-pack-required": group("pk", [role("prefill", 2, 2, gpus=1), role("decode", 2, 2, gpus=1)], required="rack"),
        "unit-pack-preferred": group("up", [role("prefill", 2, 2, gpus=1)], preferred="rack"),
        "role-pack-required": group("rp", [role("decode", 1, 1, gpus=1, pods=2, required="host")], required="rack"),
        "role-pack-preferred": group("rq", [role("decode", 1, 1, gpus=1, pods=2, preferred="host")], required="rack"),
        "affinity-required": _pd(affinity=[{"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}]),
        "affinity-preferred": _pd(affinity=[{"from": "prefill", "to": "decode", "level": "rack", "mode": "Preferred"}]),
        "priority": group("pr", [role("prefill", 1, 1, gpus=1)], priority=7),
    }
    exclusive = group("ex", [role("prefill", 1, 1, gpus=1)], required="rack")
    exclusive["spec"]["topology"]["exclusive"] = "rack"
    examples["exclusive"] = exclusive
    timeout = group("gt", [role("prefill", 1, 1, gpus=1)])
    timeout["spec"]["scheduler"] = {"gangTimeoutSeconds": 60}
    examples["gang-timeout"] = timeout
    coordinated = group("co", [role("prefill", 2, 2, gpus=1)])
    coordinated["spec"]["coordination"] = {"scaling": {"maxSkew": 1}}
    examples["coordination"] = coordinated
    return examples
