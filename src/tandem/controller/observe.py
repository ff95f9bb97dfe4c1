"""Observe: one snapshot of everything a pass decides from, read once.

Six kinds (InferenceGroups, ClusterTopologies, Nodes, Pods, and the Services and
ConfigMaps tandem made; with provisioning on, its ProvisioningRequests and PodTemplates too) through the `Reader` of one consistent snapshot, into the
memo's `ClusterIndex`: only what changed since the last pass when the reader can say
(see `index.py`), everything otherwise. Pods and companions come grouped by the group
that owns them; each group is validated once per version (see `validity`), and the
Nodes and Pods that changed are handed to the placement snapshot (`topology.incremental`)
as they are seen, so a pass costs what changed, not what exists. Nothing here writes, and
nothing later in the pass reads the cluster again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Mapping

from pydantic import ValidationError

from tandem.api.kube import Node, Pod
from tandem.api.naming import service_name
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.cluster.index import COMPANION_KINDS, Change, GroupKey, Name
from tandem.cluster.payloads import GroupPayload, PodPayload, as_group, as_pod, as_pods
from tandem.cluster.pods import assigned_node, pod_failed
from tandem.cluster.ports import Object, Reader
from tandem.controller.memo import Memo, version_key
from tandem.controller.validity import group_problems, topologies_of
from tandem.errors import Problem
from tandem.topology.snapshot import NodeFacts

# What a pass reads, and so what a world must list (and an operator watch): the kinds here.
# (The ProvisioningRequests and PodTemplates of provisioning are read only when it is on:
# `ProvisioningSettings.kinds`; a cluster without their API must not stall the others.)
OBSERVED_KINDS = ("InferenceGroup", "ClusterTopology", "Node", "Pod", "Service", "ConfigMap")


@dataclass(frozen=True)
class GroupState:
    raw: GroupPayload
    typed: InferenceGroup | None  # None when the object does not even parse
    problems: tuple[Problem, ...]  # empty for a valid group
    pods: tuple[PodPayload, ...]  # the group's pods, deleting ones included, by name
    companions: tuple[Object, ...] = ()  # its headless Service and peers ConfigMaps
    # What changes whenever any input of deciding the group changes (itself, a pod, a
    # companion; the ClusterTopologies are keyed apart); None when an input has no version.
    inputs: tuple[Any, ...] | None = None

    key: tuple[str, str] = ("", "")  # (namespace, name)

    @property
    def valid(self) -> bool:
        return self.typed is not None and not self.problems


@dataclass(frozen=True)
class ClusterState:
    """The pass's view. `nodes` and `pods` are the memo's index, shared: read-only, and
    valid until the next `observe` with the same memo."""

    groups: tuple[GroupState, ...]
    topologies: dict[str, ClusterTopology]
    nodes: Mapping[Name, Object]  # by ("", name)
    pods: Mapping[Name, PodPayload]  # every pod, by (namespace, name) (other workloads hold capacity too)
    deleting_groups: tuple[Object, ...] = field(default_factory=tuple)
    topology_versions: tuple[tuple[str, str], ...] = ()
    memo: Memo = field(default_factory=Memo, compare=False, repr=False)  # validated models, by version
    services: Mapping[Name, Object] = field(default_factory=dict)  # every Service, by (namespace, name): the index's
    # The delegated backends' kinds the API server serves (`Discovery.served`), and the
    # PriorityClasses (by ("", name)) a delegated group's priority may need.
    served: frozenset[str] = frozenset()
    priority_classes: Mapping[Name, Object] = field(default_factory=dict)

    def settled_key(self, group: GroupState) -> tuple[Any, ...] | None:
        """What deciding `group` read, as versions: its inputs, the ClusterTopologies and
        the Service named like it, whoever's (None when an object has no uid or version)."""
        if group.inputs is None:
            return None
        named = self.service_named_like(group)
        return (*group.inputs, self.topology_versions, None if named is None else named["metadata"].get("resourceVersion"), self.served)

    def service_named_like(self, group: GroupState) -> Object | None:
        """The Service with the name the group's headless Service has, if one exists (it
        may not be the group's: a name taken by someone else is reported, not fought over)."""
        namespace, name = group.key
        return self.services.get((namespace, service_name(name)))

    def live_groups(self) -> set[tuple[str, str, str]]:
        """(kind, uid, resourceVersion) of every group a memo entry may be about."""
        return {("InferenceGroup", g.raw["metadata"].get("uid", ""), g.raw["metadata"].get("resourceVersion", "")) for g in self.groups}


