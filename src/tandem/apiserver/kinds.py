"""The resources the local API server serves, and where each lives in the REST API.

The store names objects by a key per kind (`tandem.cluster.kind_keys`); the REST API by
group, version and plural. The `Registry` maps both ways, for the built-in kinds and for
every kind a CustomResourceDefinition adds (one `Resource` per served version), and tells
the store each kind's key, scope and whether it has a status subresource. A kind is keyed
by its plain name unless another group already serves a kind of that name when its CRD
is first served: then it is keyed `Kind.group` (KAI's and Kueue's `Topology` both served),
and keeps that key while its CRD is served.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from tandem.cluster.kind_keys import qualified
from tandem.cluster.memory import MemoryStore

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
SUBRESOURCE_VERBS = ("get", "patch", "update")


@dataclass(frozen=True)
class Column:
    """One printer column (`additionalPrinterColumns`)."""

    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0
    format: str = ""


@dataclass(frozen=True)
class ScalePaths:
    """Where a custom resource keeps what its `/scale` subresource shows (JSON paths)."""

    spec_replicas: str
    status_replicas: str
    label_selector: str | None = None


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status: bool = False  # has a /status subresource
    scale: ScalePaths | None = None  # has a /scale subresource (custom resources)
    binding: bool = False  # has a /binding subresource (pods)
    columns: tuple[Column, ...] | None = None  # a CRD's printer columns; None: the kind's built-in table
    schema: Any = field(default=None, compare=False)  # schema.Schema of a custom resource
    rules: Any = field(default=None, compare=False)  # cel.Rules of a custom resource (None: no CEL rules to run)
    crd: str = ""  # the CustomResourceDefinition that defines it ("" for a built-in)
    storage: bool = True  # the version objects are stored at
    qualified_key: bool = False  # stored under `Kind.group`: another group serves a kind of this name
    definition: str = ""  # a built-in kind checked against Kubernetes' own schema: its definition (`workload_api.py`)

    @property
    def key(self) -> str:
        """The store's name for this kind: `Topology`, or `Topology.kueue.x-k8s.io` when qualified."""
        return qualified(self.kind, self.group) if self.qualified_key else self.kind

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """`pods`, `inferencegroups.tandem.dev`: how error messages name the resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """`Pod`, `InferenceGroup.tandem.dev`: how validation errors name the kind."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def custom(self) -> bool:
        return bool(self.crd)


# What deploy/ holds besides the kinds above: stored, shown, patched, never acted on.
INSTALLED = (
    Resource("", "v1", "serviceaccounts", "ServiceAccount", True, "serviceaccount", ("sa",)),
    Resource("", "v1", "secrets", "Secret", True, "secret"),
    Resource("apps", "v1", "deployments", "Deployment", True, "deployment", ("deploy",), ("all",), status=True,
             scale=ScalePaths(".spec.replicas", ".status.replicas")),
    Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, "clusterrole"),
    Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, "clusterrolebinding"),
    Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", True, "role"),
    Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, "rolebinding"),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, "poddisruptionbudget", ("pdb",), status=True),
    Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, "networkpolicy", ("netpol",)),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, "priorityclass", ("pc",)),
)

BUILT_IN = (
    Resource("", "v1", "pods", "Pod", True, "pod", ("po",), ("all",), status=True, binding=True),
    Resource("", "v1", "nodes", "Node", False, "node", ("no",), status=True),
    Resource("", "v1", "namespaces", "Namespace", False, "namespace", ("ns",), status=True),
    Resource("", "v1", "services", "Service", True, "service", ("svc",), ("all",), status=True),
    Resource("", "v1", "endpoints", "Endpoints", True, "endpoints", ("ep",)),
    Resource("", "v1", "configmaps", "ConfigMap", True, "configmap", ("cm",)),
    Resource("", "v1", "podtemplates", "PodTemplate", True, "podtemplate"),
    Resource("", "v1", "events", "Event", True, "event", ("ev",)),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True, "lease"),
    # Stored as sent and read by the operator (one autoscaler per group); no HPA controller
    # acts on them here: what one would do is a write of the target's scale subresource.
    # v1 too (`kubectl autoscale` writes v1), stored with v2's, without conversion: the fields
    # are kept as sent at either version (`scaleTargetRef`, all tandem reads, is alike in both).
    Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, "horizontalpodautoscaler", ("hpa",), ("all",),
             status=True),
    Resource("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, "horizontalpodautoscaler", ("hpa",), ("all",),
             status=True, storage=False),
    Resource(
        "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
        "customresourcedefinition", ("crd", "crds"), ("api-extensions",), status=True,
    ),
    # Checked and defaulted on write (webhooks.py), and called on every matching write (review.py).
    Resource(
        "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False,
        "validatingwebhookconfiguration", (), ("api-extensions",),
    ),
    # Stored as sent, so `kubectl apply -k deploy/` installs here what it installs in a cluster;
    # nothing acts on them (no Deployment controller, no RBAC, no network policy, no evictions).
    *INSTALLED,
)

