"""tandem's resources (API group tandem.dev/v1alpha1): ClusterTopology and InferenceGroup.

Field-local rules live on the fields; rules that relate several fields, or a group to
its topology, live in `tandem.api.validation` so each can name its own field path.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from tandem.api.autoscaling import AutoscalingSpec
from tandem.api.base import DNSLabel, DNSSubdomain, Int32, NonNegativeInt, PositiveInt, StrictModel, Timestamp, _dns1123_subdomain
from tandem.api.kube import PodTemplateSpec

API_VERSION = "tandem.dev/v1alpha1"

_PERCENT = re.compile(r"^(\d{1,3})%$")
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)


def _int_or_percent_type(value: object) -> object:
    """Reject other types here, with one message, before the int|str union reports two."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("must be an integer or a percentage such as \"25%\"")
    return value


def _int_or_percent(value: int | str) -> int | str:
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"must not be negative, got {value}")
        return value
    match = _PERCENT.match(value)
    if not match or int(match[1]) > 100:
        raise ValueError(f"must be an integer or a percentage from 0% to 100%, not {value!r}")
    return value


def _label_key(value: str) -> str:
    if not _LABEL_KEY.match(value) or len(value) > 316:
        raise ValueError(f"{value!r} is not a valid Kubernetes label key")
    return value


IntOrPercent = Annotated[int | str, BeforeValidator(_int_or_percent_type), AfterValidator(_int_or_percent)]
LabelKey = Annotated[str, Field(strict=True), AfterValidator(_label_key)]


def _queue_name(value: str) -> str:
    """A queue's name: the object's (a DNS-1123 subdomain) and a label value's (63 characters)."""
    if len(value) > 63:
        raise ValueError(f"must be at most 63 characters (KAI and Kueue carry it as a label value), got {len(value)}")
    return _dns1123_subdomain(value)


QueueName = Annotated[str, Field(strict=True), AfterValidator(_queue_name)]


# ----------------------------------------------------------------------------- metadata


class ClusterMeta(StrictModel):
    """Metadata of a cluster-scoped tandem resource."""

    model_config = StrictModel.model_config | {"extra": "ignore"}
    name: DNSLabel


class NamespacedMeta(StrictModel):
    """Metadata of a namespaced tandem resource; kubectl's extra metadata is ignored."""

    model_config = StrictModel.model_config | {"extra": "ignore"}
    name: DNSLabel
    namespace: DNSLabel = "default"
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    creation_timestamp: Timestamp | None = None
    generation: Annotated[int, Field(ge=0, strict=True)] | None = None  # int64 in Kubernetes


# ----------------------------------------------------------------------------- ClusterTopology


class TopologyLevel(StrictModel):
    name: DNSLabel
    node_label: LabelKey
    link_bandwidth_gbps: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None


class ClusterTopologySpec(StrictModel):
    levels: list[TopologyLevel] = Field(min_length=1, max_length=16)


class ClusterTopology(StrictModel):
    """Named levels of the network, broadest first; each level is a node label."""

    api_version: Literal["tandem.dev/v1alpha1"]
    kind: Literal["ClusterTopology"]
    metadata: ClusterMeta
    spec: ClusterTopologySpec
    status: dict[str, object] | None = None  # written by the topology controller (api/topology_status.py)

    def level_names(self) -> list[str]:
        return [level.name for level in self.spec.levels]

    def depth(self, level: str) -> int:
        """0 for the broadest level; larger is narrower."""
        return self.level_names().index(level)


# ----------------------------------------------------------------------------- InferenceGroup


class Pack(StrictModel):
    """Where a set of pods must (`required`) or should (`preferred`) share one domain."""

    required: DNSLabel | None = None
    preferred: DNSLabel | None = None


class PlacementScope(StrictModel):
    pack: Pack = Field(default_factory=Pack)


class UnitPlacementScope(PlacementScope):
    """Where one unit may go; `exclusive` gives it the domains of that level it uses to itself."""

    exclusive: DNSLabel | None = None


# What the controller does when a replica loses a pod (deleted, evicted, its node gone):
# re-create the whole replica (the default, as LWS's RecreateGroupOnPodRestart), or create
# only the missing workers where the replica's constraints still hold with its surviving
# pods (a lost leader, or no such room, still re-creates the whole replica).
Recovery = Literal["RecreateReplica", "ReplaceMissingPod"]