def observe(
    reader: Reader, memo: Memo | None = None, kinds: tuple[str, ...] = OBSERVED_KINDS, served: frozenset[str] = frozenset()
) -> ClusterState:
    """`memo` remembers the index and validated models across passes (see `memo.py`); the
    state is the same without it, only dearer. `kinds`: what to read, OBSERVED_KINDS and
    whatever an option adds (the ProvisioningRequests and PodTemplates of provisioning,
    the gang kinds of delegated backends that are `served`)."""
    memo = Memo() if memo is None else memo
    if served != memo.served:
        memo.served = served
    served = memo.served  # the same object while the same kinds are served: every group's settled key holds it
    index = memo.index
    changes = index.refresh(reader, kinds)
    _follow(memo, changes)
    raw_topologies = [obj for _, obj in sorted(index.of_kind("ClusterTopology").items())]
    topology_versions = tuple((t["metadata"]["name"], t["metadata"].get("resourceVersion", "")) for t in raw_topologies)
    topologies = _topologies(memo, raw_topologies, topology_versions)
    stamp = (index.groups_serial, topology_versions)
    if memo.groups is None or memo.groups[0] != stamp:  # a group, or something of one, changed
        groups, deleting = [], []
        for name, raw in sorted(index.of_kind("InferenceGroup").items()):
            if raw["metadata"].get("deletionTimestamp"):
                deleting.append(raw)  # its pods go with it (owner references); nothing to decide
                continue
            groups.append(_group_state(memo, raw, (raw["metadata"].get("namespace", "default"), name[1]), topologies, topology_versions))
        memo.groups = (stamp, tuple(groups), tuple(deleting))
    _, kept, gone = memo.groups
    return ClusterState(
        kept, topologies, index.of_kind("Node"), as_pods(index.of_kind("Pod")), gone, topology_versions, memo, index.of_kind("Service"),
        served, index.of_kind("PriorityClass"),
    )


def _group_state(
    memo: Memo, raw: Object, key: GroupKey, topologies: dict[str, ClusterTopology], topology_versions: tuple[tuple[str, str], ...]
) -> GroupState:
    """The group's state, kept while neither it, its pods, its companions nor the topologies change."""
    index = memo.index
    serial = index.serial.get(key, 0)
    kept = memo.group_states.get(key)
    if kept is not None and kept[0] is raw and kept[1] == serial and kept[2] == topology_versions:
        state: GroupState = kept[3]
        return state
    validity = version_key("InferenceGroup", raw, topology_versions)
    if validity is None:
        typed, problems = group_problems(raw, topologies)
    else:
        typed, problems = memo.get(validity, lambda: group_problems(raw, topologies))
    pods = tuple(as_pod(obj) for _, obj in sorted(index.pods_of.get(key, {}).items()))
    companions = tuple(obj for _, obj in sorted(index.companions_of.get(key, {}).items(), key=_companion_order))
    meta = raw["metadata"]
    versioned = all(o["metadata"].get("uid") and o["metadata"].get("resourceVersion") for o in (raw, *pods, *companions))
    inputs = ("InferenceGroup", meta.get("uid"), meta.get("resourceVersion"), serial) if versioned else None
    fresh = GroupState(as_group(raw), typed, tuple(problems), pods, companions, inputs, key)
    memo.group_states[key] = (raw, serial, topology_versions, fresh)
    return fresh


