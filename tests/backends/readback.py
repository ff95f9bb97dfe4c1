"""Read a group's shape back from rendered objects, one reader per backend, written independently
of the renderers: only the scheduler's own fields (and the level a node label, tier or layer
names in the scheduler's own topology objects) are used, never tandem's labels, except to
count the pods a backend leaves implicit and to evaluate a required pod affinity's selector
as the scheduler would (Volcano keeps a host pack that way).

A shape is what a scheduler must know to keep tandem's promises: per unit and role the
replicas, the minimum and the pods per replica, and the levels of the packs it expresses.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tandem.api.resources import ClusterTopology, InferenceGroup


@dataclass(frozen=True)
class RoleShape:
    replicas: int
    minimum: int
    pods: int


@dataclass
class Shape:
    roles: dict[str, RoleShape] = field(default_factory=dict)
    unit_required: str | None = None
    unit_preferred: str | None = None
    role_required: dict[str, str] = field(default_factory=dict)  # multi-pod roles only
    role_preferred: dict[str, str] = field(default_factory=dict)


def expected(group: InferenceGroup, fields: set[str], topology: ClusterTopology | None = None) -> list[Shape]:
    """The group's shape per unit, keeping only the pack fields a backend expresses."""
    pack = group.spec.topology.pack
    shape = Shape(
        roles={r.name: RoleShape(r.replicas, r.minimum, r.pods_per_replica) for r in group.spec.roles},
        unit_required=pack.required if "unit_required" in fields else None,
        unit_preferred=(pack.preferred if pack.preferred != pack.required else None) if "unit_preferred" in fields else None,
    )
    if "host_pack_by_pod_affinity" in fields and topology is not None and pack.required is not None:
        # No tier names a host, and one pod needs no affinity to share it: a host pack over at
        # most one pod leaves only the tier-1 pack it is rendered as (tier 1: the narrowest
        # level but the hostname, or the root 'cluster').
        if _label_of(topology, pack.required) == HOSTNAME and sum(r.replicas * r.pods_per_replica for r in group.spec.roles) <= 1:
            tiered = [level.name for level in topology.spec.levels if level.node_label != HOSTNAME]
            shape.unit_required = tiered[-1] if tiered else "cluster"
    if "unit_preferred_alone" in fields and pack.required is None:
        shape.unit_preferred = pack.preferred
    for role in group.spec.roles:
        if role.pods_per_replica > 1:
            if "role_required" in fields and role.topology.pack.required:
                shape.role_required[role.name] = role.topology.pack.required
            preferred = role.topology.pack.preferred
            if "role_preferred" in fields and preferred and preferred != role.topology.pack.required:
                shape.role_preferred[role.name] = preferred
    return [shape for _ in range(group.spec.replicas)]


def _by_label(topology: ClusterTopology, label: str) -> str:
    return next(level.name for level in topology.spec.levels if level.node_label == label)


def _label_of(topology: ClusterTopology, name: str) -> str:
    return next(level.node_label for level in topology.spec.levels if level.name == name)


HOSTNAME = "kubernetes.io/hostname"


def _kind(objects: list[dict[str, Any]], kind: str, api_prefix: str = "") -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind and o["apiVersion"].startswith(api_prefix)]


