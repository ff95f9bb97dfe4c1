"""Two baselines, built from what today's schedulers document, to measure the engine against.

Both have the signature of `tandem.placement.place(snapshot, views, units)` and return a
`Plan`, and both reuse the engine for the one thing they share with it (placing a single
gang in a topology domain), so a difference in the results comes from how roles are
coupled, not from a different bin-packing heuristic.

- `independent`: the Kubernetes Workload API (KEP-4671) today. Each role of a unit is a
  PodGroup with its own gang (`minCount`), its own topology constraint and no link to
  the unit's other roles: no unit gang, no cross-role affinity.
- `sequential`: Kueue topology-aware scheduling. A workload's pod sets are placed one
  after another, each with its own best-fit topology assignment (no joint prefill/decode
  choice, no affinity); the workload is admitted all-or-nothing, and partial admission
  lowers the pod sets' counts towards their minimums when the desired counts do not fit.

Both see the pods that exist, as those schedulers do: a role's count is what has been
created and admitted (`RoleDemand.desired`), never the count a stepped rollout is still
heading to (`RoleDemand.eventual`). Planning a unit's domain for its eventual size is
tandem's, because only the owner of the whole group knows it; docs/controller.md says
what that is worth in the demo.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

import numpy as np

from tandem.placement import Plan, UnitDemand, UnitPlacement, place
from tandem.placement.plan import ReplicaAssignment, State
from tandem.topology import ClusterSnapshot, TopologyView


def independent(snapshot: ClusterSnapshot, views: Mapping[str, TopologyView], units: Sequence[UnitDemand]) -> Plan:
    """Every (unit, role) as its own gang; recombined per unit afterwards.

    All role gangs are handed to the engine at once, in the units' order, so they get
    the same minimums-before-extras treatment as units do. A unit is `Placed` or
    `MinimumPlaced` only if every role gang got its minimum; otherwise it is
    `Unschedulable` **but keeps the pods its successful role gangs got**: nothing ties
    the gangs together, so they hold GPUs for a unit that cannot serve. That is the
    failure mode this baseline exists to show; an `Unschedulable` unit here may hold pods.
    """
    gangs = [replace(unit, roles=(replace(role, eventual=0),), affinity=()) for unit in units for role in unit.roles]
    parts = iter(place(snapshot, views, gangs).units)
    out = []
    for unit in units:
        pieces = [next(parts) for _ in unit.roles]
        roles = tuple(piece.roles[0] for piece in pieces)
        domains = _split(views[unit.topology], unit, [reps for _, reps in roles])
        missing = [piece for piece in pieces if piece.state == "Unschedulable"]
        if missing:
            held = [f"{name} {len(reps)}" for name, reps in roles if reps]
            message = "; ".join(f"{p.roles[0][0]}: {p.message}" for p in missing)
            if held:
                message += f"; still holding {', '.join(held)} replica(s) (independent role gangs)"
            out.append(UnitPlacement(unit, "Unschedulable", message, roles, None))
            continue
        state: State = "Placed" if all(piece.state == "Placed" for piece in pieces) else "MinimumPlaced"
        notes = [p.message for p in pieces if p.message]
        if len(domains) > 1:
            notes.append(f"roles split over {', '.join(domains)}")
        out.append(UnitPlacement(unit, state, "; ".join(notes), roles, _narrowest(views[unit.topology], roles)))
    return Plan(tuple(out))


def _pod_nodes(view: TopologyView, replicas: Sequence[Sequence[ReplicaAssignment]]) -> np.ndarray:
    index = view.snapshot.node_index
    return np.array([index[pod.node] for reps in replicas for rep in reps for pod in rep.pods], dtype=np.int64)


def _split(view: TopologyView, unit: UnitDemand, replicas: Sequence[Sequence[ReplicaAssignment]]) -> list[str]:
    """The domains of the unit's required level that its pods occupy, as `level/name`."""
    depth = view.depth(unit.pack_required)
    return [view.label(depth, int(d)) for d in np.unique(view.dom[depth][_pod_nodes(view, replicas)])]


