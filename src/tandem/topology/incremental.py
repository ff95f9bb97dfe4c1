"""The placement snapshot kept between passes, brought up to date event by event.

`ClusterSnapshot.build` walks every node and every bound pod; a controller pass that
places one unit on a settled cluster of 10,000 nodes paid for all of them each time. A
`SnapshotCache` is told of each change instead (`node`, `pod`: the controller's index
hands them over as it sees them) and keeps:

- the nodes' part (names, labels, allocatable, schedulability, taints, the label index),
  from each node's `NodeFacts` (not its model: 65,000 of them are kept), and each
  ClusterTopology's domain tree over it. A node whose facts did not change (a
  heartbeat) costs nothing; one whose capacity, usability or taints changed is patched in
  place (its rows, copied only where they changed; the trees' `usable` arrays when
  usability moved); a node added, removed or relabelled rebuilds the nodes' part;
- what each pod holds, by its key: the `used` array changes by one vector per pod event.

Domain roll-ups are sums over `used` taken when a decision needs them (`TopologyView`),
so they follow without upkeep. `snapshot()` is always equal to `ClusterSnapshot.build`
over the same nodes and pods (a property test replays random event sequences against
it). A pod asking for a resource no node offers changes the snapshot's columns: while
one is held, `snapshot()` builds from scratch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Hashable

import numpy as np

from tandem.api.kube import Pod
from tandem.api.naming import EXCLUSIVE_LABEL, GROUP_LABEL, UNIT_LABEL
from tandem.api.resources import ClusterTopology
from tandem.topology.snapshot import ClusterSnapshot, NodeFacts, fill_allocatable
from tandem.topology.tree import TopologyView

Versioned = tuple[Hashable, ...]  # what identifies one version of an object: (uid, resourceVersion, ...)
PodKey = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True, slots=True)
class _Load:
    """What a pod holds, as much as the snapshot needs (not the pod: 250,000 of them are kept)."""

    namespace: str
    name: str
    node: str
    requests: tuple[tuple[str, int], ...]
    exclusive: tuple[str, str, str] | None  # (level, group, unit) of a unit that asked for an exclusive level

    @classmethod
    def of(cls, pod: Pod, shapes: dict[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]) -> "_Load":
        """`shapes` keeps one tuple per distinct requests: most pods ask what many others ask."""
        labels = pod.metadata.labels
        exclusive = (labels[EXCLUSIVE_LABEL], labels.get(GROUP_LABEL, ""), labels.get(UNIT_LABEL, "")) if EXCLUSIVE_LABEL in labels else None
        requests = tuple(sorted(pod.spec.requests().items()))
        return cls(pod.metadata.namespace or "", pod.metadata.name, pod.spec.node_name or "", shapes.setdefault(requests, requests), exclusive)


@dataclass(frozen=True, slots=True)
class _Held:
    node: int | None  # None: bound to a node the snapshot does not have
    vector: np.ndarray | None  # shared by every pod of the same requests: read-only
    exclusive: tuple[int, str, tuple[str, str, str]] | None
    warning: str | None


@dataclass
class SnapshotCache:
    nodes: dict[str, tuple[Versioned, NodeFacts]] = field(default_factory=dict)
    pods: dict[PodKey, tuple[Versioned, _Load]] = field(default_factory=dict)  # pods that hold capacity
    base: ClusterSnapshot | None = None
    views: dict[Hashable, TopologyView] = field(default_factory=dict)
    held: dict[PodKey, _Held] = field(default_factory=dict)
    used: np.ndarray | None = None
    exclusive: dict[PodKey, tuple[int, str, tuple[str, str, str]]] = field(default_factory=dict)  # held ones, by pod
    warnings: dict[PodKey, str] = field(default_factory=dict)  # held pods on nodes the snapshot lacks
    rebuilds: int = 0  # nodes' part built again (for tests and benchmarks)
    # Moves whenever capacity may have come free: a node changed, a pod let go of its load
    # or moved it. A pod taking new load does not move it (nothing that did not fit before fits then).
    freed: int = 0
    _stale: bool = True  # nodes added, removed or relabelled since `base`
    _patched: set[str] = field(default_factory=set)  # nodes changed in place since `base`
    _changed: set[PodKey] = field(default_factory=set)  # pods changed since `used`
    _odd: set[PodKey] = field(default_factory=set)  # pods asking for a resource no node offers
    _shapes: dict[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]] = field(default_factory=dict)  # distinct requests
    _vectors: dict[tuple[tuple[str, int], ...], np.ndarray] = field(default_factory=dict)  # their vectors over `base`
    _used_shared: bool = False  # a snapshot handed out holds `used`: copy it before the next change

    # ------------------------------------------------------------------ events

    def node(self, name: str, version: Versioned, facts: NodeFacts | None) -> None:
        """Node `name` is now `facts` (None: gone, or not valid)."""
        before = self.nodes.get(name)
        if facts is None:
            if before is not None:
                del self.nodes[name]
                self._stale = True
                self.freed += 1
            return
        self.nodes[name] = (version, facts)
        if before is None or before[1].labels != facts.labels:
            self._stale = True
            self.freed += 1
        elif before[1] != facts:
            self._patched.add(name)
            self.freed += 1

    def pod(self, key: PodKey, version: Versioned, model: Pod | None) -> None:
        """Pod `key` is now `model` (None: gone, or holding nothing). Its load moves at once
        when the nodes' part is current, else at the next `snapshot()`."""
        if model is None or not model.holds_capacity():
            if self.pods.pop(key, None) is None:
                return
            self.freed += 1
        else:
            before = self.pods.get(key)
            if before is not None and before[0] == version:
                return
            load = _Load.of(model, self._shapes)
            self.pods[key] = (version, load)
            if len(self._shapes) > 2 * len(self.pods) + 64:  # shapes no pod asks any more
                self._shapes = {kept.requests: kept.requests for _, kept in self.pods.values()}
                self._vectors = {shape: v for shape, v in self._vectors.items() if shape in self._shapes}
            if before is not None:
                if before[1] == load:
                    return  # a new version holding exactly what the old one held
                self.freed += 1
        if self.base is None or self._stale or self.used is None or self._odd:
            self._changed.add(key)
        else:
            self._move(key, self.base, self._writable_used())

    # ------------------------------------------------------------------ reads

    def snapshot(self) -> tuple[ClusterSnapshot, list[str]]:
        """The snapshot of the nodes and pods told so far; plus warnings (pods on unknown nodes)."""
        if self._stale or self.base is None:
            self._rebuild()
        elif self._patched:
            self._patch()
        base = self.base
        assert base is not None
        if self.used is None:
            self.used, self._used_shared = np.zeros_like(base.allocatable), False
        if self._changed:
            used = self._writable_used()
            for key in sorted(self._changed):
                self._move(key, base, used)
            self._changed = set()
        if self._odd:  # new columns: build from scratch while such a pod is held
            self._changed, self.held, self.used, self.exclusive, self.warnings = set(self.pods), {}, None, {}, {}
            return ClusterSnapshot.of_facts([f for _, f in self.nodes.values()], [_pod(load) for _, (_, load) in sorted(self.pods.items())])
        # The snapshot shares `used` (read-only) until the next pod event copies it: a pass
        # that saw no pod change copies nothing.
        self.used.flags.writeable = False
        self._used_shared = True
        snapshot = dataclasses.replace(base, used=self.used, exclusive_pods=tuple(v for _, v in sorted(self.exclusive.items())))
        return snapshot, [v for _, v in sorted(self.warnings.items())]

    def view(self, key: Hashable, topology: ClusterTopology, snapshot: ClusterSnapshot) -> TopologyView:
        """The domain tree of `topology` (identified by `key`, e.g. its name and version) over `snapshot`."""
        view = self.views.get(key)
        if view is None:
            view = self.views[key] = TopologyView.build(topology, snapshot)
        return dataclasses.replace(view, snapshot=snapshot)

    # ------------------------------------------------------------------ internals

    def _writable_used(self) -> np.ndarray:
        """`used`, to change in place: copied first if a snapshot handed out holds it."""
        assert self.used is not None
        if self._used_shared:
            self.used, self._used_shared = self.used.copy(), False
        return self.used

    def _move(self, key: PodKey, base: ClusterSnapshot, used: np.ndarray) -> None:
        """Take pod `key`'s old load off `used` and put its new one on."""
        before = self.held.pop(key, None)
        if before is not None and before.node is not None:
            used[before.node] -= before.vector
        self.exclusive.pop(key, None)
        self.warnings.pop(key, None)
        self._odd.discard(key)
        entry = self.pods.get(key)
        if entry is None:
            return
        load = entry[1]
        if any(name not in base.resource_index for name, _ in load.requests):
            self._odd.add(key)  # held by no array: `snapshot()` builds from scratch while it lasts
            return
        self.held[key] = held = _hold(base, load, self._vectors)
        if held.node is not None:
            used[held.node] += held.vector
        if held.exclusive is not None:
            self.exclusive[key] = held.exclusive
        if held.warning is not None:
            self.warnings[key] = held.warning

    def _rebuild(self) -> None:
        self.base, _ = ClusterSnapshot.of_facts([facts for _, facts in self.nodes.values()])
        self.views, self.held, self.used, self.exclusive, self.warnings, self._vectors = {}, {}, None, {}, {}, {}
        self._changed = set(self.pods)
        self._stale, self._patched = False, set()
        self.rebuilds += 1

    def _patch(self) -> None:
        """Capacity, usability or taints of existing nodes changed: their rows, in new arrays
        (capacity copied only when some node's changed: a node going NotReady keeps it)."""
        base = self.base
        assert base is not None
        if any(name not in base.resource_index for n in self._patched for name, _ in self.nodes[n][1].allocatable):
            self._rebuild()  # a resource no node offered before: new columns
            return
        allocatable, schedulable = base.allocatable, base.schedulable.copy()
        problems, taints = dict(base.problems), dict(base.taints)
        changed = np.array(sorted(base.node_index[name] for name in self._patched), dtype=np.int64)
        for name in self._patched:
            i, node = base.node_index[name], self.nodes[name][1]
            row = np.zeros(len(base.resources), dtype=np.int64)
            fill_allocatable(row, node, base.resource_index)
            if not np.array_equal(row, allocatable[i]):
                allocatable = allocatable.copy() if allocatable is base.allocatable else allocatable
                allocatable[i] = row
            schedulable[i] = node.problem is None
            if node.problem:
                problems[i] = node.problem
            else:
                problems.pop(i, None)
            if node.taints:
                taints[i] = node.taints
            else:
                taints.pop(i, None)
        self._patched = set()
        self.base = dataclasses.replace(
            base,
            allocatable=allocatable,
            schedulable=schedulable,
            problems=problems,
            taints=taints,
            tainted_nodes=tuple(sorted(taints)),
        )
        self.views = {key: view.rebased(self.base, changed) for key, view in self.views.items()}