def _pod_counts(objects: list[dict[str, Any]], unit_of: Any) -> dict[tuple[Any, str], tuple[int, int]]:
    """(unit key, role) -> (replicas, pods per replica) from the pods, for fields a backend leaves implicit."""
    seen: dict[tuple[Any, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod in _kind(objects, "Pod"):
        labels = pod["metadata"]["labels"]
        seen[(unit_of(pod), labels["tandem.dev/role"])][labels["tandem.dev/replica"]] += 1
    return {key: (len(replicas), max(replicas.values())) for key, replicas in seen.items()}


# ----------------------------------------------------------------------------- volcano


def _matches(selector: dict[str, Any], pod: dict[str, Any]) -> bool:
    labels = pod["metadata"].get("labels", {})
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())


def _volcano_host_packs(pods: list[dict[str, Any]], policies: dict[str, dict[str, Any]]) -> tuple[str | None, dict[str, str]]:
    """Packs kept by required pod affinity. A term whose selector is a pod's subgroup as Volcano
    defines it (its subGroupPolicy entry's labelSelector and the pod's values of `matchLabelKeys`)
    packs that role's replicas; any other term that takes every pod of the PodGroup packs the
    unit. Returns (unit topologyKey, role -> topologyKey)."""
    unit, replicas = None, {}
    for pod in pods:
        role = pod["metadata"]["annotations"]["volcano.sh/task-spec"]
        labels = pod["metadata"]["labels"]
        terms = pod["spec"].get("affinity", {}).get("podAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", [])
        for term in terms:
            selector = term["labelSelector"].get("matchLabels", {})
            if role in policies:
                policy = policies[role]
                subgroup = policy["labelSelector"]["matchLabels"] | {key: labels[key] for key in policy["matchLabelKeys"]}
                if selector == subgroup:
                    replicas[role] = term["topologyKey"]
                    continue
            if all(_matches(term["labelSelector"], other) for other in pods):
                unit = term["topologyKey"]
    return unit, replicas


def volcano(objects: list[dict[str, Any]], topology: ClusterTopology, roles: list[str]) -> list[Shape]:
    tiers = {o["spec"]["tier"]: o["spec"]["tierName"] for o in _kind(objects, "HyperNode")}
    counts = _pod_counts(objects, lambda pod: pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"])
    pods_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for pod in _kind(objects, "Pod"):
        pods_of[pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]].append(pod)
    shapes = []
    for group in sorted(_kind(objects, "PodGroup", "scheduling.volcano.sh"), key=lambda o: int(o["metadata"]["name"].rsplit("-", 1)[1])):
        spec, name = group["spec"], group["metadata"]["name"]
        policies = {p["name"]: p for p in spec.get("subGroupPolicy", [])}
        shape = Shape()
        for role in roles:
            replicas, _ = counts.get((name, role), (0, 0))
            if role in policies:
                pods, minimum = policies[role]["subGroupSize"], policies[role]["minSubGroups"]
                if "networkTopology" in policies[role]:
                    shape.role_required[role] = tiers[policies[role]["networkTopology"]["highestTierAllowed"]]
            else:
                pods, minimum = 1, spec.get("minTaskMember", {}).get(role, 0)
            shape.roles[role] = RoleShape(replicas, minimum, pods)
        assert spec["minMember"] == sum(r.minimum * r.pods for r in shape.roles.values())
        network = spec.get("networkTopology", {})
        if network.get("mode") == "hard":
            shape.unit_required = tiers[network["highestTierAllowed"]]
        unit_host, replica_hosts = _volcano_host_packs(pods_of[name], policies)
        if unit_host is not None:
            shape.unit_required = _by_label(topology, unit_host)
        for role, label in replica_hosts.items():
            shape.role_required[role] = _by_label(topology, label)
        shapes.append(shape)
    return shapes


# ----------------------------------------------------------------------------- koordinator


def koordinator(objects: list[dict[str, Any]], topology: ClusterTopology, roles: list[str]) -> list[Shape]:
    (cnt,) = _kind(objects, "ClusterNetworkTopology")
    layers = {}
    for entry in cnt["spec"]["networkTopologySpec"]:
        if "labelKey" in entry:
            layers[entry["topologyLayer"]] = _by_label(topology, entry["labelKey"][0])
        elif topology.spec.levels[-1].node_label == "kubernetes.io/hostname":
            layers[entry["topologyLayer"]] = topology.spec.levels[-1].name
    pod_groups = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in _kind(objects, "PodGroup", "scheduling.sigs.k8s.io")}
    counts = _pod_counts(objects, lambda pod: pod["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"])
    gangs: dict[str, list[str]] = {}
    for key, group in pod_groups.items():
        members = json.loads(group["metadata"]["annotations"]["gang.scheduling.koordinator.sh/groups"])
        assert key in members
        gangs.setdefault(json.dumps(sorted(members)), sorted(members))
    shapes = []
    def unit_of(members: list[str]) -> int:
        name = members[0].split("/")[1]
        role = next(r for r in roles if name.endswith(f"-{r}"))
        return int(name[: -len(role) - 1].rsplit("-", 1)[1])

    for members in sorted(gangs.values(), key=unit_of):
        shape = Shape()
        specs = set()
        for key in members:
            group = pod_groups[key]
            role = next(r for r in roles if key.endswith(f"-{r}"))
            replicas, pods = counts.get((group["metadata"]["name"], role), (0, 1))
            total = int(group["metadata"]["annotations"]["gang.scheduling.koordinator.sh/total-number"])
            assert total == replicas * pods
            shape.roles[role] = RoleShape(replicas, group["spec"]["minMember"] // pods, pods)
            specs.add(group["metadata"]["annotations"].get("gang.scheduling.koordinator.sh/network-topology-spec"))
        assert len(specs) == 1, "one gather strategy per GangGroup"
        spec = specs.pop()
        for rule in json.loads(spec)["gatherStrategy"] if spec else []:
            field_name = "unit_required" if rule["strategy"] == "MustGather" else "unit_preferred"
            setattr(shape, field_name, layers[rule["layer"]])
        shapes.append(shape)
    return shapes


# ----------------------------------------------------------------------------- kai


def kai(objects: list[dict[str, Any]], topology: ClusterTopology, roles: list[str]) -> list[Shape]:
    (kai_topology,) = _kind(objects, "Topology", "kai.scheduler")
    assert [level["nodeLabel"] for level in kai_topology["spec"]["levels"]] == [lv.node_label for lv in topology.spec.levels]
    counts = _pod_counts(objects, lambda pod: pod["metadata"]["annotations"]["pod-group-name"])
    shapes = []
    for group in sorted(_kind(objects, "PodGroup", "scheduling.run.ai"), key=lambda o: int(o["metadata"]["name"].rsplit("-", 1)[1])):
        spec = group["spec"]
        shape = Shape()
        leaves: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for subgroup in spec["subGroups"]:
            if "parent" in subgroup:
                leaves[subgroup["parent"]].append(subgroup)
        for role in roles:
            role_leaves = leaves.get(role, [])
            mins = [leaf["minMember"] for leaf in role_leaves if "minMember" in leaf]
            _, counted = counts.get((group["metadata"]["name"], role), (0, 1))
            pods = mins[0] if mins else counted
            shape.roles[role] = RoleShape(len(role_leaves), len(mins), pods)
            for leaf in role_leaves:
                constraint = leaf.get("topologyConstraint", {})
                if "requiredTopologyLevel" in constraint:
                    shape.role_required[role] = _by_label(topology, constraint["requiredTopologyLevel"])
                if "preferredTopologyLevel" in constraint:
                    shape.role_preferred[role] = _by_label(topology, constraint["preferredTopologyLevel"])
        assert spec.get("minMember", 0) == sum(r.minimum * r.pods for r in shape.roles.values())
        constraint = spec.get("topologyConstraint", {})
        if constraint:
            assert constraint["topology"] == kai_topology["metadata"]["name"]
        if "requiredTopologyLevel" in constraint:
            shape.unit_required = _by_label(topology, constraint["requiredTopologyLevel"])
        if "preferredTopologyLevel" in constraint:
            shape.unit_preferred = _by_label(topology, constraint["preferredTopologyLevel"])
        shapes.append(shape)
    return shapes


# ----------------------------------------------------------------------------- kueue


def kueue(objects: list[dict[str, Any]], topology: ClusterTopology, roles: list[str]) -> list[Shape]:
    """Prebuilt Workloads, each a pod group Kueue admits whole: per unit a base `<group>-<unit>`
    (the minimums) and an extra `<base>-<role>-<replica>` per replica beyond them. Kueue relates
    none of them; the names say which unit an extra belongs to. A Workload's PodSets give the
    counts and levels; a pod joins its Workload by pod-group-name, a PodSet by its role-hash, and
    its rank is the label its pod-group-pod-index-label names (ranks restart per Workload)."""
    prefix = "kueue.x-k8s.io/"
    (kueue_topology,) = _kind(objects, "Topology", "kueue.x-k8s.io")
    assert [level["nodeLabel"] for level in kueue_topology["spec"]["levels"]] == [lv.node_label for lv in topology.spec.levels]
    pods_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for pod in _kind(objects, "Pod"):
        labels = pod["metadata"]["labels"]
        assert labels[prefix + "prebuilt-workload-name"] == labels[prefix + "pod-group-name"]
        assert {"name": "kueue.x-k8s.io/admission"} in pod["spec"]["schedulingGates"], "Kueue, not kube-scheduler, releases the pod"
        pods_of[labels[prefix + "prebuilt-workload-name"]].append(pod)
    workloads = _kind(objects, "Workload", "kueue.x-k8s.io")
    assert {w["metadata"]["name"] for w in workloads} == set(pods_of), "one Workload per pod group"
    base_of: dict[str, str] = {}  # Workload -> its unit's base name (`<group>-<unit>`)
    for workload in workloads:
        name = workload["metadata"]["name"]
        extra = next((m for r in roles if (m := re.fullmatch(rf"(.+-\d+)-{re.escape(r)}-\d+", name))), None)
        base_of[name] = extra.group(1) if extra else name
    by_unit: dict[str, dict[str, Any]] = defaultdict(lambda: {"base": {}, "all": defaultdict(set), "pods": {}, "required": set(), "preferred": set()})
    for workload in workloads:
        name = workload["metadata"]["name"]
        pods = pods_of[name]
        pod_sets = workload["spec"]["podSets"]
        names = [ps["name"] for ps in pod_sets]
        assert names == sorted(names), "Kueue compares PodSets in name order"
        assert {p["metadata"]["annotations"][prefix + "pod-group-total-count"] for p in pods} == {str(sum(ps["count"] for ps in pod_sets))}
        unit = by_unit[base_of[name]]
        members: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for pod in pods:
            members[pod["metadata"]["annotations"][prefix + "role-hash"]].append(pod)
        offsets = group_offsets(pod_sets)
        for ps in pod_sets:
            request = ps.get("topologyRequest", {})
            in_set = members[ps["name"]]
            assert len(in_set) == ps["count"], f"PodSet {ps['name']} counts {ps['count']} pods, {len(in_set)} join it"
            ranks = sorted(rank(pod) - offsets[ps["name"]] for pod in in_set)
            assert ranks == list(range(ps["count"])), f"PodSet {ps['name']} ranks {ranks}"
            for pod in in_set:
                assert pod["spec"] == ps["template"]["spec"], "a PodSet is a set of identical pods"
                assert _pod_request(pod) == {k: v for k, v in request.items() if k != "podIndexLabel"}
                role = pod["metadata"]["labels"]["tandem.dev/role"]
                replica = pod["metadata"]["labels"]["tandem.dev/replica"]
                unit["all"][role].add(replica)
                unit["pods"].setdefault(role, defaultdict(int))[replica] += 1
                if name == base_of[name]:
                    unit["base"].setdefault(role, set()).add(replica)
            if "podSetSliceRequiredTopology" in request:
                size = request["podSetSliceSize"]
                (role,) = {pod["metadata"]["labels"]["tandem.dev/role"] for pod in in_set}
                unit.setdefault("role_required", {})[role] = _by_label(topology, request["podSetSliceRequiredTopology"])
                slices: dict[int, list[str]] = defaultdict(list)  # consecutive ranks: what Kueue puts in one slice
                for pod in in_set:
                    slices[(rank(pod) - offsets[ps["name"]]) // size].append(pod["metadata"]["labels"]["tandem.dev/replica"])
                assert all(len(got) == size and len(set(got)) == 1 for got in slices.values()), f"a slice is not one replica: {dict(slices)}"
        if name != base_of[name]:
            assert len({pod["metadata"]["labels"]["tandem.dev/replica"] for pod in pods}) == 1, "an extra is one replica"
        required, preferred = _unit_levels(pod_sets, topology)
        unit["required"].add(required)
        unit["preferred"].add(preferred)
    shapes = []
    for base in sorted(by_unit, key=lambda n: int(n.rsplit("-", 1)[1])):
        unit = by_unit[base]
        assert len(unit["required"]) == 1 and len(unit["preferred"]) == 1, "every pod group of a unit is packed at the unit's level"
        shape = Shape(unit_required=unit["required"].pop(), unit_preferred=unit["preferred"].pop(), role_required=unit.get("role_required", {}))
        for role in roles:
            replicas = len(unit["all"].get(role, ()))
            pods_per_replica = max(unit["pods"][role].values()) if replicas else 0
            minimum = len(unit["base"].get(role, ()))  # admitted whole with the unit's base
            shape.roles[role] = RoleShape(replicas, minimum, pods_per_replica)
        shapes.append(shape)
    return shapes


def group_offsets(pod_sets: list[dict[str, Any]]) -> dict[str, int]:
    """What Kueue's topology ungater subtracts from pod indexes: in a group of two PodSets (in
    Workload order) the one with more pods, the second on a tie, continues after the other."""
    offsets = {ps["name"]: 0 for ps in pod_sets}
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ps in pod_sets:
        name = ps.get("topologyRequest", {}).get("podSetGroupName")
        if name is not None:
            groups[name].append(ps)
    for members in groups.values():
        if len(members) == 2:
            smaller, larger = members if members[0]["count"] <= members[1]["count"] else members[::-1]
            offsets[larger["name"]] = smaller["count"]
    return offsets


def rank(pod: dict[str, Any]) -> int:
    """The pod index Kueue reads: the value of the label that pod-group-pod-index-label names."""
    meta = pod["metadata"]
    return int(meta["labels"][meta["annotations"]["kueue.x-k8s.io/pod-group-pod-index-label"]])


def _pod_request(pod: dict[str, Any]) -> dict[str, Any]:
    """The topology request a pod's own annotations make (Kueue builds PodSets from them)."""
    annotations = pod["metadata"]["annotations"]
    prefix = "kueue.x-k8s.io/podset-"
    out: dict[str, Any] = {}
    for name, key in [("required", "required-topology"), ("preferred", "preferred-topology"), ("podSetGroupName", "group-name"), ("podSetSliceRequiredTopology", "slice-required-topology")]:
        if prefix + key in annotations:
            out[name] = annotations[prefix + key]
    if prefix + "slice-size" in annotations:
        out["podSetSliceSize"] = int(annotations[prefix + "slice-size"])
    return out


def _unit_levels(pod_sets: list[dict[str, Any]], topology: ClusterTopology) -> tuple[str | None, str | None]:
    """The unit's pack, only where Kueue keeps the whole unit in one domain: one PodSet, or a
    leader-and-workers group (two PodSets sharing podSetGroupName, one of count 1). A
    preferred level on PodSets that are not grouped is still read as the unit's wish."""
    requests = [ps.get("topologyRequest", {}) for ps in pod_sets]
    groups = {r.get("podSetGroupName") for r in requests}
    together = len(pod_sets) == 1 or (len(groups) == 1 and None not in groups and len(pod_sets) == 2 and any(ps["count"] == 1 for ps in pod_sets))
    required = {r.get("required") for r in requests}
    preferred = {r.get("preferred") for r in requests}
    unit_required = None
    if required != {None}:
        assert len(required) == 1 and together, f"a required level over PodSets Kueue does not group: {requests}"
        unit_required = _by_label(topology, required.pop())
    unit_preferred = None
    if preferred != {None}:
        assert len(preferred) == 1, requests
        unit_preferred = _by_label(topology, preferred.pop())
    return unit_required, unit_preferred


# ----------------------------------------------------------------------------- workload api


def workload_api(objects: list[dict[str, Any]], topology: ClusterTopology, roles: list[str]) -> list[Shape]:
    (workload,) = _kind(objects, "Workload")
    version = workload["apiVersion"].split("/")[1]
    by_key = {level.node_label: level.name for level in topology.spec.levels}

    def key_of(spec: dict[str, Any]) -> str | None:
        keys = [c["key"] for c in spec.get("schedulingConstraints", {}).get("topology", [])]
        return by_key[keys[0]] if keys else None

    def gang(spec: dict[str, Any], field_name: str) -> int:
        policy = spec.get("schedulingPolicy", spec.get("policy"))
        return policy["gang"][field_name] if "gang" in policy else 0

    if version == "v1alpha1":
        groups = {g["name"]: g for g in workload["spec"]["podGroups"]}
        counts = _pod_counts(objects, lambda pod: pod["spec"]["workloadRef"]["podGroupReplicaKey"])
        units = sorted({unit for unit, _ in counts}, key=int)
        shapes = []
        for unit in units:
            shape = Shape()
            for role in roles:
                replicas, pods = counts.get((unit, role), (0, 1))
                shape.roles[role] = RoleShape(replicas, gang(groups[role], "minCount") // pods, pods)
            shapes.append(shape)
        return shapes
    pod_groups = {o["metadata"]["name"]: o for o in _kind(objects, "PodGroup", "scheduling.k8s.io")}
    if "compositePodGroupTemplates" not in workload["spec"]:
        counts = _pod_counts(objects, lambda pod: pod["spec"]["schedulingGroup"]["podGroupName"])
        by_unit: dict[int, Shape] = defaultdict(Shape)
        for name, group in pod_groups.items():
            ref = group["spec"].get("workloadRef", {}).get("templateName") or group["spec"]["podGroupTemplateRef"]["workload"]["podGroupTemplateName"]
            unit = int(name[: -len(ref) - 1].rsplit("-", 1)[1])
            replicas, pods = counts.get((name, ref), (0, 1))
            by_unit[unit].roles[ref] = RoleShape(replicas, gang(group["spec"], "minCount") // pods, pods)
            if key_of(group["spec"]):
                by_unit[unit].unit_required = key_of(group["spec"])
        return [by_unit[unit] for unit in sorted(by_unit)]
    composites = {o["metadata"]["name"]: o for o in _kind(objects, "CompositePodGroup")}
    shapes = []
    roots = [name for name, c in composites.items() if "parentCompositePodGroupName" not in c["spec"]]
    for root in sorted(roots, key=lambda n: int(n.rsplit("-", 1)[1])):
        shape = Shape(unit_required=key_of(composites[root]["spec"]))
        children = {name: c for name, c in composites.items() if c["spec"].get("parentCompositePodGroupName") == root}
        minimums = 0
        for name, child in children.items():
            role = child["spec"]["workloadRef"]["templateName"].removeprefix("role-")
            replicas = [g for g in pod_groups.values() if g["spec"]["parentCompositePodGroupName"] == name]
            pods = {gang(g["spec"], "minCount") for g in replicas} or {1}
            assert len(pods) == 1
            shape.roles[role] = RoleShape(len(replicas), gang(child["spec"], "minGroupCount"), pods.pop())
            minimums += shape.roles[role].minimum > 0
            levels = {key_of(g["spec"]) for g in replicas} - {None}
            if levels:
                shape.role_required[role] = levels.pop()
        assert gang(composites[root]["spec"], "minGroupCount") == (len(children) if minimums else 0)
        shapes.append(shape)
    return shapes


def normalized(shapes: list[Shape]) -> list[Shape]:
    """Pods per replica and replica packs of a role without replicas are unobservable: drop them."""
    out = []
    for shape in shapes:
        empty = {name for name, role in shape.roles.items() if role.replicas == 0}
        out.append(
            Shape(
                roles={n: RoleShape(0, r.minimum, 0) if n in empty else r for n, r in shape.roles.items()},
                unit_required=shape.unit_required,
                unit_preferred=shape.unit_preferred,
                role_required={n: lv for n, lv in shape.role_required.items() if n not in empty},
                role_preferred={n: lv for n, lv in shape.role_preferred.items() if n not in empty},
            )
        )
    return out


READERS = {"volcano": volcano, "koordinator": koordinator, "kai": kai, "kueue": kueue, "workload-api": workload_api}
# Backends that render nothing for a unit without pods (Kueue: a Workload needs a PodSet).
PODS_ONLY = {"kueue", "workload-api v1alpha1"}
# The pack fields each backend expresses (the others are rejected or approximated, see capabilities.md).
EXPRESSED = {
    "volcano": {"unit_required", "role_required", "host_pack_by_pod_affinity"},
    "koordinator": {"unit_required", "unit_preferred"},
    "kai": {"unit_required", "unit_preferred", "role_required", "role_preferred"},
    "kueue": {"unit_required", "unit_preferred_alone", "role_required"},
    "workload-api v1alpha3": {"unit_required", "role_required"},
    "workload-api v1beta1": {"unit_required"},
    "workload-api v1alpha2": {"unit_required"},
    "workload-api v1alpha1": set(),
}