def _narrowest(view: TopologyView, roles: Sequence[tuple[str, Sequence[ReplicaAssignment]]]) -> str | None:
    where = view.narrowest(_pod_nodes(view, [reps for _, reps in roles]))
    return None if where is None else view.label(*where)


def sequential(snapshot: ClusterSnapshot, views: Mapping[str, TopologyView], units: Sequence[UnitDemand]) -> Plan:
    """Units in order; in each, the roles one after another, each with its own best fit.

    Each role is a single-role gang placed by the engine on what earlier roles and units
    left, with the unit's and the role's packs and no affinity: every role gets its own
    best-fit domain. If a role does not fit, the whole unit is retried with lower counts,
    as Kueue's partial admission does: every role with room between its minimum and its
    desired count is reduced in proportion, step by step, down to the minimums (Kueue
    binary-searches that reduction; counts here are small, so steps go in order). If
    even the minimums do not fit, the unit holds nothing. No extras are added later:
    Kueue admits a workload at a fixed count.
    """
    free = snapshot.free.copy()
    out = []
    for unit in units:
        placed, failure = None, ""
        for counts in _reductions(unit):
            placed, why = _sequential_unit(snapshot, views, unit, counts, free)
            failure = failure or why
            if placed is not None:
                break
        if placed is None:
            empty = tuple((role.name, ()) for role in unit.roles)
            out.append(UnitPlacement(unit, "Unschedulable", failure + " (not admitted, even at the minimums)", empty, None))
            continue
        roles, free = placed
        got = dict(roles)
        full = all(len(got[r.name]) >= r.desired for r in unit.roles)
        distinct = _split(views[unit.topology], unit, [reps for _, reps in roles])
        notes = [] if full else ["partial admission: " + ", ".join(f"{r.name} {len(got[r.name])}/{r.desired}" for r in unit.roles)]
        if len(distinct) > 1:
            notes.append(f"roles split over {', '.join(distinct)}")
        state: State = "Placed" if full else "MinimumPlaced"
        out.append(UnitPlacement(unit, state, "; ".join(notes), tuple(roles), _narrowest(views[unit.topology], roles)))
    return Plan(tuple(out))


def _reductions(unit: UnitDemand) -> list[tuple[int, ...]]:
    """Replica counts to try, desired first, minimums last, reduced in proportion."""
    steps = max((role.desired - role.minimum for role in unit.roles), default=0)
    out: list[tuple[int, ...]] = []
    for step in range(steps + 1):
        counts = tuple(role.desired - -(-(role.desired - role.minimum) * step // steps) if steps else role.desired for role in unit.roles)
        if counts not in out:
            out.append(counts)
    return out


def _sequential_unit(
    snapshot: ClusterSnapshot,
    views: Mapping[str, TopologyView],
    unit: UnitDemand,
    counts: Sequence[int],
    free: np.ndarray,
) -> tuple[tuple[list[tuple[str, tuple[ReplicaAssignment, ...]]], np.ndarray] | None, str]:
    """((roles, free left), "") when every role fits at `counts`, else (None, why)."""
    index = views[unit.topology].snapshot.node_index
    trial = free.copy()
    roles: list[tuple[str, tuple[ReplicaAssignment, ...]]] = []
    for role, count in zip(unit.roles, counts):
        if count == 0:
            roles.append((role.name, ()))
            continue
        single = replace(unit, roles=(replace(role, desired=count, minimum=count, eventual=0),), affinity=())
        working = replace(snapshot, used=snapshot.allocatable - trial)
        got = place(working, views, [single], extras=False).units[0]
        if got.state == "Unschedulable":
            return None, f"{role.name}: {got.message}"
        leader, worker = snapshot.vector(role.leader.requests), snapshot.vector(role.worker.requests)
        for rep in got.roles[0][1]:
            for i, pod in enumerate(rep.pods):
                trial[index[pod.node]] -= leader if i == 0 else worker
        roles.append((role.name, got.roles[0][1]))
    return (roles, trial), ""
