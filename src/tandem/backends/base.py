"""The interface every scheduler backend implements, in the manner of Grove's scheduler backends.

A backend translates one InferenceGroup into the objects another scheduler reads (its
PodGroup-like objects, its topology objects) and says what each pod needs (scheduler
name, labels, annotations, gates). It never weakens a promise silently: a hard promise it
cannot keep is `Unsupported` and the group is rejected with the field path that asks for
it; a wish it can only approximate is `Approximate` and comes with a warning.

Pure: objects in, dicts out. Rendering is deterministic (labels and annotations sorted,
everything else in a fixed order).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Collection, Iterator, Mapping, Sequence, TypeVar

from tandem.api.kube import Node
from tandem.api.naming import EXCLUSIVE_LABEL, GROUP_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.api.resources import ClusterTopology, InferenceGroup, Role
from tandem.backends.features import FEATURES, Feature, Usage
from tandem.backends.pods import pod_identity, unit_pods
from tandem.backends.priority import priority_class, priority_class_name, priority_problems
from tandem.errors import InputError, Problem

Manifest = Mapping[str, Any]
Replicas = Mapping[str, Sequence[int]]  # per role, the replica indexes a unit's objects are for


@dataclass(frozen=True)
class Full:
    """The backend keeps the promise as tandem does."""

    note: str = ""


@dataclass(frozen=True)
class Approximate:
    """The backend keeps something weaker; the warning says what changes."""

    warning: str


@dataclass(frozen=True)
class Unsupported:
    """The backend cannot keep the promise: a group that relies on it is rejected."""

    reason: str


Support = Full | Approximate | Unsupported
SupportKind = TypeVar("SupportKind", Full, Approximate, Unsupported)


@dataclass(frozen=True)
class BackendOptions:
    """Cluster-specific choices a backend needs and the InferenceGroup does not say."""

    queue: str = "default"  # Volcano/KAI queue, Kueue LocalQueue, for a group without spec.scheduler.queue
    workload_api_version: str = "v1alpha3"  # scheduling.k8s.io version for workload-api


class Backend(ABC):
    name: ClassVar[str]  # exactly as spec.scheduler.backend spells it
    scheduler_name: ClassVar[str | None] = None  # pod spec.schedulerName; None keeps the default scheduler
    renders_priority_class: ClassVar[bool] = True
    # Whether a pod's gang is chosen by the spec's minimum when the pod is made (Kueue: the
    # base pod group holds the replicas below it), so its gang objects keep that minimum.
    fixed_minimums: ClassVar[bool] = False

    def __init__(self, options: BackendOptions | None = None) -> None:
        self.options = options or BackendOptions()

    def queue(self, group: InferenceGroup) -> str:
        """The queue `group`'s pods go to: the group's `spec.scheduler.queue` wins over the CLI's `--queue`."""
        return group.spec.scheduler.queue or self.options.queue

    @property
    def label(self) -> str:
        """How the capability matrix names this backend (a column)."""
        return self.name

    # ------------------------------------------------------------------ capabilities

    @abstractmethod
    def capabilities(self) -> Mapping[str, Support]:
        """Support for every feature id of `features.FEATURES`."""

    def support_for(self, feature: Feature, group: InferenceGroup, topology: ClusterTopology | None) -> Support:
        """The support a given group gets; a backend narrows its static answer where the group allows."""
        return self.capabilities()[feature.id]

    def validate(self, group: InferenceGroup, topology: ClusterTopology | None = None) -> list[Problem]:
        """Every reason this backend cannot honour `group`, each with the field path that asks for it."""
        problems = [
            Problem(usage.path, f"backend {self.label!r} cannot honour {feature.title} ({usage.detail}): {support.reason}")
            for feature, support, usage in self._uses(Unsupported, group, topology)
        ]
        if self.renders_priority_class:
            problems += priority_problems(group, self.label)
        return problems + self.extra_problems(group, topology)

    def warnings(self, group: InferenceGroup, topology: ClusterTopology | None = None) -> list[Problem]:
        """What this backend keeps only approximately for `group` (accepted, but weaker)."""
        found = [
            Problem(usage.path, f"backend {self.label!r} approximates {feature.title} ({usage.detail}): {support.warning}")
            for feature, support, usage in self._uses(Approximate, group, topology)
        ]
        return found + self.extra_warnings(group, topology)

    def _uses(
        self, kind: type[SupportKind], group: InferenceGroup, topology: ClusterTopology | None
    ) -> Iterator[tuple[Feature, SupportKind, Usage]]:
        """Each place `group` uses a feature this backend supports as `kind`, in feature order."""
        for feature in FEATURES:
            support = self.support_for(feature, group, topology)
            if isinstance(support, kind):
                for usage in feature.detect(group, topology):
                    yield feature, support, usage

    def extra_problems(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[Problem]:
        """Limits of this backend that no feature describes (list sizes, name clashes)."""
        return []

    def extra_warnings(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[Problem]:
        return []

    # ------------------------------------------------------------------ rendering

    def render(
        self,
        group: InferenceGroup,
        topology: ClusterTopology | None = None,
        nodes: Sequence[Node] = (),
        manifest: Manifest | None = None,
    ) -> list[dict[str, Any]]:
        """What to `kubectl apply` for `group`: topology objects (when nodes are given), then
        the group's objects, then its pods. Raises InputError when the group cannot be honoured.

        `manifest` is the group as the user wrote it: pods keep every template field. Without
        it, pods are built from the fields tandem models (containers, resources, selectors).
        """
        problems = self.validate(group, topology) + self.topology_problems(group, topology)
        if problems:
            raise InputError(problems)
        objects: list[dict[str, Any]] = []
        if topology is not None and nodes:
            objects += self.render_topology(topology, nodes)
        return objects + self.applied_objects(group, topology, manifest)

    def applied_objects(self, group: InferenceGroup, topology: ClusterTopology | None, manifest: Manifest | None) -> list[dict[str, Any]]:
        """What `render` gives for the group itself: its PriorityClass, the scheduler's objects, then its pods."""
        objects = self.priority_objects(group) + self.group_objects(group, topology)
        for unit in range(group.spec.replicas):
            objects += [self.prepare_pod(pod, group, topology) for pod in unit_pods(group, unit, manifest)]
        return objects

    def priority_objects(self, group: InferenceGroup) -> list[dict[str, Any]]:
        """The PriorityClass of the group's priority, when this backend renders one and the priority is not 0."""
        if self.renders_priority_class and priority_class_name(group.spec.priority):
            return [priority_class(group.spec.priority)]
        return []

    def group_objects(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[dict[str, Any]]:
        """The scheduler's own objects for the group (PodGroups, Workloads, ...), without pods:
        those of the whole group, then each unit's."""
        objects = self.shared_objects(group, topology)
        for unit in range(group.spec.replicas):
            objects += self.unit_objects(group, topology, unit)
        return objects

    def shared_objects(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[dict[str, Any]]:
        """The scheduler's objects for the group as a whole (the Workload API's Workload), none by default."""
        return []

    @abstractmethod
    def unit_objects(
        self, group: InferenceGroup, topology: ClusterTopology | None, unit: int, manifest: Manifest | None = None,
        replicas: Replicas | None = None, alone: Collection[tuple[str, int]] = (),
    ) -> list[dict[str, Any]]:
        """The scheduler's objects for one unit. The operator passes the unit's current step as
        `group` (`step_view`), so a gang's minimum is what the step admitted, not the target,
        and as `replicas` the indexes admitted per role (a replica replaced in a rolling update
        takes a free index, not the next one): an object or entry per replica is made for
        those (`replica_indexes`), and its minimum counts the lowest of them; `alone`, the
        (role, index) of replicas made while their unit ran, each a gang of its own where the
        backend's gangs depend on it (Kueue's base pod group). `manifest` is the group as
        written, for a backend that copies pod templates."""

    @abstractmethod
    def render_topology(self, topology: ClusterTopology, nodes: Sequence[Node]) -> list[dict[str, Any]]:
        """The ClusterTopology as this scheduler's own topology objects. Raises InputError
        (with `spec.levels...` paths) when the scheduler cannot represent it."""

    def prepare_pod(self, pod: Mapping[str, Any], group: InferenceGroup, topology: ClusterTopology | None = None) -> dict[str, Any]:
        """A copy of `pod` (one of the group's, with tandem's labels) carrying what this
        scheduler needs: scheduler name, group membership, priority, preferred affinity,
        exclusive anti-affinity."""
        out = copy.deepcopy(dict(pod))
        spec = out.setdefault("spec", {})
        if self.scheduler_name:
            spec["schedulerName"] = self.scheduler_name
        class_name = priority_class_name(group.spec.priority) if self.renders_priority_class else None
        if class_name and "priorityClassName" not in spec:
            spec["priorityClassName"] = class_name
        self._decorate(out, group, topology)
        meta = out["metadata"]
        for key in ("labels", "annotations"):
            if key in meta:
                meta[key] = dict(sorted(meta[key].items()))
                if not meta[key]:
                    del meta[key]
        return out

    @abstractmethod
    def _decorate(self, pod: dict[str, Any], group: InferenceGroup, topology: ClusterTopology | None) -> None:
        """Add this scheduler's labels, annotations and spec fields to `pod` in place."""

    # ------------------------------------------------------------------ shared helpers

    def topology_problems(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[Problem]:
        """Levels must be translated into node labels, tiers or layers: that needs the topology."""
        levels = referenced_levels(group) if topology is None else set()
        if not levels:
            return []
        return [
            Problem(
                "spec.topologyName",
                f"ClusterTopology {group.spec.topology_name!r} is needed to translate levels "
                f"({', '.join(sorted(levels))}) for backend {self.label!r}; add it with --cluster",
            )
        ]


def step_view(
    group: InferenceGroup, admitted: Mapping[str, int], extent: Mapping[str, int] | None = None, keep_minimums: bool = False
) -> InferenceGroup:
    """`group` as one unit's current step, for its gang objects: each role's minimum no more
    than its `admitted` replicas (a gang never waits for replicas coordination holds back),
    and its replicas up to `extent` (the highest admitted index + 1, so an object named per
    replica exists for each admitted one; `admitted` when not given). With `keep_minimums`
    (a backend whose pods name their gang by the spec's minimum: `Backend.fixed_minimums`)
    each role keeps its minimum, and at least that many replicas."""
    extent = admitted if extent is None else extent
    roles = []
    for role in group.spec.roles:
        count, reach = admitted.get(role.name, 0), extent.get(role.name, admitted.get(role.name, 0))
        minimum = role.minimum if keep_minimums else min(role.minimum, count)
        roles.append(role.model_copy(update={"replicas": max(reach, count, minimum), "min_replicas": minimum}))
    return group.model_copy(update={"spec": group.spec.model_copy(update={"roles": roles})})


def replica_indexes(role: Role, replicas: Replicas | None) -> list[int]:
    """The indexes of `role`'s replicas a unit's objects are for: those given, else 0..replicas-1."""
    if replicas is None or role.name not in replicas:
        return list(range(role.replicas))
    return sorted(replicas[role.name])


def referenced_levels(group: InferenceGroup) -> set[str]:
    levels = {group.spec.topology.pack.required, group.spec.topology.pack.preferred, group.spec.topology.exclusive}
    for role in group.spec.roles:
        levels |= {role.topology.pack.required, role.topology.pack.preferred}
    levels |= {rule.level for rule in group.spec.affinity}
    return {level for level in levels if level is not None}


def node_label(topology: ClusterTopology | None, level: str) -> str:
    """The node label that defines `level`; a level the topology lacks is the caller's input mistake."""
    for candidate in topology.spec.levels if topology is not None else ():
        if candidate.name == level:
            return candidate.node_label
    known = f"ClusterTopology {topology.metadata.name!r}" if topology is not None else "no ClusterTopology"
    raise InputError(Problem("spec.topologyName", f"level {level!r} is not defined ({known} given)"))


def topology_defining(topology: ClusterTopology | None, level: str) -> ClusterTopology:
    """`topology`, once it is known to define `level`: for backends that count or name levels
    themselves (tiers, layers), so an unknown level is still reported as `node_label` reports it."""
    node_label(topology, level)
    assert topology is not None
    return topology


def unit_selector(group: InferenceGroup, unit: int, role: str | None = None) -> dict[str, str]:
    """Labels that select the pods of a unit (or of one role in it)."""
    labels = {GROUP_LABEL: group.metadata.name, UNIT_LABEL: str(unit)}
    if role is not None:
        labels[ROLE_LABEL] = role
    return dict(sorted(labels.items()))


def unit_object_name(group: InferenceGroup, unit: int, *within: str | int) -> str:
    """`<group>-<unit>`, then `-<role>` and `-<replica>` when given: the name of a scheduler
    object for a unit (a role of it, a replica), following `tandem.api.naming.pod_name`."""
    return "-".join([group.metadata.name, str(unit), *(str(part) for part in within)])


def controller_only(rendered: str = "objects") -> dict[str, Support]:
    """Promises only tandem's controller keeps over time: the `rendered` objects are one fixed desired state."""
    return {
        "coordination": Approximate(f"the rendered {rendered} are the full desired state; ratio steps need tandem's controller"),
        "autoscaling": Approximate("the rendered replica counts are fixed; autoscaling needs tandem's controller"),
    }


# How backends that call `add_preferred_affinity` keep a Preferred affinity.
PREFERRED_AFFINITY_AS_POD_AFFINITY = Approximate(
    "rendered as preferred inter-pod affinity on the 'from' pods: scored pod by pod, not maximised over the unit"
)


def add_preferred_affinity(pod: dict[str, Any], group: InferenceGroup, topology: ClusterTopology | None) -> None:
    """Preferred cross-role affinity as Kubernetes inter-pod affinity on the `from` role's pods:
    a score the scheduler weighs pod by pod, not a count maximised over the unit."""
    unit, role, _, _ = pod_identity(pod)
    terms = []
    for rule in group.spec.affinity:
        if rule.mode != "Preferred" or rule.from_ != role:
            continue
        terms.append(
            {
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": unit_selector(group, unit, rule.to)},
                    "topologyKey": node_label(topology, rule.level),
                },
            }
        )
    if not terms:
        return
    affinity = pod["spec"].setdefault("affinity", {})
    pod_affinity = affinity.setdefault("podAffinity", {})
    pod_affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).extend(terms)



# How backends whose scheduler runs kube-scheduler's InterPodAffinity filter keep `exclusive`
# (each names where that filter runs in its scheduler).
EXCLUSIVE_AS_ANTI_AFFINITY = (
    "required pod anti-affinity on the level's node label towards every pod of another exclusive unit, as LWS renders "
    "exclusive-topology (label values name the domains: a rack name reused in two blocks repels as one rack)"
)
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by Kubernetes on every Namespace


def add_exclusive_anti_affinity(pod: dict[str, Any], group: InferenceGroup, topology: ClusterTopology | None) -> None:
    """`spec.topology.exclusive` as required inter-pod anti-affinity, the way LWS keeps exclusive-topology.

    The terms repel every pod labelled `tandem.dev/exclusive` that is not of this unit: in other
    namespaces, of other groups here, of other units of this group. kube-scheduler checks required
    anti-affinity both ways (an existing pod's terms repel a newcomer in the existing pod's domain),
    so units asking for different levels are each held to their own level, as the engine holds them;
    pods of groups without `exclusive` carry no label and are not repelled. A node without the
    level's label is in no domain, so anti-affinity could not see it: the pod is kept off such nodes,
    as tandem's engine excludes them.
    """
    level = group.spec.topology.exclusive
    if level is None:
        return
    key = node_label(topology, level)
    unit, _, _, _ = pod_identity(pod)
    namespace, name = group.metadata.namespace, group.metadata.name
    # Fresh dicts for every term: YAML would print a shared one as an anchor and aliases.
    others = [
        {"labelSelector": {"matchExpressions": [_exists(EXCLUSIVE_LABEL)]}, "namespaceSelector": _not_namespace(namespace), "topologyKey": key},
        {
            "labelSelector": {"matchExpressions": [_exists(EXCLUSIVE_LABEL), _label_not(GROUP_LABEL, name)]},
            "namespaces": [namespace],
            "topologyKey": key,
        },
        {
            "labelSelector": {"matchExpressions": [_exists(EXCLUSIVE_LABEL), _label_in(GROUP_LABEL, name), _label_not(UNIT_LABEL, str(unit))]},
            "namespaces": [namespace],
            "topologyKey": key,
        },
    ]
    affinity = pod["spec"].setdefault("affinity", {})
    anti = affinity.setdefault("podAntiAffinity", {})
    anti.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).extend(others)
    _require_node_label(affinity, key)


def _exists(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "Exists"}


def _label_in(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": [value]}


def _label_not(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "operator": "NotIn", "values": [value]}


def _not_namespace(namespace: str) -> dict[str, Any]:
    return {"matchExpressions": [_label_not(NAMESPACE_NAME_LABEL, namespace)]}


def _require_node_label(affinity: dict[str, Any], key: str) -> None:
    """Nodes must carry `key`. Node selector terms are ORed, so every existing term gets it."""
    required = affinity.setdefault("nodeAffinity", {}).setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({})
    for term in terms:
        term.setdefault("matchExpressions", []).append(_exists(key))
