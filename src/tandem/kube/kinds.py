"""The kinds tandem reads and writes, and where each lives in the REST API.

The controller names objects by a key per kind (ports.py, `tandem.cluster.kind_keys`): the
plain kind name, or `Kind.group` for a kind registered `qualified` because another group
uses its name (KAI's and Kueue's `Topology`); the API addresses them by group, version,
plural and scope. This table is the one place that knows the mapping, so no discovery
request is needed at start-up and an unknown kind fails before any request is sent (400,
terminal: a bug in the caller). `register` adds one; `key_of` finds an object's key from
its own `apiVersion` and `kind`. The delegated backends' kinds (`backends/delegated_kinds.py`:
PodGroups, Workloads, PriorityClass) are here too, each under its group-qualified key; the
operator watches them as optional kinds (served only while their CRDs are installed),
and the CustomResourceDefinitions to notice when one is (`cluster.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import quote

from tandem.backends.delegated_kinds import DELEGATED_KINDS, PRIORITY_CLASS
from tandem.cluster.kind_keys import is_qualified, object_key, qualified
from tandem.errors import BadRequest


@dataclass(frozen=True)
class Kind:
    kind: str
    api_version: str  # "v1" or "group/version"
    plural: str
    namespaced: bool
    status: bool = False  # has a /status subresource (status is written there, and only there)
    qualified: bool = False  # named `Kind.group` (another group has a kind of this name)

    @property
    def key(self) -> str:
        """How the ports name this kind: `Topology`, or `Topology.kai.scheduler` when qualified."""
        return qualified(self.kind, self.group) if self.qualified else self.kind

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def namespace_of(self, namespace: str | None) -> str | None:
        """Where an object of this kind lives: cluster-scoped kinds have no namespace, and a
        namespaced one given none is in `default`, as the API server (and the store) place it."""
        return (namespace or "default") if self.namespaced else None

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The collection path (`namespace=None` on a namespaced kind: across all namespaces),
        or an object's path with `name`, or one of its subresources."""
        parts = ["/api" if "/" not in self.api_version else "/apis", self.api_version]
        if self.namespaced and namespace:
            parts += ["namespaces", quote(namespace, safe="")]
        parts.append(self.plural)
        if name is not None:
            parts.append(quote(name, safe=""))
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


KINDS: dict[str, Kind] = {}  # by key (`Kind.key`)


def register(kind: Kind) -> Kind:
    KINDS[kind.key] = kind
    return kind


def key_of(obj: Mapping[str, Any]) -> str:
    """The key of the kind `obj` is of, from its `apiVersion` and `kind`."""
    return object_key(obj, [key for key in KINDS if is_qualified(key)])


def kind_of(name: str) -> Kind:
    try:
        return KINDS[name]
    except KeyError:
        raise BadRequest(f"kind {name!r} is not known to tandem.kube (known: {', '.join(sorted(KINDS))})") from None


for _kind in (
    Kind("Pod", "v1", "pods", namespaced=True, status=True),
    Kind("Node", "v1", "nodes", namespaced=False, status=True),
    Kind("Service", "v1", "services", namespaced=True, status=True),
    Kind("ConfigMap", "v1", "configmaps", namespaced=True),
    Kind("PodTemplate", "v1", "podtemplates", namespaced=True),
    Kind("Event", "v1", "events", namespaced=True),
    Kind("Namespace", "v1", "namespaces", namespaced=False, status=True),
    Kind("Lease", "coordination.k8s.io/v1", "leases", namespaced=True),
    Kind("InferenceGroup", "tandem.dev/v1alpha1", "inferencegroups", namespaced=True, status=True),
    Kind("ClusterTopology", "tandem.dev/v1alpha1", "clustertopologies", namespaced=False, status=True),  # written by the topology controller
    # cluster-autoscaler's capacity requests (with `--provisioning-class`: docs/provisioning.md)
    Kind("ProvisioningRequest", "autoscaling.x-k8s.io/v1", "provisioningrequests", namespaced=True, status=True),
    # the operator registers its admission webhook (operator/process.py)
    Kind("ValidatingWebhookConfiguration", "admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", namespaced=False),
    # what scales a group's units from outside (cluster/unit_autoscalers.py): watched as optional kinds, read by
    # admission and the autoscaler pass so that one group is never scaled by both tandem and an HPA or KEDA
    Kind("HorizontalPodAutoscaler", "autoscaling/v2", "horizontalpodautoscalers", namespaced=True, status=True),
    Kind("ScaledObject", "keda.sh/v1alpha1", "scaledobjects", namespaced=True, status=True),
    # watched alongside optional kinds: a CRD added or changed has them look again (trim.py keeps its names)
    Kind("CustomResourceDefinition", "apiextensions.k8s.io/v1", "customresourcedefinitions", namespaced=False, status=True),
):
    register(_kind)

for _delegated in (*(k for kinds in DELEGATED_KINDS.values() for k in kinds), PRIORITY_CLASS):
    register(Kind(_delegated.kind, _delegated.api_version, _delegated.plural, _delegated.namespaced, _delegated.status, _delegated.qualified))

CRD_KEY = "CustomResourceDefinition"
