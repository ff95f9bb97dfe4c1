"""Per-unit working state of one placement: shapes as vectors, eligible nodes, what is placed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from tandem.placement.demand import RoleDemand, UnitDemand
from tandem.placement.plan import PodAssignment, ReplicaAssignment, UnitPlacement
from tandem.topology import ClusterSnapshot, TopologyView


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
    placed: list[list[int]] = field(default_factory=list)  # node per pod, per replica
    blocked: str | None = None  # why no further extra fits

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
    dominant: int  # resource index the unit needs most of, relative to the cluster
    functional: bool = False
    failure: str | None = None
    unresolvable: bool = False
    domain: tuple[int, int] | None = None  # (depth, id) at the required level
    preferred_domain: tuple[int, int] | None = None  # (depth, id) if packed at a narrower level
    capped: str | None = None  # why extras stopped short of the desired counts

    @classmethod
    def prepare(
        cls, order: int, unit: UnitDemand, view: TopologyView, snapshot: ClusterSnapshot, totals: np.ndarray
    ) -> "UnitState":
        eligibility: dict[tuple, np.ndarray] = {}

        def eligible(shape) -> np.ndarray:
            key = shape.key()
            if key not in eligibility:
                eligibility[key] = snapshot.eligible(shape.node_selector, shape.tolerations) & view.usable
            return eligibility[key]

        roles = []
        for index, demand in enumerate(unit.roles):
            leader = snapshot.vector(demand.leader.requests)
            worker = snapshot.vector(demand.worker.requests)
            leader_ok, worker_ok = eligible(demand.leader), eligible(demand.worker)
            pods = demand.pods_per_replica
            missing = sorted(
                set(snapshot.missing_resources(demand.leader.requests))
                | set(snapshot.missing_resources(demand.worker.requests) if pods > 1 else ())
            )
            if missing:
                # The vectors leave out resources no node offers; no node may take such a pod.
                leader_ok = worker_ok = np.zeros_like(leader_ok)
            roles.append(
                RoleState(
                    index=index,
                    demand=demand,
                    leader=leader,
                    worker=worker,
                    leader_ok=leader_ok,
                    worker_ok=worker_ok,
                    missing=missing,
                    required_depth=None if demand.pack_required is None else view.depth(demand.pack_required),
                    preferred_depth=None if demand.pack_preferred is None else view.depth(demand.pack_preferred),
                    replica_total=leader + (pods - 1) * worker,
                    same_shape=bool(np.array_equal(leader, worker) and np.array_equal(leader_ok, worker_ok)),
                )
            )
        by_name = {role.demand.name: role.index for role in roles}
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
        return cls(order, unit, view, roles, rules, required_depth, preferred_depth, dominant)

    def minimum_needs(self) -> dict[int, int]:
        """Role index -> complete replicas the unit needs to be functional."""
        return {r: role.demand.minimum for r, role in enumerate(self.roles) if role.demand.minimum > 0}

    def release(self, free: np.ndarray | None) -> tuple:
        """Forget this unit's placement, giving its capacity back to `free`; returns what `restore` needs."""
        saved = ([list(role.placed) for role in self.roles], self.domain, self.preferred_domain)
        for role in self.roles:
            for replica in role.placed:
                if free is not None:
                    for pod, node in enumerate(replica):
                        free[node] += role.leader if pod == 0 else role.worker
            role.placed = []
        self.domain = self.preferred_domain = None
        return saved

    def restore(self, saved: tuple) -> None:
        placements, self.domain, self.preferred_domain = saved
        for role, replicas in zip(self.roles, placements):
            role.placed = replicas

    # ------------------------------------------------------------------ results

    def result(self) -> UnitPlacement:
        view = self.view
        names = view.snapshot.node_names
        roles = tuple(
            (
                role.demand.name,
                tuple(
                    ReplicaAssignment(
                        index=r,
                        pods=tuple(
                            PodAssignment(self.demand.pod_name(role.demand.name, r, p), names[node])
                            for p, node in enumerate(nodes)
                        ),
                    )
                    for r, nodes in enumerate(role.placed)
                ),
            )
            for role in self.roles
        )
        domain = None
        where = self.preferred_domain or self.domain
        if where is not None:
            domain = f"{view.level_names[where[0]]}/{view.domain_name(*where)}"
        if not self.functional:
            code = "UnschedulableAndUnresolvable" if self.unresolvable else "Unschedulable"
            return UnitPlacement(self.demand, "Unschedulable", self.failure or "", roles, None, code)
        if all(len(role.placed) >= role.demand.desired for role in self.roles):
            return UnitPlacement(self.demand, "Placed", "", roles, domain)
        counts = ", ".join(f"{role.demand.name} {len(role.placed)}/{role.demand.desired}" for role in self.roles)
        return UnitPlacement(self.demand, "MinimumPlaced", f"placed {counts}; {self.capped or 'extras did not fit'}", roles, domain)


@dataclass
class Space:
    """Nodes being placed into, with a private copy of their free capacity.

    Masks and positions used while placing are over `nodes` (0..len-1); `nodes` maps a
    position back to the snapshot's node index.
    """

    nodes: np.ndarray
    free: np.ndarray

    @classmethod
    def of(cls, nodes: np.ndarray, free: np.ndarray) -> "Space":
        return cls(nodes, free[nodes].copy())


def all_replicas(unit: UnitState, r: int, fresh: Mapping[int, list[list[int]]]) -> list[list[int]]:
    """Replicas of role `r` already committed plus those placed so far in the current gang."""
    return unit.roles[r].placed + list(fresh.get(r, []))