def _hold(base: ClusterSnapshot, load: _Load, vectors: dict[tuple[tuple[str, int], ...], np.ndarray]) -> _Held:
    i = base.node_index.get(load.node)
    if i is None:
        warning = f"pod {load.namespace}/{load.name} is bound to node {load.node!r}, which is not among the nodes given; ignored"
        return _Held(None, None, None, warning)
    vector = vectors.get(load.requests)
    if vector is None:
        vector = vectors[load.requests] = base.vector(dict(load.requests))
        vector.flags.writeable = False
    exclusive = None if load.exclusive is None else (i, load.exclusive[0], (load.namespace, load.exclusive[1], load.exclusive[2]))
    return _Held(i, vector, exclusive, None)


def _pod(load: _Load) -> Pod:
    """A pod holding `load`, for a snapshot built from scratch."""
    labels = {} if load.exclusive is None else {EXCLUSIVE_LABEL: load.exclusive[0], GROUP_LABEL: load.exclusive[1], UNIT_LABEL: load.exclusive[2]}
    requests = {name: f"{amount}m" for name, amount in load.requests}
    return Pod.model_validate({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": load.name, "namespace": load.namespace, "labels": labels},
        "spec": {"nodeName": load.node, "containers": [{"name": "load", "resources": {"requests": requests}}]},
    })
