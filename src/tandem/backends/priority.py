"""`spec.priority` for other schedulers: a PriorityClass per value, named after it.

Every scheduler here orders by a PriorityClass (pods' `priorityClassName`, copied onto
their PodGroups), not by a bare integer. One class per value, named `tandem-priority-N`,
is shared by every group with that value; applying it again is a no-op.
"""

from __future__ import annotations

from typing import Any

from tandem.api.resources import InferenceGroup
from tandem.errors import Problem

# Kubernetes reserves larger values for system-node-critical and system-cluster-critical.
HIGHEST_USER_PRIORITY = 1_000_000_000


def priority_class_name(priority: int) -> str | None:
    """None for 0 (no class: the scheduler's default); `tandem-priority-10`, `tandem-priority-minus-5`."""
    if priority == 0:
        return None
    return f"tandem-priority-{priority}" if priority > 0 else f"tandem-priority-minus-{-priority}"


def priority_class_field(priority: int) -> dict[str, str]:
    """`priorityClassName` for a scheduler's group object (PodGroup, pod group), or nothing for 0."""
    name = priority_class_name(priority)
    return {"priorityClassName": name} if name else {}


def priority_class(priority: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": priority_class_name(priority), "labels": {"app.kubernetes.io/managed-by": "tandem"}},
        "value": priority,
        "globalDefault": False,
        "description": f"spec.priority {priority} of tandem InferenceGroups",
    }


def priority_problems(group: InferenceGroup, backend: str) -> list[Problem]:
    if group.spec.priority <= HIGHEST_USER_PRIORITY:
        return []
    return [
        Problem(
            "spec.priority",
            f"must be <= {HIGHEST_USER_PRIORITY} for backend {backend!r}: it becomes a PriorityClass value, "
            "and larger ones are reserved for system classes",
        )
    ]