class Role(StrictModel):
    name: DNSLabel
    replicas: NonNegativeInt = 1
    # Default: one complete replica (none for a role scaled to zero).
    min_replicas: NonNegativeInt | None = None
    pods_per_replica: PositiveInt = 1
    topology: PlacementScope = Field(default_factory=PlacementScope)
    template: PodTemplateSpec
    worker_template: PodTemplateSpec | None = None
    recovery: Recovery = "RecreateReplica"

    @property
    def minimum(self) -> int:
        """Complete replicas this role needs for its unit to be functional."""
        return min(1, self.replicas) if self.min_replicas is None else self.min_replicas

    def pod_template(self, pod_index: int) -> PodTemplateSpec:
        """Pod 0 is the leader; pods 1..N-1 use workerTemplate when given."""
        if pod_index > 0 and self.worker_template is not None:
            return self.worker_template
        return self.template


class Affinity(StrictModel):
    """Cross-role proximity: every `from` replica near at least one `to` replica."""

    from_: DNSLabel = Field(alias="from")
    to: DNSLabel
    level: DNSLabel
    mode: Literal["Required", "Preferred"] = "Preferred"


class Rollout(StrictModel):
    steps: dict[str, PositiveInt] | None = None
    progression: Literal["OrderScheduled", "OrderReady"] = "OrderScheduled"
    step_timeout_seconds: PositiveInt = 600


class Scaling(StrictModel):
    max_skew: IntOrPercent = 1
    progression: Literal["OrderScheduled", "OrderReady"] = "OrderScheduled"


class RollingUpdate(StrictModel):
    max_surge: IntOrPercent = 1
    max_unavailable: IntOrPercent = 0
    max_skew: IntOrPercent = 1


class Coordination(StrictModel):
    rollout: Rollout = Field(default_factory=Rollout)
    scaling: Scaling = Field(default_factory=Scaling)
    rolling_update: RollingUpdate = Field(default_factory=RollingUpdate)


Backend = Literal["native", "volcano", "koordinator", "kai", "kueue", "workload-api"]


class SchedulerSpec(StrictModel):
    backend: Backend = "native"
    gang_timeout_seconds: PositiveInt = 300
    # A unit that does not fit asks the cluster's node autoscaler for its minimum through a
    # ProvisioningRequest of this class (docs/provisioning.md); absent: the operator's
    # --provisioning-class, if any.
    provisioning_class_name: DNSSubdomain | None = None
    # The scheduler's queue: Volcano/KAI Queue, Kueue LocalQueue (absent: `tandem render
    # --queue`, else `default`). A DNS-1123 subdomain, as each of those objects' names, and at
    # most 63 characters: KAI and Kueue carry it as a label value.
    queue: QueueName | None = None
    # Koordinator's QoS class, the pod label koordinator.sh/qosClass; the values koordinator-sh/
    # koordinator apis/extension/qos.go accepts (QoSLSE .. QoSSystem). Only for backend koordinator.
    qos_class: Literal["LSE", "LSR", "LS", "BE", "SYSTEM"] | None = None


class InferenceGroupSpec(StrictModel):
    topology_name: DNSLabel = "default"
    replicas: NonNegativeInt = 1
    priority: Int32 = 0
    topology: UnitPlacementScope = Field(default_factory=UnitPlacementScope)
    roles: list[Role] = Field(min_length=1, max_length=32)
    affinity: list[Affinity] = Field(default_factory=list)
    coordination: Coordination = Field(default_factory=Coordination)
    scheduler: SchedulerSpec = Field(default_factory=SchedulerSpec)
    autoscaling: AutoscalingSpec | None = None  # absent: replicas are what the spec says


class InferenceGroup(StrictModel):
    """One disaggregated serving deployment: roles that only work together."""

    api_version: Literal["tandem.dev/v1alpha1"]
    kind: Literal["InferenceGroup"]
    metadata: NamespacedMeta
    spec: InferenceGroupSpec
    # Written by the controller; accepted so `kubectl get -o yaml` output loads.
    status: dict[str, object] | None = None

    def role(self, name: str) -> Role:
        for role in self.spec.roles:
            if role.name == name:
                return role
        raise KeyError(name)
