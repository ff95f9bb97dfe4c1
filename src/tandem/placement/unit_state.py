"""Each unit's working state while a plan is made: its roles' shapes as vectors, the
nodes they may use, what is placed so far, and its outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Mapping, NamedTuple

import numpy as np

from tandem.placement.demand import Admission, PodShape, PodShapeKey, RoleDemand, UnitDemand
from tandem.placement.plan import PodAssignment, ReplicaAssignment, UnitPlacement
from tandem.topology import ClusterSnapshot, TopologyView


class RoleShape(NamedTuple):
    """A RoleState's fields that follow from the role's shape alone (`_role_shape`)."""

    leader: np.ndarray
    worker: np.ndarray
    leader_ok: np.ndarray
    worker_ok: np.ndarray
    missing: list[str]
    required_depth: int | None
    preferred_depth: int | None
    replica_total: np.ndarray
    same_shape: bool


@dataclass
class ShapeCache:
    """What follows from pod and role shapes, made once per shape and shared by the units
    of one `place` (none of it is written to): units of one group ask the same, and one
    array per shape lets ties (`ties.py`) tell shapes apart without comparing arrays."""

    masks: dict[tuple[TopologyView, Admission], np.ndarray] = field(default_factory=dict)  # nodes a pod shape may use
    roles: dict[tuple[TopologyView, PodShapeKey, PodShapeKey, int, str | None, str | None], RoleShape] = field(default_factory=dict)
    # Nodes some pod of a unit may use, by the admission of its roles' pods
    unions: dict[tuple[TopologyView, tuple[tuple[Admission, Admission | None, bool], ...]], np.ndarray] = field(default_factory=dict)


# What `UnitState.release` returns for `restore`: replicas per role, the two domains.
Saved = tuple[list[list[list[int]]], tuple[int, int] | None, tuple[int, int] | None]


@dataclass
class RoleState:
    """A role of a unit, with its shapes as resource vectors and its eligible nodes."""

    index: int
    demand: RoleDemand
    leader: np.ndarray
    worker: np.ndarray
    leader_ok: np.ndarray  # [nodes] bool
    worker_ok: np.ndarray
    missing: list[str]  # requested resources no node offers
    required_depth: int | None
    preferred_depth: int | None
    replica_total: np.ndarray  # all pods of one replica
    same_shape: bool
    placed: list[list[int]] = field(default_factory=list)  # node per pod, per replica; existing first
    existing_ids: list[int] = field(default_factory=list)  # replica indices of the first len() entries
    leaving: set[int] = field(default_factory=set)  # positions in `placed` of existing replicas a rolling update replaces
    blocked: str | None = None  # why no further extra fits

    @property
    def existing(self) -> int:
        """How many of `placed` were running before this plan (never moved, never trimmed)."""
        return len(self.existing_ids)

    def replica_ids(self) -> list[int]:
        """Index of each placed replica: existing ones keep theirs, new ones take the next free."""
        taken = set(self.existing_ids)
        ids = list(self.existing_ids)
        candidate = 0
        while len(ids) < len(self.placed):
            if candidate not in taken:
                ids.append(candidate)
            candidate += 1
        return ids

    @property
    def pods(self) -> int:
        return self.demand.pods_per_replica


@dataclass
class Rule:
    """An affinity rule with roles as indices and the level as a depth."""

    source: int  # role index of `from`
    target: int  # role index of `to`
    depth: int
    required: bool


@dataclass
class UnitState:
    """One unit while it is being placed: its roles, rules, chosen domain and outcome."""

    order: int
    demand: UnitDemand
    view: TopologyView
    roles: list[RoleState]
    rules: list[Rule]
    required_depth: int
    preferred_depth: int | None
    exclusive_depth: int | None
    dominant: int  # resource index the unit needs most of, relative to the cluster
    eligible: np.ndarray  # [nodes] bool: some pod of the unit may go there (usable, selectors, taints)
    allowed: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # [nodes] bool: open to it now
    functional: bool = False
    failure: str | None = None
    unresolvable: bool = False
    domain: tuple[int, int] | None = None  # (depth, id) at the required level
    preferred_domain: tuple[int, int] | None = None  # (depth, id) if packed at a narrower level
    capped: str | None = None  # why extras stopped short of the desired counts

    @classmethod
    def prepare(
        cls,
        order: int,
        unit: UnitDemand,
        view: TopologyView,
        snapshot: ClusterSnapshot,
        totals: np.ndarray,
        shapes: ShapeCache | None = None,
    ) -> "UnitState":
        """`shapes` caches what follows from the units' shapes across the units of one
        `place` (its eligible nodes, `_role_shape`)."""
        shapes = ShapeCache() if shapes is None else shapes
        roles = [RoleState(index, demand, *_role_shape(demand, view, snapshot, shapes)) for index, demand in enumerate(unit.roles)]
        by_name = {role.demand.name: role.index for role in roles}
        for replica in sorted(unit.existing, key=lambda rep: (rep.role, rep.index)):
            nodes = [snapshot.node_index.get(name) for name in replica.nodes]
            if replica.role in by_name and nodes and None not in nodes:
                role = roles[by_name[replica.role]]
                if replica.leaving:
                    role.leaving.add(len(role.placed))
                role.placed.append([int(n) for n in nodes if n is not None])
                role.existing_ids.append(replica.index)
        rules = [Rule(by_name[a.from_role], by_name[a.to_role], view.depth(a.level), a.required) for a in unit.affinity]
        gang = sum((max(role.demand.minimum, 1) * role.replica_total for role in roles), np.zeros_like(totals))
        share = np.where(totals > 0, gang / np.maximum(totals, 1), 0.0)
        pods_index = snapshot.resource_index.get("pods", -1)
        if share.size > 1 and pods_index >= 0:
            without_pods = share.copy()
            without_pods[pods_index] = -1.0
            dominant = int(np.argmax(without_pods)) if without_pods.max() > 0 else pods_index
        else:
            dominant = int(np.argmax(share))
        required_depth = view.depth(unit.pack_required)
        preferred_depth = None if unit.pack_preferred is None else view.depth(unit.pack_preferred)
        # Units of one shape share one union (never written to, like the masks it joins):
        # an array per unit would hold units × nodes bytes while a plan of thousands runs.
        union_key = (view, tuple((role.demand.leader.key(), role.demand.worker.key() if role.pods > 1 else None, bool(role.missing)) for role in roles))
        eligible = shapes.unions.get(union_key)
        if eligible is None:
            eligible = np.zeros(len(snapshot.node_names), dtype=bool)
            for role in roles:
                eligible |= role.leader_ok | (role.worker_ok if role.pods > 1 else False)
            shapes.unions[union_key] = eligible
        exclusive_depth = None if unit.exclusive is None else view.depth(unit.exclusive)
        state = cls(order, unit, view, roles, rules, required_depth, preferred_depth, exclusive_depth, dominant, eligible)
        state.allowed = eligible
        state.settle_existing()
        return state

    def settle_existing(self) -> None:
        """A unit that already runs replicas lives where they are: fix its domains."""
        nodes = [n for role in self.roles for replica in role.placed[: role.existing] for n in replica]
        if not nodes:
            return
        self.domain = (self.required_depth, self.view.node_domain(nodes[0], self.required_depth))
        if self.preferred_depth is not None:
            preferred = {self.view.node_domain(n, self.preferred_depth) for n in nodes}
            if len(preferred) == 1:
                self.preferred_domain = (self.preferred_depth, preferred.pop())

    @cached_property
    def whole_demand(self) -> np.ndarray:
        """Resources of the whole unit: every role at the count it is heading to."""
        return sum((role.demand.heading_to * role.replica_total for role in self.roles), np.zeros_like(self.roles[0].leader))

    @cached_property
    def asked_columns(self) -> np.ndarray:
        """Resource indices the unit requests, the only ones its counts sum; once per
        unit, as every count of the unit asks (read-only, as it is shared)."""
        asked = sum((role.replica_total for role in self.roles), np.zeros(self.view.snapshot.allocatable.shape[1], np.int64))
        columns = np.flatnonzero(asked > 0)
        columns.flags.writeable = False
        return columns

    def minimum_needs(self) -> dict[int, int]:
        """Role index -> complete replicas the unit needs to be functional."""
        needs = {r: role.demand.minimum - role.existing for r, role in enumerate(self.roles)}
        return {r: n for r, n in needs.items() if n > 0}

    def release(self, free: np.ndarray | None) -> Saved:
        """Forget what this plan placed for the unit (existing replicas stay), giving its
        capacity back to `free`; returns what `restore` needs."""
        saved: Saved = ([list(role.placed) for role in self.roles], self.domain, self.preferred_domain)
        for role in self.roles:
            for replica in role.placed[role.existing :]:
                if free is not None:
                    for pod, node in enumerate(replica):
                        free[node] += role.leader if pod == 0 else role.worker
            role.placed = role.placed[: role.existing]
        self.domain = self.preferred_domain = None
        self.settle_existing()
        return saved

    def reopen(self) -> None:
        """Forget why extras stopped: room may have been freed since."""
        self.capped = None
        for role in self.roles:
            role.blocked = None

    def restore(self, saved: Saved) -> None:
        """Put back what `release` took (after a trial that was not kept)."""
        placements, self.domain, self.preferred_domain = saved
        for role, replicas in zip(self.roles, placements):
            role.placed = replicas

    # ------------------------------------------------------------------ results

    def nodes(self) -> list[int]:
        """Every node holding a pod of the unit in this plan (existing replicas included)."""
        return [n for role in self.roles for replica in role.placed for n in replica]

    def narrowest_domain(self) -> str | None:
        """`level/name` of the narrowest domain holding every placed pod, None without pods."""
        where = self.view.narrowest(np.array(self.nodes(), dtype=np.int64))
        return None if where is None else self.view.label(*where)

    def result(self) -> UnitPlacement:
        view = self.view
        names = view.snapshot.node_names
        roles = tuple(
            (
                role.demand.name,
                tuple(
                    sorted(
                        (
                            ReplicaAssignment(
                                index=r,
                                pods=tuple(
                                    PodAssignment(self.demand.pod_name(role.demand.name, r, p), names[node])
                                    for p, node in enumerate(nodes)
                                ),
                                existing=position < role.existing,
                            )
                            for position, (r, nodes) in enumerate(zip(role.replica_ids(), role.placed))
                        ),
                        key=lambda replica: replica.index,
                    )
                ),
            )
            for role in self.roles
        )
        domain = self.narrowest_domain()
        if not self.functional:
            code = "UnschedulableAndUnresolvable" if self.unresolvable else "Unschedulable"
            return UnitPlacement(self.demand, "Unschedulable", self.failure or "", roles, None, code)
        if all(len(role.placed) >= role.demand.desired for role in self.roles):
            return UnitPlacement(self.demand, "Placed", "", roles, domain)
        counts = ", ".join(f"{role.demand.name} {len(role.placed)}/{role.demand.desired}" for role in self.roles)
        return UnitPlacement(self.demand, "MinimumPlaced", f"placed {counts}; {self.capped or 'extras did not fit'}", roles, domain)


def _role_shape(demand: RoleDemand, view: TopologyView, snapshot: ClusterSnapshot, cache: ShapeCache) -> RoleShape:
    """RoleState's fields after `demand` that follow from the role's shape alone (vectors,
    eligible nodes, missing resources, pack depths), made once per shape in `cache`: the
    units of one group share them as they share their masks (none is written to), and a
    plan of a thousand units made them a thousand times over."""
    pods = demand.pods_per_replica
    key = (view, demand.leader.shape(), demand.worker.shape(), pods, demand.pack_required, demand.pack_preferred)
    if key in cache.roles:
        return cache.roles[key]

    def eligible(shape: PodShape) -> np.ndarray:
        mask_key = (view, shape.key())
        if mask_key not in cache.masks:
            cache.masks[mask_key] = snapshot.eligible(shape.node_selector, shape.tolerations) & view.usable
        return cache.masks[mask_key]

    leader = snapshot.vector(demand.leader.requests)
    worker = snapshot.vector(demand.worker.requests)
    leader_ok, worker_ok = eligible(demand.leader), eligible(demand.worker)
    missing = sorted(
        set(snapshot.missing_resources(demand.leader.requests)) | set(snapshot.missing_resources(demand.worker.requests) if pods > 1 else ())
    )
    if missing:
        # The vectors leave out resources no node offers; no node may take such a pod.
        leader_ok = worker_ok = np.zeros_like(leader_ok)
    cache.roles[key] = RoleShape(
        leader,
        worker,
        leader_ok,
        worker_ok,
        missing,
        None if demand.pack_required is None else view.depth(demand.pack_required),
        None if demand.pack_preferred is None else view.depth(demand.pack_preferred),
        leader + (pods - 1) * worker,  # replica_total
        # (Masks of one shape are one cached array: no need to compare nodes.)
        bool(np.array_equal(leader, worker) and (leader_ok is worker_ok or np.array_equal(leader_ok, worker_ok))),  # same_shape
    )
    return cache.roles[key]


def all_replicas(unit: UnitState, r: int, fresh: Mapping[int, list[list[int]]]) -> list[list[int]]:
    """Replicas of role `r` already committed plus those placed so far in the current gang."""
    return unit.roles[r].placed + list(fresh.get(r, []))


def staying_replicas(unit: UnitState, r: int, fresh: Mapping[int, list[list[int]]]) -> list[list[int]]:
    """`all_replicas` without those a rolling update replaces (`RoleState.leaving`): what a
    Required affinity may count on, since the others go."""
    role = unit.roles[r]
    if not role.leaving:
        return all_replicas(unit, r, fresh)
    return [rep for position, rep in enumerate(role.placed) if position not in role.leaving] + list(fresh.get(r, []))
