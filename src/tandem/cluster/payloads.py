"""The shape of the Kubernetes objects tandem reads, as the API serves them (camelCase).

Objects cross the ports as plain dicts (`ports.Object`): that is what every world has, and
converting hundreds of thousands of pods into models on every pass would cost more than
the pass. These TypedDicts name the fields the controller and the other worlds read, so
the type checker follows them; `as_pod` and `as_group` mark the seam where a plain
object read from a `Reader` is taken as one (no copy, no check: the API server's schema,
or the memory store's, has already shaped it). Every key is optional, as in the API.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, TypedDict, TypeVar, cast

K = TypeVar("K")


class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    finalizers: list[str]


class SchedulingGate(TypedDict):
    name: str


class ResourceRequirements(TypedDict, total=False):
    requests: dict[str, str | int | float]
    limits: dict[str, str | int | float]


class Container(TypedDict, total=False):
    name: str
    image: str
    resources: ResourceRequirements
    env: list[dict[str, Any]]
    volumeMounts: list[dict[str, Any]]
    ports: list[dict[str, Any]]  # named ones are listed in the peers file


class PodSpec(TypedDict, total=False):
    nodeName: str
    nodeSelector: dict[str, str]
    schedulingGates: list[SchedulingGate]
    containers: list[Container]
    hostname: str
    subdomain: str
    volumes: list[dict[str, Any]]
    terminationGracePeriodSeconds: int


class PodCondition(TypedDict, total=False):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str


class PodStatus(TypedDict, total=False):
    phase: str
    conditions: list[PodCondition]
    podIP: str
    hostIP: str


class PodPayload(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus


class GroupPayload(TypedDict, total=False):
    """An InferenceGroup as stored: its spec and status are read through the typed models
    (`tandem.api`), so only the envelope is named here."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: dict[str, Any]
    status: dict[str, Any]


def as_pod(obj: Mapping[str, Any]) -> PodPayload:
    """A Pod object read from a world, taken as the payload it is."""
    return cast(PodPayload, obj)


def as_group(obj: Mapping[str, Any]) -> GroupPayload:
    """An InferenceGroup object read from a world, taken as the payload it is."""
    return cast(GroupPayload, obj)


def as_pods(objs: Mapping[K, Mapping[str, Any]]) -> Mapping[K, PodPayload]:
    """Pod objects by key (an index's, shared: not copied), taken as payloads."""
    return cast(Mapping[K, PodPayload], objs)


def as_object(payload: PodPayload) -> dict[str, Any]:
    """A payload handed back to a writer, which takes plain objects."""
    return cast(dict[str, Any], payload)
