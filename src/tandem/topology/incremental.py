"""The placement snapshot kept between passes, brought up to date with what changed.

`ClusterSnapshot.build` walks every node and every bound pod; a controller pass that
places one unit on a settled cluster of 10,000 nodes paid for all of them each time. A
`SnapshotCache` keeps the last snapshot and its parts:

- the nodes' part (names, labels, allocatable, schedulability, taints, the label index)
  and each ClusterTopology's domain tree over it, rebuilt only when a node's version
  changes (a node added, removed, relabelled, cordoned, gone NotReady);
- what each bound pod holds, by the pod's uid, version and node: a pass subtracts what
  changed or left and adds what changed or came, so the `used` array costs a dictionary
  lookup per unchanged pod and a vector per changed one.

The result is always equal to `ClusterSnapshot.build` over the same nodes and pods (a
property test replays random event sequences against it). A pod that asks for a resource
no node offers changes the snapshot's columns, so that pass rebuilds from scratch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Hashable, Sequence

import numpy as np

from tandem.api.kube import Node, Pod
from tandem.api.naming import EXCLUSIVE_LABEL, GROUP_LABEL, UNIT_LABEL
from tandem.api.resources import ClusterTopology
from tandem.topology.snapshot import ClusterSnapshot, _pod_slot, _vector
from tandem.topology.tree import TopologyView

Versioned = tuple[Hashable, ...]  # what identifies one version of an object: (uid, resourceVersion, ...)


@dataclass(frozen=True)
class _Held:
    version: Versioned
    node: int | None  # None: bound to a node the snapshot does not have
    vector: np.ndarray | None
    exclusive: tuple[int, str, tuple[str, str, str]] | None
    warning: str | None


@dataclass
class SnapshotCache:
    base_key: tuple[Versioned, ...] | None = None
    base: ClusterSnapshot | None = None
    views: dict[Hashable, TopologyView] = field(default_factory=dict)
    held: dict[Hashable, _Held] = field(default_factory=dict)
    used: np.ndarray | None = None
    rebuilds: int = 0  # nodes' part built again (for tests and benchmarks)

    def snapshot(self, nodes: Sequence[tuple[Versioned, Node]], pods: Sequence[tuple[Hashable, Versioned, Pod]]) -> tuple[ClusterSnapshot, list[str]]:
        """The snapshot of `nodes` (each with its version) holding `pods` (uid, version, model)."""
        holding = [(uid, version, pod) for uid, version, pod in pods if pod.holds_capacity()]
        base_key = tuple(sorted(version for version, _ in nodes))
        if base_key != self.base_key or self.base is None:
            self.base, _ = ClusterSnapshot.build([node for _, node in nodes])
            self.base_key, self.views, self.held, self.used = base_key, {}, {}, None
            self.rebuilds += 1
        base = self.base
        if any(name not in base.resource_index for _, _, pod in holding for name in pod.spec.requests()):
            self.held, self.used = {}, None  # new columns: this pass builds from scratch
            return ClusterSnapshot.build([node for _, node in nodes], [pod for _, _, pod in holding])
        used = np.zeros_like(base.allocatable) if self.used is None else self.used.copy()
        held: dict[Hashable, _Held] = {}
        for uid, version, pod in holding:
            before = self.held.get(uid)
            if before is not None and before.version == version:
                held[uid] = before
                continue
            if before is not None and before.node is not None:
                used[before.node] -= before.vector
            held[uid] = entry = _hold(base, version, pod)
            if entry.node is not None:
                used[entry.node] += entry.vector
        for uid, before in self.held.items():
            if uid not in held and before.node is not None:
                used[before.node] -= before.vector
        self.held, self.used = held, used
        entries = [held[uid] for uid, _, _ in holding]
        snapshot = dataclasses.replace(
            base, used=used.copy(), exclusive_pods=tuple(e.exclusive for e in entries if e.exclusive is not None)
        )
        return snapshot, [e.warning for e in entries if e.warning is not None]

    def view(self, key: Hashable, topology: ClusterTopology, snapshot: ClusterSnapshot) -> TopologyView:
        """The domain tree of `topology` (identified by `key`, e.g. its name and version) over `snapshot`."""
        view = self.views.get(key)
        if view is None:
            view = self.views[key] = TopologyView.build(topology, snapshot)
        return dataclasses.replace(view, snapshot=snapshot)


def _hold(base: ClusterSnapshot, version: Versioned, pod: Pod) -> _Held:
    i = base.node_index.get(pod.spec.node_name or "")
    if i is None:
        warning = (f"pod {pod.metadata.namespace}/{pod.metadata.name} is bound to node {pod.spec.node_name!r}, "
                   "which is not among the nodes given; ignored")
        return _Held(version, None, None, None, warning)
    size = len(base.resources)
    vector = _vector(pod.spec.requests(), base.resource_index, size) + _pod_slot(base.resource_index, size)
    labels = pod.metadata.labels
    exclusive = None
    if EXCLUSIVE_LABEL in labels:
        exclusive = (i, labels[EXCLUSIVE_LABEL], (pod.metadata.namespace or "", labels.get(GROUP_LABEL, ""), labels.get(UNIT_LABEL, "")))
    return _Held(version, i, vector, exclusive, None)
