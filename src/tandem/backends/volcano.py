"""Volcano: one PodGroup (`scheduling.volcano.sh/v1beta1`) per unit, HyperNodes for the topology.

- Unit gang: `minMember` is the sum of every role's minimum in pods; `minTaskMember`
  gives each single-pod role its minimum (the task is the pod annotation
  `volcano.sh/task-spec`, set to the role).
- Multi-pod roles get a `subGroupPolicy` entry instead: pods of the role grouped by the
  replica label (`matchLabelKeys`), `subGroupSize` pods per replica and `minSubGroups`
  complete replicas, so minimums count whole replicas and each replica is its own gang;
  the replica's required pack is that entry's `networkTopology`.
- Unit pack: `networkTopology {mode: hard, highestTierAllowed}`; a preferred-only pack is
  `mode: soft`, which carries no tier.
- Tiers, numbered exactly as Volcano's label discoverer numbers them (volcano-sh/volcano
  `pkg/controllers/hypernode/discovery/label/label.go`: `parseCfg` drops the hostname
  label, `generateHyperNodeInfo` numbers the rest from the narrowest up): a level whose
  label is `kubernetes.io/hostname` is a Node, not a tier; the narrowest other level is
  tier 1, the broadest tier T, and tandem's synthetic root (named after the
  ClusterTopology, tierName `cluster`) tier T + 1. So `highestTierAllowed` names the same
  level on discovered HyperNodes as on tandem's.
- A required pack at the hostname level (of a unit, or of a multi-pod replica) has no tier:
  it is the tier-1 pack (every host lies in one tier-1 HyperNode; Volcano tries each) plus
  required pod affinity on `kubernetes.io/hostname` among the unit's or replica's pods.
- Topology: a HyperNode per domain of every tier level. Tier-1 HyperNodes select their
  nodes by `labelMatch` on every level label of their path, hostname excluded: a node
  added to an existing tier-1 domain changes no HyperNode, and `rack-1` under two blocks
  stays two domains.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Collection, Mapping, Sequence

from tandem.api.kube import Node
from tandem.api.naming import HOSTNAME_LABEL, REPLICA_LABEL, topology_object_labels
from tandem.api.resources import ClusterTopology, InferenceGroup, Role, TopologyLevel
from tandem.backends.base import (
    EXCLUSIVE_AS_ANTI_AFFINITY,
    PREFERRED_AFFINITY_AS_POD_AFFINITY,
    Approximate,
    Backend,
    Full,
    Manifest,
    Replicas,
    Support,
    Unsupported,
    add_exclusive_anti_affinity,
    add_preferred_affinity,
    controller_only,
    topology_defining,
    unit_object_name,
    unit_selector,
)
from tandem.backends.domains import object_name
from tandem.backends.features import FEATURES, Feature
from tandem.backends.pods import pod_identity
from tandem.backends.priority import priority_class_field
from tandem.backends.topology_levels import group_problems, level_label_problems, refuse_levels
from tandem.errors import InputError, Problem

API_VERSION = "scheduling.volcano.sh/v1beta1"
HYPERNODE_API_VERSION = "topology.volcano.sh/v1alpha1"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_ANNOTATION = "volcano.sh/task-spec"
ROOT_TIER_NAME = "cluster"  # tierName of tandem's synthetic root, one tier above the broadest level
HOST_TIER = 1  # the tier a host pack asks for: every host lies within one tier-1 HyperNode

def tier_levels(topology: ClusterTopology) -> list[TopologyLevel]:
    """The levels that are Volcano tiers, broadest first: every level but the hostname one."""
    return [level for level in topology.spec.levels if level.node_label != HOSTNAME_LABEL]


def is_host_level(topology: ClusterTopology | None, level: str) -> bool:
    """True when `level` is labelled `kubernetes.io/hostname`: a Node to Volcano, not a tier."""
    known = topology_defining(topology, level)
    return known.spec.levels[known.depth(level)].node_label == HOSTNAME_LABEL


def tier(topology: ClusterTopology | None, level: str) -> int:
    """Volcano's tier for `level`, as its label discoverer numbers it: the narrowest level that
    is not the hostname is tier 1, each broader level one more."""
    known = topology_defining(topology, level)
    if is_host_level(known, level):
        raise InputError(
            Problem(
                "spec.topologyName",
                f"level {level!r} of ClusterTopology {known.metadata.name!r} is labelled {HOSTNAME_LABEL}: "
                "a host is a Node to Volcano, not a Volcano tier",
            )
        )
    names = [lv.name for lv in tier_levels(known)]
    return len(names) - names.index(level)


def pack_tier(topology: ClusterTopology | None, level: str) -> int:
    """`highestTierAllowed` for a required pack at `level`; a host pack asks for tier 1, which
    every host lies within (the host itself is kept by `add_host_affinity`)."""
    return HOST_TIER if is_host_level(topology, level) else tier(topology, level)


def _host_pack(which: str) -> Approximate:
    return Approximate(
        f"exact at every level but the hostname one ({which}). A host is no Volcano tier (its label discoverer "
        "makes none), so a host pack is the tier-1 pack plus required pod affinity on kubernetes.io/hostname among "
        "the pods packed: Volcano never splits them (its predicates plugin runs kube-scheduler's InterPodAffinity "
        "filter, counting pods allocated earlier in the session), but places the first pod without looking ahead, "
        "so within each tier-1 HyperNode it tries they may wait while another host would hold them all"
    )


UNIT_PACK = "networkTopology mode hard, highestTierAllowed"
ROLE_PACK = "subGroupPolicy networkTopology mode hard per replica"
PACK_FEATURES = ("unit-pack-required", "role-pack-required")


class VolcanoBackend(Backend):
    name = "volcano"
    scheduler_name = "volcano"

    def capabilities(self) -> Mapping[str, Support]:
        return {
            "replica-gang": Full("subGroupPolicy: subGroupSize pods per replica, grouped by the replica label"),
            "complete-replica-minimum": Full("subGroupPolicy minSubGroups counts whole replicas"),
            "unit-gang": Full("one PodGroup per unit; minMember is every role's minimum"),
            "role-minimums": Full("minTaskMember per single-pod role, minSubGroups per multi-pod role"),
            "minimums-before-extras": Approximate(
                "Volcano orders PodGroups by priority and queue, not minimums first: an extra replica of one unit "
                "may be placed before another unit's minimum"
            ),
            "unit-pack-required": _host_pack(UNIT_PACK),
            "unit-pack-preferred": Approximate(
                "mode soft names no tier: Volcano packs as tightly as it can (within the required tier, if any), "
                "not at this level first"
            ),
            "role-pack-required": _host_pack(ROLE_PACK),
            "role-pack-preferred": Approximate("dropped: a subGroupPolicy entry takes only a hard tier"),
            "affinity-required": Unsupported(
                "Volcano has no cross-role proximity constraint; pack the unit at that level instead, or use backend 'native'"
            ),
            "affinity-preferred": PREFERRED_AFFINITY_AS_POD_AFFINITY,
            "priority": Full("priorityClassName on the PodGroup and the pods"),
            "exclusive": Full(
                f"{EXCLUSIVE_AS_ANTI_AFFINITY}: Volcano's predicates plugin runs kube-scheduler's InterPodAffinity "
                "filter (predicate.PodAffinityEnable, on by default) and counts pods allocated in the same session"
            ),
            "gang-timeout": Approximate(
                "the PodGroup has no timeout; Volcano allocates a gang whole, so nothing is held while it waits"
            ),
            **controller_only(),
        }

    def support_for(self, feature: Feature, group: InferenceGroup, topology: ClusterTopology | None) -> Support:
        """A required pack is exact but at the hostname level; those uses are warned of in `extra_warnings`."""
        if feature.id == "unit-pack-required":
            return Full(UNIT_PACK)
        if feature.id == "role-pack-required":
            return Full(ROLE_PACK)
        return super().support_for(feature, group, topology)

    def extra_problems(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[Problem]:
        return group_problems(topology, level_label_problems(topology, "Volcano")) if topology is not None else []

    def extra_warnings(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[Problem]:
        """Each required pack at the hostname level over more than one pod: kept by pod affinity, see `_host_pack`."""
        if topology is None:
            return []
        host_packs = {path for path, _ in _host_packs(group, topology)}
        capabilities = self.capabilities()
        found = []
        for feature in FEATURES:
            if feature.id not in PACK_FEATURES:
                continue
            support = capabilities[feature.id]
            assert isinstance(support, Approximate)
            found += [
                Problem(usage.path, f"backend {self.label!r} approximates {feature.title} ({usage.detail}): {support.warning}")
                for usage in feature.detect(group, topology)
                if usage.path in host_packs
            ]
        return found

    # ------------------------------------------------------------------ group objects

    def unit_objects(
        self, group: InferenceGroup, topology: ClusterTopology | None, unit: int, manifest: Manifest | None = None,
        replicas: Replicas | None = None, alone: Collection[tuple[str, int]] = (),
    ) -> list[dict[str, Any]]:
        return [self._pod_group(group, unit, topology)]

    def _pod_group(self, group: InferenceGroup, unit: int, topology: ClusterTopology | None) -> dict[str, Any]:
        roles = group.spec.roles
        spec: dict[str, Any] = {"minMember": sum(r.minimum * r.pods_per_replica for r in roles)}
        tasks = {r.name: r.minimum for r in roles if r.pods_per_replica == 1 and r.minimum > 0}
        if tasks:
            spec["minTaskMember"] = dict(sorted(tasks.items()))
        network = self._network_topology(group.spec.topology.pack.required, group.spec.topology.pack.preferred, topology)
        if network:
            spec["networkTopology"] = network
        spec |= priority_class_field(group.spec.priority)
        spec["queue"] = self.queue(group)
        policies = []
        for role in roles:
            if role.pods_per_replica == 1:
                continue
            policy: dict[str, Any] = {
                "name": role.name,
                "labelSelector": {"matchLabels": unit_selector(group, unit, role.name)},
                "matchLabelKeys": [REPLICA_LABEL],
                "subGroupSize": role.pods_per_replica,
                "minSubGroups": role.minimum,
            }
            if role.topology.pack.required is not None:
                policy["networkTopology"] = {"mode": "hard", "highestTierAllowed": pack_tier(topology, role.topology.pack.required)}
            policies.append(policy)
        if policies:
            spec["subGroupPolicy"] = policies
        return {
            "apiVersion": API_VERSION,
            "kind": "PodGroup",
            "metadata": {"name": unit_object_name(group, unit), "namespace": group.metadata.namespace, "labels": unit_selector(group, unit)},
            "spec": spec,
        }

    @staticmethod
    def _network_topology(required: str | None, preferred: str | None, topology: ClusterTopology | None) -> dict[str, Any] | None:
        if required is not None:
            return {"mode": "hard", "highestTierAllowed": pack_tier(topology, required)}
        if preferred is not None:
            return {"mode": "soft"}
        return None

    def _decorate(self, pod: dict[str, Any], group: InferenceGroup, topology: ClusterTopology | None) -> None:
        unit, role, _, _ = pod_identity(pod)
        annotations = pod["metadata"].setdefault("annotations", {})
        annotations[GROUP_ANNOTATION] = unit_object_name(group, unit)
        annotations[TASK_ANNOTATION] = role
        add_preferred_affinity(pod, group, topology)
        add_exclusive_anti_affinity(pod, group, topology)
        add_host_affinity(pod, group, topology)

    # ------------------------------------------------------------------ topology

    def render_topology(self, topology: ClusterTopology, nodes: Sequence[Node]) -> list[dict[str, Any]]:
        """A HyperNode per domain of every tier level, under a root named after the ClusterTopology.

        Only the nodes carrying every level label count (the others are excluded from
        tandem's placement too). Tier-1 HyperNodes select nodes by label, so a node joining
        or leaving an existing tier-1 domain changes no HyperNode. Paths are computed once,
        from plain label dicts: this runs on every node change of a 65,536-node cluster.
        """
        refuse_levels(level_label_problems(topology, "Volcano"), "nodeLabel")
        levels = topology.spec.levels
        all_keys = [level.node_label for level in levels]
        tiered = tier_levels(topology)
        keys = [level.node_label for level in tiered]
        paths = _tier_paths(nodes, keys, needs_host=len(keys) < len(all_keys))
        if not paths:
            raise InputError(
                Problem(
                    "spec.levels",
                    f"no node carries every level label of ClusterTopology {topology.metadata.name!r} "
                    f"({', '.join(all_keys)}): Volcano HyperNodes are built from the nodes",
                )
            )
        count = len(tiered)
        names = [level.name for level in tiered]
        root = topology.metadata.name
        if count == 0:  # hostname only: the root is tier 1 and holds every labelled node
            selector = {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "Exists"}]}
            return [_hypernode(root, root, 1, ROOT_TIER_NAME, _node_members(selector))]
        domains = [sorted({path[:depth] for path in paths}) for depth in range(count + 1)]
        hypernode_names = {prefix: _path_name(root, names, prefix) for depth in range(1, count + 1) for prefix in domains[depth]}
        hypernode_names[()] = root
        children: dict[tuple[str, ...], list[str]] = {}
        for depth in range(1, count + 1):
            for prefix in domains[depth]:
                children.setdefault(prefix[:-1], []).append(hypernode_names[prefix])
        objects = [_hypernode(root, root, count + 1, ROOT_TIER_NAME, _hypernode_members(children[()]))]
        for depth in range(1, count + 1):
            tier_number, tier_name = count - depth + 1, names[depth - 1]
            for prefix in domains[depth]:
                if depth < count:
                    members = _hypernode_members(children[prefix])
                else:
                    members = _node_members({"matchLabels": dict(sorted(zip(keys, prefix)))})
                objects.append(_hypernode(root, hypernode_names[prefix], tier_number, tier_name, members))
        return objects


def _tier_paths(nodes: Sequence[Node], keys: list[str], needs_host: bool) -> set[tuple[str, ...]]:
    """The distinct values of `keys` (the tier labels, broadest first) over the nodes carrying all
    of them, and the hostname label when `needs_host`. One dict lookup per label and node."""
    values = itemgetter(*keys) if len(keys) > 1 else (lambda labels: (labels[keys[0]],)) if keys else (lambda labels: ())
    paths: set[tuple[str, ...]] = set()
    add = paths.add
    for node in nodes:
        labels = node.metadata.labels
        if needs_host and HOSTNAME_LABEL not in labels:
            continue
        try:
            add(values(labels))
        except KeyError:
            continue
    return paths


def _host_packs(group: InferenceGroup, topology: ClusterTopology | None) -> list[tuple[str, Role | None]]:
    """(field path, role or None for the unit) of each required pack at the hostname level over more
    than one pod: a unit's, and each multi-pod replica's (kept even when the unit's implies it,
    so each pod says what it was asked)."""
    if topology is None:
        return []
    names = topology.level_names()

    def host(level: str | None) -> bool:
        return level is not None and level in names and is_host_level(topology, level)

    roles = group.spec.roles
    packs: list[tuple[str, Role | None]] = []
    if host(group.spec.topology.pack.required) and sum(role.replicas * role.pods_per_replica for role in roles) > 1:
        packs.append(("spec.topology.pack.required", None))
    return packs + [
        (f"spec.roles[{i}].topology.pack.required", role)
        for i, role in enumerate(roles)
        if role.pods_per_replica > 1 and role.replicas > 0 and host(role.topology.pack.required)
    ]


def add_host_affinity(pod: dict[str, Any], group: InferenceGroup, topology: ClusterTopology | None) -> None:
    """A host pack as required pod affinity on kubernetes.io/hostname towards the other pods packed.

    The first of them to be placed matches its own term (kube-scheduler then lets it go
    anywhere); each later one must join it. Volcano's predicates plugin adds every pod it
    allocates to its snapshot, so pods of one gang see each other within a session.
    """
    unit, role, replica, _ = pod_identity(pod)
    terms = []
    for _, packed in _host_packs(group, topology):
        if packed is None:
            selector = unit_selector(group, unit)
        elif packed.name == role:
            selector = dict(sorted((unit_selector(group, unit, role) | {REPLICA_LABEL: str(replica)}).items()))
        else:
            continue
        terms.append({"labelSelector": {"matchLabels": selector}, "topologyKey": HOSTNAME_LABEL})
    if terms:
        affinity = pod["spec"].setdefault("affinity", {})
        affinity.setdefault("podAffinity", {}).setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).extend(terms)


def hypernode_name(topology: ClusterTopology, path: tuple[str, ...]) -> str:
    """`<topology>-<level>-<value>-...` along a path of tier-level values (hostname excluded),
    so equal values under different parents differ."""
    return _path_name(topology.metadata.name, [level.name for level in tier_levels(topology)], path)


def _path_name(root: str, names: list[str], path: tuple[str, ...]) -> str:
    parts = [root]
    for name, value in zip(names, path):
        parts += [name, value]
    return object_name(*parts)


def _node_members(selector: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "Node", "selector": {"labelMatch": selector}}]


def _hypernode_members(children: list[str]) -> list[dict[str, Any]]:
    return [{"type": "HyperNode", "selector": {"exactMatch": {"name": child}}} for child in children]


def _hypernode(topology: str, name: str, tier_number: int, tier_name: str, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": HYPERNODE_API_VERSION,
        "kind": "HyperNode",
        "metadata": {"name": name, "labels": topology_object_labels(topology)},
        "spec": {"tier": tier_number, "tierName": tier_name, "members": members},
    }
