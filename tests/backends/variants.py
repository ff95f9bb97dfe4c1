"""Groups for the backend tests: the nearest variant of a group a backend accepts, and one small
group per feature that relies on that feature (for the rejection tests)."""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

from support.builders import group, role
from tandem.api.loading import Inputs, load_texts
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.backends.base import Backend


def load(objects: list[dict[str, Any]]) -> Inputs:
    return load_texts([("test", "\n---\n".join(json.dumps(obj) for obj in objects))])


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
    _drop_unit_pack,
    _first_role_only,
)


def accepted_variant(raw: dict[str, Any], backend: Backend, topology: ClusterTopology | None) -> tuple[dict[str, Any], int]:
    """The group itself if `backend` accepts it, else the first relaxation it accepts, and how many
    relaxation steps that took. Fails when even the plainest variant is refused."""
    current = copy.deepcopy(raw)
    for steps in range(len(RELAX_STEPS) + 1):
        if steps:
            RELAX_STEPS[steps - 1](current)
        if not backend.validate(typed(current), topology):
            return current, steps
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
        "unit-pack-required": _pd(required="rack"),
        "unit-pack-preferred": group("up", [role("prefill", 2, 2, gpus=1)], preferred="rack"),
        "role-pack-required": group("rp", [role("decode", 1, 1, gpus=1, pods=2, required="host")], required="rack"),
        "role-pack-preferred": group("rq", [role("decode", 1, 1, gpus=1, pods=2, preferred="host")], required="rack"),
        "affinity-required": _pd(affinity=[{"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}]),
        "affinity-preferred": _pd(affinity=[{"from": "prefill", "to": "decode", "level": "rack", "mode": "Preferred"}]),
        "priority": group("pr", [role("prefill", 1, 1, gpus=1)], priority=7),
    }
    timeout = group("gt", [role("prefill", 1, 1, gpus=1)])
    timeout["spec"]["scheduler"] = {"gangTimeoutSeconds": 60}
    examples["gang-timeout"] = timeout
    coordinated = group("co", [role("prefill", 2, 2, gpus=1)])
    coordinated["spec"]["coordination"] = {"scaling": {"maxSkew": 1}}
    examples["coordination"] = coordinated
    return examples