_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key putting versions in Kubernetes' order: v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > others."""
    m = _VERSION.match(version)
    if not m:
        return (3, 0, 0, version)
    stage = {None: 0, "beta": 1, "alpha": 2}[m[2]]
    return (stage, -int(m[1]), -int(m[3] or 0), version)


class Registry:
    """Every served resource, by (group, version, plural) and by kind; keeps the store told."""

    def __init__(self, store: MemoryStore):
        self.store = store
        self._resources: dict[tuple[str, str, str], Resource] = {}
        for resource in BUILT_IN:
            self.add(resource)

    def add(self, resource: Resource) -> None:
        self._resources[(resource.group, resource.version, resource.plural)] = resource
        if resource.storage:
            self.store.register_kind(resource.key, cluster_scoped=not resource.namespaced, status=resource.status)

    def replace_crd(self, crd: str, resources: list[Resource]) -> None:
        """Serve exactly `resources` for the CRD named `crd` (none: it is gone). Its kind is
        keyed qualified if it was, or if another group serves a kind of the same name."""
        before = [r for r in self._resources.values() if r.crd == crd]
        for key in [k for k, r in self._resources.items() if r.crd == crd]:
            del self._resources[key]
        if before:
            qualify = before[0].qualified_key
        else:
            qualify = any(
                r.kind == resource.kind and r.group != resource.group for resource in resources for r in self._resources.values()
            )
        for resource in resources:
            self.add(replace(resource, qualified_key=qualify))
        for gone in {r.key for r in before if r.storage} - {r.key for r in self._resources.values() if r.storage}:
            self.store.forget_kind(gone)  # no longer served: the store's `served` says so

    def lookup(self, group: str, version: str, plural: str) -> Resource | None:
        return self._resources.get((group, version, plural))

    def for_kind(self, kind: str, group: str | None = None) -> Resource | None:
        """The resource objects of `kind` (in `group`, when given) are stored as (its storage
        version); without a group, the first served kind of that name."""
        return next((r for r in self._resources.values() if r.kind == kind and r.storage and group in (None, r.group)), None)

    def for_key(self, key: str) -> Resource | None:
        """The storage resource of the store's kind `key` (`Resource.key`)."""
        return next((r for r in self._resources.values() if r.key == key and r.storage), None)

    def owner_of_kind(self, kind: str, group: str | None = None) -> str | None:
        """Which CRD serves `kind` (in `group`, when given; "" for a built-in), or None when nothing does."""
        resource = self.for_kind(kind, group)
        return None if resource is None else resource.crd

    def owner_of_plural(self, group: str, plural: str) -> str | None:
        resource = next((r for r in self._resources.values() if r.group == group and r.plural == plural), None)
        return None if resource is None else resource.crd

    def groups(self) -> list[tuple[str, list[str]]]:
        """(group, versions best first) for every served group: core, the built-in groups, then CRDs' by name."""
        versions: dict[str, set[str]] = {}
        for group, version, _ in self._resources:
            versions.setdefault(group, set()).add(version)
        custom = {r.group for r in self._resources.values() if r.custom} - {r.group for r in self._resources.values() if not r.custom}
        order = [g for g in versions if g not in custom] + sorted(custom)
        return [(g, sorted(versions[g], key=version_priority)) for g in order]

    def resources(self, group: str, version: str) -> list[Resource]:
        return [r for (g, v, _), r in self._resources.items() if g == group and v == version]

    def all(self) -> list[Resource]:
        return list(self._resources.values())
