"""Nodes and their capacity as numpy arrays: allocatable, used by bound pods, free.

Built once from Node and Pod objects; the placement engine works on a copy of `free`, so
one snapshot serves many decisions (like a scheduler's cache). Amounts are integers: CPU
in millicores, every other resource in whole units (bytes, devices), rounded up, so sums
over tens of thousands of nodes stay exact in int64. Each pod also uses one unit of the
`pods` resource, as kube-scheduler counts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Mapping, Sequence

import numpy as np

from tandem.api.kube import Node, Pod, Taint, Toleration
from tandem.api.naming import EXCLUSIVE_LABEL, GROUP_LABEL, UNIT_LABEL
from tandem.api.quantity import MILLI

PODS = "pods"
# kubelet's default when a node file does not state allocatable pods.
DEFAULT_MAX_PODS = 110
# Resources kept in milli-units; all others are whole units.
MILLI_RESOURCES = frozenset({"cpu"})


def to_units(resource: str, milli: int) -> int:
    """From parsed milli-units to the snapshot's unit for `resource` (rounding up)."""
    return milli if resource in MILLI_RESOURCES else -(-milli // MILLI)


def format_amount(resource: str, amount: int) -> str:
    """An amount in the snapshot's unit, as a person would write it."""
    if resource in MILLI_RESOURCES:
        return str(amount // MILLI) if amount % MILLI == 0 else f"{amount}m"
    for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
        if amount >= size and amount % size == 0:
            return f"{amount // size}{suffix}"
    return str(amount)
_REPELS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the snapshot reads of a Node, and no more: the controller keeps one for every
    node between passes (`incremental.py`), where a validated model costs kilobytes."""

    name: str
    labels: Mapping[str, str]  # read-only, like every snapshot's labels
    allocatable: tuple[tuple[str, int], ...]  # resource -> amount in milli-units, by resource
    problem: str | None  # why the node is not schedulable
    taints: tuple[Taint, ...]  # NoSchedule/NoExecute taints only

    @classmethod
    def of(cls, node: Node) -> "NodeFacts":
        taints = tuple(t for t in node.spec.taints if t.effect in _REPELS)
        return cls(node.metadata.name, node.metadata.labels, tuple(sorted(node.status.allocatable.items())), _node_problem(node), taints)


@dataclass(frozen=True, eq=False)
class ClusterSnapshot:
    node_names: tuple[str, ...]
    labels: tuple[Mapping[str, str], ...]
    resources: tuple[str, ...]
    allocatable: np.ndarray  # [nodes, resources] int64 milli-units
    used: np.ndarray  # [nodes, resources] int64 milli-units
    schedulable: np.ndarray  # [nodes] bool: not cordoned and Ready
    # Sparse, by node index: most nodes have neither, and a node going NotReady changes
    # one entry, where a tuple over every node would be copied whole.
    problems: Mapping[int, str]  # why a node is not schedulable, for the nodes that are not
    taints: Mapping[int, tuple[Taint, ...]]  # NoSchedule/NoExecute taints, for the nodes that have some
    tainted_nodes: tuple[int, ...]  # indices of nodes with such taints, ascending
    # (node, level, (namespace, group, unit)) for bound pods of units that asked for an
    # exclusive level: the domains they hold are closed to other exclusive units.
    exclusive_pods: tuple[tuple[int, str, tuple[str, str, str]], ...] = ()
    node_index: Mapping[str, int] = field(repr=False, default_factory=dict)
    resource_index: Mapping[str, int] = field(repr=False, default_factory=dict)
    # label key -> (value -> id, [nodes] value id or -1): selectors become array compares
    label_index: Mapping[str, tuple[Mapping[str, int], np.ndarray]] = field(repr=False, default_factory=dict)

    @classmethod
    def build(cls, nodes: Sequence[Node], pods: Sequence[Pod] = ()) -> tuple["ClusterSnapshot", list[str]]:
        """Snapshot of `nodes` with the capacity `pods` bound to them hold; plus warnings."""
        return cls.of_facts([NodeFacts.of(node) for node in nodes], pods)

    @classmethod
    def of_facts(cls, nodes: Sequence[NodeFacts], pods: Sequence[Pod] = ()) -> tuple["ClusterSnapshot", list[str]]:
        """`build` from what was kept of each node."""
        ordered = sorted(nodes, key=lambda node: node.name)
        names = tuple(node.name for node in ordered)
        resource_names = {PODS}
        for node in ordered:
            resource_names.update(name for name, _ in node.allocatable)
        pod_requests = [(pod, pod.spec.requests()) for pod in pods if pod.holds_capacity()]
        for _, requests in pod_requests:
            resource_names.update(requests)
        resources = tuple(sorted(resource_names))
        r_index = {name: i for i, name in enumerate(resources)}
        n_index = {name: i for i, name in enumerate(names)}
        allocatable = np.zeros((len(names), len(resources)), dtype=np.int64)
        for i, node in enumerate(ordered):
            fill_allocatable(allocatable[i], node, r_index)
        used = np.zeros_like(allocatable)
        warnings: list[str] = []
        exclusive: list[tuple[int, str, tuple[str, str, str]]] = []
        for pod, requests in pod_requests:
            at = n_index.get(pod.spec.node_name or "")
            if at is None:
                warnings.append(
                    f"pod {pod.metadata.namespace}/{pod.metadata.name} is bound to node {pod.spec.node_name!r}, "
                    "which is not among the nodes given; ignored"
                )
                continue
            used[at] += _vector(requests, r_index, len(resources)) + _pod_slot(r_index, len(resources))
            labels = pod.metadata.labels
            if EXCLUSIVE_LABEL in labels:
                owner = (pod.metadata.namespace or "", labels.get(GROUP_LABEL, ""), labels.get(UNIT_LABEL, ""))
                exclusive.append((at, labels[EXCLUSIVE_LABEL], owner))
        problems = {i: node.problem for i, node in enumerate(ordered) if node.problem is not None}
        taints = {i: node.taints for i, node in enumerate(ordered) if node.taints}
        snapshot = cls(
            node_names=names,
            labels=tuple(node.labels for node in ordered),
            resources=resources,
            allocatable=allocatable,
            used=used,
            schedulable=np.array([node.problem is None for node in ordered], dtype=bool),
            problems=problems,
            taints=taints,
            tainted_nodes=tuple(sorted(taints)),
            exclusive_pods=tuple(exclusive),
            node_index=n_index,
            resource_index=r_index,
            label_index=_label_index(ordered),
        )
        return snapshot, warnings

    @cached_property
    def totals(self) -> np.ndarray:
        """Allocatable summed over all nodes (read-only: shared by every decision)."""
        totals: np.ndarray = self.allocatable.sum(axis=0)
        totals.flags.writeable = False
        return totals

    @property
    def free(self) -> np.ndarray:
        """Capacity left on each node (a new array; overcommitted nodes show 0)."""
        return self._free.copy()

    @cached_property
    def _free(self) -> np.ndarray:
        free: np.ndarray = np.maximum(self.allocatable - self.used, 0)
        return free

    def vector(self, requests: Mapping[str, int]) -> np.ndarray:
        """A pod's requests as a resource vector, including its one `pods` slot.

        Resources that no node offers are dropped here; see `missing_resources`.
        """
        vector: np.ndarray = _vector(requests, self.resource_index, len(self.resources)) + _pod_slot(self.resource_index, len(self.resources))
        return vector

    def missing_resources(self, requests: Mapping[str, int]) -> list[str]:
        """Requested resources (amount > 0) that no node in the snapshot offers."""
        return sorted(name for name, amount in requests.items() if amount > 0 and name not in self.resource_index)

    def eligible(self, node_selector: Mapping[str, str], tolerations: Sequence[Toleration]) -> np.ndarray:
        """Nodes a pod with this selector and these tolerations may use (schedulability included)."""
        mask = self.schedulable.copy()
        for key, value in node_selector.items():
            values, ids = self.label_index.get(key, ({}, None))
            if value not in values or ids is None:
                return np.zeros_like(mask)
            mask &= ids == values[value]
        for i in self.tainted_nodes:
            if mask[i] and not all(any(t.tolerates(taint) for t in tolerations) for taint in self.taints.get(i, ())):
                mask[i] = False
        return mask


def fill_allocatable(row: np.ndarray, node: NodeFacts, r_index: Mapping[str, int]) -> None:
    """Write `node`'s allocatable into `row` (a zeroed row over the snapshot's resources),
    `pods` at kubelet's default unless the node states it."""
    row[r_index[PODS]] = DEFAULT_MAX_PODS
    for name, amount in node.allocatable:
        row[r_index[name]] = to_units(name, amount)


def _vector(requests: Mapping[str, int], r_index: Mapping[str, int], size: int) -> np.ndarray:
    """Requests in milli-units (as parsed) to a vector in the snapshot's units."""
    vec = np.zeros(size, dtype=np.int64)
    for name, amount in requests.items():
        i = r_index.get(name)
        if i is not None and name != PODS:
            vec[i] += to_units(name, amount)
    return vec


def _pod_slot(r_index: Mapping[str, int], size: int) -> np.ndarray:
    vec = np.zeros(size, dtype=np.int64)
    vec[r_index[PODS]] = 1
    return vec


def _label_index(nodes: Sequence[NodeFacts]) -> dict[str, tuple[dict[str, int], np.ndarray]]:
    index: dict[str, tuple[dict[str, int], np.ndarray]] = {}
    for i, node in enumerate(nodes):
        for key, value in node.labels.items():
            if key not in index:
                index[key] = ({}, np.full(len(nodes), -1, dtype=np.int64))
            values, ids = index[key]
            ids[i] = values.setdefault(value, len(values))
    return index


def _node_problem(node: Node) -> str | None:
    if node.spec.unschedulable:
        return "cordoned (spec.unschedulable)"
    if not node.ready():
        return "not Ready"
    return None
