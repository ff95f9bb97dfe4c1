"""Recovery: a replica that lost pods is completed in place only where it stays whole.

`cluster.replicas.replicas_of_unit` says which incomplete replicas may be completed rather
than re-created: a creation cut short, and (with `recovery: ReplaceMissingPod`) a replica
that lost only workers. A pod created beside surviving ones must go where the replica's
constraints hold with them, which the engine, placing whole replicas, does not do. So
before coordination, each such replica that still has a pod on a node gets a node for
every other pod here, or none: then it is Failed, and coordination re-creates it whole
(deleted, then created and placed as a gang by the engine).

A node is chosen for a pod when it is usable and eligible for the pod's shape, has room
for it (beside what earlier repairs of the pass took), shares the replica's
`pack.required` domain with its placed pods, the unit's `pack.required` domain with the
unit's placed pods, and (with `exclusive`) a domain of that level the unit already holds;
the nearest such node to the replica's placed pods first (the deepest common domain),
then in node order; the last pod chosen goes where its role's Required affinities hold
for the unit as placed (nearest first), or the replica is re-created whole. The loads of the pods placed here are handed to the
engine's snapshot (`with_repairs`) so the same pass places nothing else on that room.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Hashable, Mapping

import numpy as np

from tandem.api.naming import REPLICA_LABEL, ROLE_LABEL
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.cluster.payloads import PodPayload
from tandem.cluster.pods import assigned_node, pod_failed, pod_index
from tandem.coordination.model import Replica
from tandem.placement.demand import PodShape
from tandem.topology import ClusterSnapshot, TopologyView
from tandem.topology.incremental import SnapshotCache

ReplicaKey = tuple[str, int]  # (role, replica index)


class Recovery:
    """One pass's repairs: the snapshot read when the first is needed, the loads they add."""

    def __init__(self, cache: SnapshotCache, topologies: Mapping[str, ClusterTopology], versions: Mapping[str, Hashable]):
        self._cache = cache
        self._topologies = topologies
        self._versions = versions
        self._snapshot: ClusterSnapshot | None = None
        self._added: np.ndarray | None = None  # [nodes, resources]: loads of the pods placed here

    def repair(
        self, group: InferenceGroup, replicas: list[Replica], pods_of: Mapping[ReplicaKey, list[PodPayload]]
    ) -> tuple[list[Replica], dict[ReplicaKey, dict[int, str]]]:
        """`replicas` with those that cannot be completed in place Failed, and a node per
        pod index for each replica completed here (its missing pods and unplaced ones)."""
        sizes = {r.name: r.pods_per_replica for r in group.spec.roles}
        due = [r for r in replicas if r.phase != "Failed" and _partial(pods_of[(r.role, r.index)], sizes[r.role])]
        if not due:
            return replicas, {}
        # where the unit runs: the pods of its replicas that stay (a Failed one goes)
        unit_pods = [p for r in replicas if r.phase != "Failed" for p in pods_of[(r.role, r.index)] if not pod_failed(p)]
        out = list(replicas)
        chosen: dict[ReplicaKey, dict[int, str]] = {}
        for replica in due:
            nodes = self._place(group, replica, pods_of, unit_pods)
            if nodes is None:
                out[out.index(replica)] = dataclasses.replace(replica, phase="Failed")
            else:
                chosen[(replica.role, replica.index)] = nodes
        return out, chosen

    def with_repairs(self, snapshot: ClusterSnapshot) -> ClusterSnapshot:
        """`snapshot` with the loads of the pods this pass placed here."""
        if self._added is None or not self._added.any():
            return snapshot
        return dataclasses.replace(snapshot, used=snapshot.used + self._added)

    # ------------------------------------------------------------------ internals

    def _view(self, group: InferenceGroup) -> tuple[ClusterSnapshot, TopologyView] | None:
        name = group.spec.topology_name
        topology = self._topologies.get(name)
        if topology is None:
            return None
        if self._snapshot is None:
            self._snapshot, _ = self._cache.snapshot()
            self._added = np.zeros_like(self._snapshot.used)
        return self._snapshot, self._cache.view((name, self._versions.get(name)), topology, self._snapshot)

    def _place(
        self, group: InferenceGroup, replica: Replica, pods_of: Mapping[ReplicaKey, list[PodPayload]], unit_pods: list[PodPayload]
    ) -> dict[int, str] | None:
        seen = self._view(group)
        if seen is None:
            return None
        snapshot, view = seen
        assert self._added is not None
        role = group.role(replica.role)
        members = {pod_index(p): p for p in pods_of[(replica.role, replica.index)]}
        anchors = [_node(snapshot, assigned_node(p)) for p in members.values() if assigned_node(p)]
        placed_unit = [_node(snapshot, assigned_node(p)) for p in unit_pods if assigned_node(p)]
        if None in anchors or None in placed_unit:
            return None  # a pod on a node the snapshot does not have: nothing to reason from
        fixed = [int(n) for n in anchors if n is not None]
        unit_nodes = [int(n) for n in placed_unit if n is not None]
        allowed = view.usable.copy()
        for level, around in ((role.topology.pack.required, fixed), (group.spec.topology.pack.required, unit_nodes)):
            if level is not None and not _within(view, allowed, view.depth(level), around):
                return None
        if group.spec.topology.exclusive is not None:
            depth = view.depth(group.spec.topology.exclusive)
            allowed &= np.isin(view.dom[depth], [view.node_domain(n, depth) for n in unit_nodes])
        free = snapshot.free - self._added
        wanted = [i for i in reversed(range(role.pods_per_replica)) if i not in members or not assigned_node(members[i])]
        nodes: dict[int, int] = {}
        for index in wanted:  # workers first, the leader last, as they are created
            shape = PodShape.from_template(role.pod_template(index))
            vector = snapshot.vector(shape.requests)
            if snapshot.missing_resources(shape.requests):
                return None
            fits = allowed & snapshot.eligible(shape.node_selector, shape.tolerations) & np.all(free >= vector, axis=1)
            candidates = sorted(np.flatnonzero(fits).tolist(), key=lambda n: (-_closeness(view, n, fixed), n))
            if index == wanted[-1]:  # the last pod goes where the role's Required affinities hold, if anywhere
                candidates = [n for n in candidates if _affinities_hold(group, view, replica, unit_pods, [*fixed, *nodes.values(), n], snapshot)]
            if not candidates:
                return None
            free[candidates[0]] -= vector
            nodes[index] = candidates[0]
        for index, node in nodes.items():
            self._added[node] += snapshot.vector(PodShape.from_template(role.pod_template(index)).requests)
        return {index: snapshot.node_names[node] for index, node in nodes.items()}


