"""The simulator's figures at each event time, kept up to date with what changed.

Counting every pod of every group at every event time cost more than the controller at
2,048 nodes. A `Sampler` is told the changes the runner's `ClusterIndex` found since the
last sample and keeps: the GPUs bound to each node (so allocation and over-capacity
follow pod events), and each group's figures while neither the group nor any of its pods
changed (the index's serial per group says when). The figures are the ones the
controller counts (complete replicas, `cluster/replicas.py`), GPUs per pod, failed pods
left out: the same as counting everything again, at the cost of what changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from tandem.api.naming import GPU_RESOURCE, ROLE_LABEL, UNIT_LABEL
from tandem.api.quantity import MILLI, parse_quantity
from tandem.api.resources import InferenceGroup
from tandem.cluster.index import Change, ClusterIndex
from tandem.cluster.payloads import PodPayload, as_pod, as_pods
from tandem.cluster.pods import assigned_node, pod_failed, pod_gpus
from tandem.cluster.replicas import is_functional, unit_replicas


@dataclass(frozen=True)
class GroupFigures:
    functional: int
    partial_gpus: int
    partially_placed: tuple[str, ...]  # "group[unit]" holding GPUs with a role below its minimum placed
    ready: dict[str, int]
    desired: dict[str, int]
    gpus: int  # of its bound pods


@dataclass
class Sampler:
    bound: dict[str, int] = field(default_factory=dict)  # node -> GPUs of bound, not failed pods
    allocatable: dict[str, int] = field(default_factory=dict)  # node -> GPUs
    allocated: int = 0
    over: set[str] = field(default_factory=set)
    _gpus: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)  # pod -> (node, GPUs) it counts for
    _groups: dict[tuple[str, str], tuple[Any, ...]] = field(default_factory=dict)  # (rv, serial, figures)
    _typed: dict[str, tuple[str, InferenceGroup | None]] = field(default_factory=dict)  # uid -> (uid/generation, model)

    def update(self, changes: list[Change]) -> None:
        touched: set[str] = set()
        for change in changes:
            if change.kind == "Node":
                name = change.name[1]
                if change.after is None:
                    self.allocatable.pop(name, None)
                else:
                    amount = change.after["status"]["allocatable"].get(GPU_RESOURCE, 0)
                    self.allocatable[name] = parse_quantity(amount) // MILLI
                touched.add(name)
            elif change.kind == "Pod":
                before = self._gpus.pop(change.name, None)
                if before is not None:
                    self.bound[before[0]] -= before[1]
                    self.allocated -= before[1]
                    touched.add(before[0])
                pod = None if change.after is None else as_pod(change.after)
                node = None if pod is None or pod_failed(pod) else pod["spec"].get("nodeName")
                if pod is not None and node:
                    gpus = pod_gpus(pod)
                    self._gpus[change.name] = (node, gpus)
                    self.bound[node] = self.bound.get(node, 0) + gpus
                    self.allocated += gpus
                    touched.add(node)
        for node in touched:
            if node in self.allocatable and self.bound.get(node, 0) > self.allocatable[node]:
                self.over.add(node)
            else:
                self.over.discard(node)

    def group(self, index: ClusterIndex, key: tuple[str, str], raw: dict[str, Any]) -> GroupFigures | None:
        """The group's figures (None when it does not validate), kept while it and its pods hold."""
        serial = index.serial.get(key, 0)
        kept = self._groups.get(key)
        version = raw["metadata"].get("resourceVersion")
        if kept is not None and version and kept[0] == version and kept[1] == serial:
            return kept[2]
        typed = self._model(raw)
        figures = None if typed is None else _figures(typed, [p for p in as_pods(index.pods_of.get(key, {})).values() if not pod_failed(p)])
        self._groups[key] = (version, serial, figures)
        return figures

    def _model(self, raw: dict[str, Any]) -> InferenceGroup | None:
        meta = raw["metadata"]
        stamp = f"{meta.get('uid')}/{meta.get('generation')}"
        kept = self._typed.get(meta.get("uid", ""))
        if kept is None or kept[0] != stamp:
            try:
                kept = (stamp, InferenceGroup.model_validate({k: v for k, v in raw.items() if k != "status"}))
            except ValidationError:
                kept = (stamp, None)
            self._typed[meta.get("uid", "")] = kept
        return kept[1]


def _figures(group: InferenceGroup, pods: list[PodPayload]) -> GroupFigures:
    key = f"{group.metadata.namespace}/{group.metadata.name}"
    ready = {r.name: 0 for r in group.spec.roles}
    desired = {r.name: r.replicas * group.spec.replicas for r in group.spec.roles}
    held = sum(pod_gpus(p) for p in pods if p["spec"].get("nodeName"))
    members_of: dict[int, list[PodPayload]] = {}
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        members_of.setdefault(int(pod["metadata"]["labels"][UNIT_LABEL]), []).append(pod)
    functional = partial = 0
    partially_placed = []
    for unit in range(group.spec.replicas):
        members = members_of.get(unit, [])
        replicas = unit_replicas(members, group)
        for role_name, rs in replicas.items():
            if role_name in ready:
                ready[role_name] += sum(1 for r in rs if r.phase == "Ready")
        if is_functional(replicas, group):
            functional += 1
        placed = True
        for role in group.spec.roles:
            mine = [p for p in members if p["metadata"]["labels"].get(ROLE_LABEL) == role.name]
            placed &= sum(1 for p in mine if assigned_node(p)) // role.pods_per_replica >= role.minimum
        if not placed and any(assigned_node(p) for p in members):
            # Holding GPUs without every minimum placed: the waste a unit gang prevents.
            partially_placed.append(f"{key}[{unit}]")
            partial += sum(pod_gpus(p) for p in members if assigned_node(p))
    return GroupFigures(functional, partial, tuple(partially_placed), ready, desired, held)
