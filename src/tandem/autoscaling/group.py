"""The explicit inputs of `scale`, read from an InferenceGroup that has `spec.autoscaling`.

Kept apart from the decision so that the decision sees numbers only, and callers (the
controller, the simulator, tests) all derive them the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from tandem.api.autoscaling import gpus_per_replica
from tandem.api.resources import InferenceGroup


@dataclass(frozen=True)
class GroupInputs:
    bounds: Mapping[str, tuple[int, int]]  # per unit, by managed role
    gpus_per_replica: Mapping[str, int]  # whole GPUs of one complete replica, by managed role
    current: Mapping[str, int]  # spec.roles[].replicas, by managed role
    units: int  # spec.replicas


def group_inputs(group: InferenceGroup) -> GroupInputs:
    """Bounds default their minimum to the role's own minReplicas (validation keeps them
    at or above it); the group must have passed validation."""
    spec = group.spec.autoscaling
    if spec is None:
        raise ValueError(f"{group.metadata.namespace}/{group.metadata.name} has no spec.autoscaling")
    bounds: dict[str, tuple[int, int]] = {}
    gpus: dict[str, int] = {}
    current: dict[str, int] = {}
    for name in spec.managed_roles:
        role = group.role(name)
        limits = spec.roles[name]
        bounds[name] = (limits.minimum_for(role), limits.max_replicas)
        gpus[name] = gpus_per_replica(role)
        current[name] = role.replicas
    return GroupInputs(bounds, gpus, current, group.spec.replicas)