def _partial(members: list[PodPayload], size: int) -> bool:
    """Some pod of the replica is on a node, and some is missing or has none."""
    placed = sum(1 for p in members if assigned_node(p))
    return 0 < placed and (placed < size or len(members) < size)


def _node(snapshot: ClusterSnapshot, name: str | None) -> int | None:
    return None if name is None else snapshot.node_index.get(name)


def _within(view: TopologyView, allowed: np.ndarray, depth: int, around: list[int]) -> bool:
    """Narrow `allowed` to the one domain at `depth` holding every node of `around`
    (false when they are in several, or in none)."""
    domains = {view.node_domain(n, depth) for n in around}
    if len(domains) > 1 or -1 in domains:
        return False
    if domains:
        allowed &= view.dom[depth] == domains.pop()
    return True


def _closeness(view: TopologyView, node: int, fixed: list[int]) -> int:
    """The deepest level at which `node` shares a domain with every node of `fixed`."""
    best = 0
    for depth in range(1, view.depth_count):
        domain = view.node_domain(node, depth)
        if domain < 0 or any(view.node_domain(n, depth) != domain for n in fixed):
            break
        best = depth
    return best


def _affinities_hold(
    group: InferenceGroup, view: TopologyView, replica: Replica, unit_pods: list[PodPayload], nodes: list[int], snapshot: ClusterSnapshot
) -> bool:
    """The unit's Required affinities that name the replica's role hold with the replica on `nodes`."""
    rules = [a for a in group.spec.affinity if a.mode == "Required" and replica.role in (a.from_, a.to)]
    if not rules:
        return True
    by_replica: dict[tuple[str, str], list[int]] = {}
    for pod in unit_pods:
        labels = pod["metadata"].get("labels") or {}
        key = (labels.get(ROLE_LABEL, ""), labels.get(REPLICA_LABEL, ""))
        node = _node(snapshot, assigned_node(pod))
        if node is not None and key != (replica.role, str(replica.index)):
            by_replica.setdefault(key, []).append(node)
    by_replica[(replica.role, str(replica.index))] = nodes
    for rule in rules:
        depth = view.depth(rule.level)
        near: Callable[[list[int]], set[Any]] = lambda ns: {view.node_domain(n, depth) for n in ns}
        targets = set().union(*(near(ns) for (r, _), ns in by_replica.items() if r == rule.to))
        for (r, _), ns in by_replica.items():
            if r == rule.from_ and not near(ns) & targets:
                return False
    return True
