"""Counts no cluster could hold: refused before a unit or replica is built for them.

`spec.replicas` and a role's `replicas` may be up to 2,147,483,647, and planning builds a
unit demand per unit and tries a replica at a time; a count far beyond what the nodes
could hold even if they were empty would cost memory and time for nothing but a list of
`Unschedulable` lines. A count more than `MARGIN` beyond the most the cluster's total
allocatable could ever hold is therefore an input error naming the field, the most that
could fit and the resource that bounds it. The bound is a count, not a placement: it
ignores topology and fragmentation, so it never refuses a count that could fit.
"""

from __future__ import annotations

import numpy as np

from tandem.api.resources import InferenceGroup
from tandem.errors import Problem
from tandem.placement.demand import PodShape
from tandem.topology.snapshot import ClusterSnapshot

MARGIN = 1000  # counts this far beyond the bound are still planned (and reported Unschedulable)


def beyond_capacity(group: InferenceGroup, snapshot: ClusterSnapshot, prefix: str = "") -> list[Problem]:
    """One problem per count (`spec.replicas`, a role's `replicas`) more than MARGIN beyond what fits."""
    totals = snapshot.allocatable.sum(axis=0)
    problems = []
    per_replica = []
    for i, role in enumerate(group.spec.roles):
        shapes = [PodShape.from_template(role.template if index == 0 else role.pod_template(1)) for index in range(role.pods_per_replica)]
        demand = sum((snapshot.vector(shape.requests) for shape in shapes), np.zeros(len(snapshot.resources), dtype=np.int64))
        per_replica.append(demand)
        missing = sorted({name for shape in shapes for name in snapshot.missing_resources(shape.requests)})
        most, resource = (0, missing[0]) if missing else _most(totals, demand, snapshot)
        if role.replicas > most + MARGIN:
            problems.append(_problem(f"{prefix}spec.roles[{i}].replicas", role.replicas, f"replicas of role {role.name}", most, resource))
    minimum = sum((role.minimum * demand for role, demand in zip(group.spec.roles, per_replica)), np.zeros(len(snapshot.resources), dtype=np.int64))
    if not minimum.any():  # a unit without a minimum holds at least one replica of its smallest role to be of use
        minimum = min(per_replica, key=lambda d: int(d.sum()))
    most, resource = _most(totals, minimum, snapshot)
    if group.spec.replicas > most + MARGIN:
        problems.append(_problem(f"{prefix}spec.replicas", group.spec.replicas, "units", most, resource))
    return problems


def _most(totals: np.ndarray, demand: np.ndarray, snapshot: ClusterSnapshot) -> tuple[int, str]:
    """How many `demand`s the totals hold, and the resource that runs out first."""
    asked = np.nonzero(demand > 0)[0]
    if len(asked) == 0:
        return 2**63 - 1, ""
    counts = totals[asked] // demand[asked]
    first = int(np.argmin(counts))
    return int(counts[first]), snapshot.resources[asked[first]]


def _problem(path: str, asked: int, what: str, most: int, resource: str) -> Problem:
    return Problem(
        path,
        f"{asked:,} {what} could never fit: all the cluster's nodes together hold at most {most:,} ({resource}); "
        f"ask for at most {most + MARGIN:,}",
    )
