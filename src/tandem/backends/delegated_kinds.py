"""The kinds the operator writes for a delegated group, per backend (`spec.scheduler.backend`).

A delegated group's gang objects (PodGroups, Workloads, ...) are namespaced and owned by
the group; the operator lists, watches, creates, merge-patches and deletes exactly these
(and RBAC grants exactly these, one kustomize component per backend: deploy/components/).
Three schedulers call their gang `PodGroup` and two call theirs `Workload`, so every kind
here is named by its group-qualified key (`PodGroup.scheduling.volcano.sh`,
as `tandem.cluster.kind_keys` names kinds) in every port call and world.

A backend is live when the API server serves every kind it needs (its CRDs are installed
and established, or, for the Workload API, the built-in group is enabled); the operator
finds that out by listing (discovery), not from configuration.

PriorityClasses are cluster-scoped and shared by every group with one `spec.priority`
(`priority.py`): the operator creates one that is missing and never deletes one.
"""

from __future__ import annotations

from dataclasses import dataclass

from tandem.backends import kai, koordinator, kueue, volcano
from tandem.backends.workload_api import DEFAULT_VERSION, GROUP as WORKLOAD_API_GROUP


@dataclass(frozen=True)
class DelegatedKind:
    kind: str
    api_version: str
    plural: str
    namespaced: bool = True
    status: bool = True  # its CRD has a status subresource (the scheduler writes the status; the operator only reads it)
    qualified: bool = True  # named `Kind.group`: three schedulers call their gang PodGroup
    # Whether the scheduler lets its spec change once made: an immutable one is replaced
    # (delete, create), never patched (Kueue: "podSets cannot be changed"; the Workload
    # API's objects in their alpha versions).
    mutable: bool = True

    @property
    def key(self) -> str:
        """How the ports name the kind: `PodGroup.scheduling.volcano.sh`; `PriorityClass`."""
        return f"{self.kind}.{self.group}" if self.qualified else self.kind  # as `cluster.kind_keys.qualified` names it

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def crd(self) -> str:
        """The CustomResourceDefinition that serves the kind (`podgroups.scheduling.volcano.sh`)."""
        return f"{self.plural}.{self.group}"


WORKLOAD_API_VERSION = f"{WORKLOAD_API_GROUP}/{DEFAULT_VERSION}"

DELEGATED_KINDS: dict[str, tuple[DelegatedKind, ...]] = {
    "volcano": (DelegatedKind("PodGroup", volcano.API_VERSION, "podgroups", status=False),),  # no status subresource in its CRD
    "kai": (DelegatedKind("PodGroup", kai.API_VERSION, "podgroups"),),
    "koordinator": (DelegatedKind("PodGroup", koordinator.API_VERSION, "podgroups", status=False),),  # nor here
    "kueue": (DelegatedKind("Workload", kueue.API_VERSION, "workloads", mutable=False),),
    "workload-api": (
        DelegatedKind("Workload", WORKLOAD_API_VERSION, "workloads", mutable=False),
        DelegatedKind("CompositePodGroup", WORKLOAD_API_VERSION, "compositepodgroups", mutable=False),
        DelegatedKind("PodGroup", WORKLOAD_API_VERSION, "podgroups", mutable=False),
    ),
}

PRIORITY_CLASS = DelegatedKind("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", namespaced=False, status=False, qualified=False)

DELEGATED_BACKENDS = tuple(DELEGATED_KINDS)  # every backend but `native`


def delegated_keys(backends: tuple[str, ...]) -> tuple[str, ...]:
    """The keys of the gang kinds of `backends`, in a fixed order, each once."""
    keys = [kind.key for backend in DELEGATED_BACKENDS if backend in backends for kind in DELEGATED_KINDS[backend]]
    return tuple(dict.fromkeys(keys))


def kind_by_key(key: str) -> DelegatedKind:
    for kinds in (*DELEGATED_KINDS.values(), (PRIORITY_CLASS,)):
        for kind in kinds:
            if kind.key == key:
                return kind
    raise KeyError(key)


ALL_KEYS = delegated_keys(DELEGATED_BACKENDS)  # every gang kind of every delegated backend
IMMUTABLE_KEYS = frozenset(kind.key for kinds in DELEGATED_KINDS.values() for kind in kinds if not kind.mutable)
