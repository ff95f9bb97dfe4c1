"""The parts of Kubernetes `Node` and `Pod` objects that placement depends on."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from tandem.api.base import KubeModel, Quantity, Timestamp

ResourceList = dict[str, Quantity]


class ObjectMeta(KubeModel):
    name: str = Field(min_length=1)
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    creation_timestamp: Timestamp | None = None


class Taint(KubeModel):
    key: str
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Toleration(KubeModel):
    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes toleration matching: empty effect matches all, empty key with Exists matches all."""
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key in (None, ""):
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or (self.value or "") == (taint.value or "")


class NodeCondition(KubeModel):
    type: str
    status: str


class NodeSpec(KubeModel):
    unschedulable: bool = False
    taints: list[Taint] = Field(default_factory=list)


class NodeStatus(KubeModel):
    allocatable: ResourceList
    conditions: list[NodeCondition] = Field(default_factory=list)


class Node(KubeModel):
    api_version: Literal["v1"]
    kind: Literal["Node"]
    metadata: ObjectMeta
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus

    def ready(self) -> bool:
        """A node with no Ready condition at all is treated as ready (hand-written files)."""
        for condition in self.status.conditions:
            if condition.type == "Ready":
                return condition.status == "True"
        return True


class ResourceRequirements(KubeModel):
    requests: ResourceList = Field(default_factory=dict)
    limits: ResourceList = Field(default_factory=dict)

    def effective_requests(self) -> dict[str, int]:
        """Kubernetes defaults a missing request to its limit."""
        merged = dict(self.limits)
        merged.update(self.requests)
        return merged


class Container(KubeModel):
    name: str = Field(min_length=1)
    image: str | None = None
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)


class PodSpec(KubeModel):
    containers: list[Container] = Field(min_length=1)
    init_containers: list[Container] = Field(default_factory=list)
    overhead: ResourceList = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    node_name: str | None = None
    # DRA claims, kept so a backend that cannot honour them (koordinator) can refuse them.
    resource_claims: list[dict[str, Any]] = Field(default_factory=list)

    def requests(self) -> dict[str, int]:
        """Effective pod requests, as kube-scheduler computes them.

        max(sum of app containers, largest init container) per resource, plus overhead.
        """
        total: dict[str, int] = {}
        for container in self.containers:
            for name, amount in container.resources.effective_requests().items():
                total[name] = total.get(name, 0) + amount
        for container in self.init_containers:
            for name, amount in container.resources.effective_requests().items():
                total[name] = max(total.get(name, 0), amount)
        for name, amount in self.overhead.items():
            total[name] = total.get(name, 0) + amount
        return total


class PodTemplateMeta(KubeModel):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class PodTemplateSpec(KubeModel):
    metadata: PodTemplateMeta = Field(default_factory=PodTemplateMeta)
    spec: PodSpec


class PodStatus(KubeModel):
    phase: str | None = None


class Pod(KubeModel):
    api_version: Literal["v1"]
    kind: Literal["Pod"]
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus = Field(default_factory=PodStatus)

    @field_validator("metadata")
    @classmethod
    def _namespace_default(cls, meta: ObjectMeta) -> ObjectMeta:
        return meta if meta.namespace else meta.model_copy(update={"namespace": "default"})

    def holds_capacity(self) -> bool:
        """A bound pod uses its node's capacity unless it has finished."""
        return bool(self.spec.node_name) and self.status.phase not in ("Succeeded", "Failed")