def _companion_order(item: tuple[tuple[str, str, str], Object]) -> tuple[int, str, str]:
    kind, namespace, name = item[0]
    return (COMPANION_KINDS.index(kind), namespace, name)


def _topologies(memo: Memo, raws: list[Object], versions: tuple[tuple[str, str], ...]) -> dict[str, ClusterTopology]:
    if all(version for _, version in versions):
        return memo.get(("ClusterTopologies", versions), lambda: topologies_of(raws)[0])
    return topologies_of(raws)[0]


def _follow(memo: Memo, changes: list[Change]) -> None:
    """Hand the Nodes and Pods that changed to the placement snapshot, validated; one that
    does not validate is left out, with a note for the next placement. A change the
    snapshot cannot see (a heartbeat, a pod's IP) costs a comparison, not a validation."""
    cache, notes, seen = memo.placement, memo.unusable, memo.placement_keys
    for change in changes:
        if change.kind not in ("Node", "Pod"):
            continue
        obj = change.after
        note_key = (change.kind, change.name)
        relevant = None if obj is None else _digest(_node_facts(obj) if change.kind == "Node" else _pod_facts(obj))
        if relevant is not None and seen.get(note_key) == relevant:
            continue
        if relevant is None:
            seen.pop(note_key, None)
        else:
            seen[note_key] = relevant
        notes.pop(note_key, None)
        if change.kind == "Node":
            name = change.name[1]
            model = None if obj is None else _model(Node, obj)
            if isinstance(model, str):
                notes[note_key] = f"node {name} skipped: {model}"
                model = None
            cache.node(name, _version(obj), None if model is None else NodeFacts.of(model))
            continue
        pod = None if obj is None else as_pod(obj)
        node = assigned_node(pod) if pod is not None and not pod_failed(pod) else None
        model = None if obj is None or node is None else _model(Pod, {**obj, "spec": {**obj.get("spec", {}), "nodeName": node}})
        if isinstance(model, str):
            notes[note_key] = f"pod {change.name[1]} not counted: {model}"
            model = None
        cache.pod(change.name, _version(obj), model)


def _node_facts(node: Object) -> str:
    """What of a Node the placement snapshot reads (labels, capacity, usability, taints), as text."""
    ready = [c.get("status") for c in (node.get("status") or {}).get("conditions") or () if isinstance(c, dict) and c.get("type") == "Ready"]
    return repr((node["metadata"].get("labels"), (node.get("status") or {}).get("allocatable"), node.get("spec"), ready))


def _pod_facts(obj: Object) -> str:
    """What of a Pod the placement snapshot reads (where it runs, its phase, its requests,
    the labels of an exclusive unit), as text: a change of anything else is no change to it."""
    pod = as_pod(obj)
    spec, meta = obj.get("spec") or {}, pod["metadata"]
    resources = [[c.get("resources") for c in spec.get(part) or () if isinstance(c, dict)] for part in ("containers", "initContainers")]
    return repr((assigned_node(pod), pod_failed(pod), (pod.get("status") or {}).get("phase"), resources, spec.get("overhead"),
                 meta.get("labels"), meta.get("namespace"), len(spec.get("containers") or ())))


def _digest(facts: str) -> bytes:
    """16 bytes for the facts' text: remembered for every Node and Pod, where the text
    itself would cost hundreds of bytes each (a 128-bit digest does not collide by chance)."""
    return hashlib.blake2b(facts.encode(), digest_size=16).digest()


def _model(model: Any, body: Object) -> Any:
    """The model of `body`, or the first validation message."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        return str(exc.errors()[0]["msg"])


def _version(obj: Object | None) -> tuple[Any, ...]:
    if obj is None:
        return ()
    meta = obj["metadata"]
    return (meta.get("uid"), meta.get("resourceVersion"), id(obj) if not meta.get("resourceVersion") else None)
