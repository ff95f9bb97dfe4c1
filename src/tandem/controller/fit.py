"""Units that could never fit the cluster's nodes as they are: created as nothing, said once.

A unit whose pods the engine cannot place waits, gated, for capacity to come free: right
for a full cluster, wrong for one whose nodes could never hold it even empty. Such a unit
would hold a gated pod per replica for ever while the status said only "waiting". Two
shortfalls make a unit never fit, both judged on the nodes' full allocatable (every pod
gone) and on the nodes labelled for the group's ClusterTopology (placement uses no other):

- a pod of a role the unit needs (`minReplicas` > 0) asks for more of a resource than any
  node offers, or for a resource no node has (16 GPUs per pod on 8-GPU nodes);
- the unit's minimum (every role's `minReplicas` complete replicas) asks for more than
  any one domain of its required pack level holds, or one replica for more than any domain
  of the role's required level (a sum: a bound that never calls a possible unit
  impossible, though it misses some that are).

Judged against the nodes present, and again whenever a node changes: with a cluster
autoscaler a node of a larger shape may come (then the unit fits, and is created as any
other); cordoned and NotReady nodes count, as they may come back. Node selectors and
taints are not judged here (the engine says when they are what stops a unit).

`never_fits` is pure; `decide` calls it before coordinating a group and, when it answers,
creates nothing for the group's units (each is Unschedulable, its reason `NeverFits: ...`)
and the status pass's `health.verdict` sets the `Scheduled` condition to False with reason
`NeverFits` and the message.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from tandem.api.group_status import InferenceGroupStatus
from tandem.api.resources import InferenceGroup
from tandem.controller.health import NEVER_FITS
from tandem.placement.demand import PodShape
from tandem.topology.snapshot import PODS, format_amount
from tandem.topology.tree import TopologyView

REASON = NEVER_FITS


class Capacity:
    """The full capacity of one topology's labelled nodes, read once per pass and only as far
    as asked: the largest amount of each resource on any node, whether some node holds a
    whole pod, each level's domains summed."""

    def __init__(self, view: TopologyView):
        self.view = view
        self.labelled = view.dom[0] >= 0
        self._domains: dict[int, np.ndarray] = {}
        self._holds: dict[bytes, bool] = {}  # by pod demand: the groups of a pass share their shapes

    @cached_property
    def allocatable(self) -> np.ndarray:
        """[labelled nodes, resources]."""
        return self.view.snapshot.allocatable[self.labelled]

    @cached_property
    def largest(self) -> np.ndarray:
        """[resources]: the most any one node offers of each."""
        return self.allocatable.max(axis=0) if self.allocatable.size else np.zeros(len(self.view.snapshot.resources), dtype=np.int64)

    def one_node_holds(self, demand: np.ndarray) -> bool:
        if np.any(demand > self.largest):
            return False  # the common answer, without a pass over the nodes
        key = demand.tobytes()
        if key not in self._holds:
            self._holds[key] = bool(np.all(self.allocatable >= demand, axis=1).any())
        return self._holds[key]

    def domains(self, depth: int) -> np.ndarray:
        """[domains, resources]: each domain's allocatable at `depth`, every pod gone."""
        if depth not in self._domains:
            ids, size = self.view.dom[depth][self.labelled], self.view.domain_count(depth)
            columns = [np.bincount(ids, weights=self.allocatable[:, r], minlength=size) for r in range(self.allocatable.shape[1])]
            self._domains[depth] = np.stack(columns, axis=1).astype(np.int64) if columns else np.zeros((size, 0), np.int64)
        return self._domains[depth]


def never_fits(group: InferenceGroup, capacity: Capacity) -> str | None:
    """Why no unit of `group` could ever be placed on the nodes of `capacity` (None: it could)."""
    view = capacity.view
    snapshot = view.snapshot
    if not capacity.labelled.any():
        return None  # no node yet: nothing to judge against (the engine says it waits)
    needed = [(i, role) for i, role in enumerate(group.spec.roles) if role.minimum > 0]
    per_replica: dict[int, np.ndarray] = {}
    for index, role in needed:
        replica = np.zeros(len(snapshot.resources), dtype=np.int64)
        for pod_index in sorted({0, role.pods_per_replica - 1}):
            shape = PodShape.from_template(role.pod_template(pod_index))
            which = "leader" if pod_index == 0 and role.pods_per_replica > 1 else ("worker" if pod_index else "")
            pod = f"a {role.name}{' ' + which if which else ''} pod (spec.roles[{index}])"
            missing = snapshot.missing_resources(shape.requests)
            if missing:
                return f"{pod} asks for {missing[0]}, which no node offers"
            vector = snapshot.vector(shape.requests)
            if not capacity.one_node_holds(vector):
                return f"{pod} asks for {_lacking(vector, capacity.largest, snapshot.resources, 'node')}"
            replica += vector * (role.pods_per_replica - 1 if pod_index else 1)
        per_replica[index] = replica
    for index, role in needed:
        short = _domain_shortfall(capacity, per_replica[index], role.topology.pack.required)
        if short:
            return f"a {role.name} replica (spec.roles[{index}], {role.pods_per_replica} pod(s)) asks for {short}"
    minimum = np.zeros(len(snapshot.resources), dtype=np.int64)
    for index, role in needed:
        minimum += role.minimum * per_replica[index]
    short = _domain_shortfall(capacity, minimum, group.spec.topology.pack.required)
    if short:
        counts = ", ".join(f"{role.minimum} {role.name}" for _, role in needed)
        return f"the unit's minimum ({counts}) asks for {short}"
    return None


def said_never_fit(status: InferenceGroupStatus) -> bool:
    """Whether the stored status says so already (its event is written once, when it starts)."""
    return any(c.type == "Scheduled" and c.reason == REASON for c in status.conditions)


def _shortfall(demand: np.ndarray, capacity: np.ndarray, resources: tuple[str, ...], what: str) -> str | None:
    """None if some row of `capacity` holds `demand`; else what the largest rows lack."""
    if capacity.size and np.all(capacity >= demand, axis=1).any():
        return None
    return _lacking(demand, capacity.max(axis=0) if capacity.size else np.zeros_like(demand), resources, what)


def _lacking(demand: np.ndarray, largest: np.ndarray, resources: tuple[str, ...], what: str) -> str:
    """What `demand` asks beyond `largest` (the most one `what` offers of each resource)."""
    over = [r for r in range(len(resources)) if demand[r] > largest[r]]
    if over:
        r = over[0]
        name = resources[r]
        return f"{name} {format_amount(name, int(demand[r]))}; the largest {what} offers {format_amount(name, int(largest[r]))}"
    asked = [r for r in range(len(resources)) if demand[r] > 0 and resources[r] != PODS]
    together = " and ".join(f"{resources[r]} {format_amount(resources[r], int(demand[r]))}" for r in asked)
    return f"{together}; no {what} offers them together"


def _domain_shortfall(capacity: Capacity, demand: np.ndarray, level: str | None) -> str | None:
    """What `demand` lacks in every domain of `level` (the whole cluster for None), at full capacity."""
    view = capacity.view
    depth = view.depth(level) if level in view.level_names else 0
    short = _shortfall(demand, capacity.domains(depth), view.snapshot.resources, view.level_names[depth] if depth else "cluster")
    if short is None:
        return None
    return f"{short.split(';')[0]} in one {view.level_names[depth]};{short.split(';', 1)[1]}" if depth else short.replace("the largest cluster", "the whole cluster")
