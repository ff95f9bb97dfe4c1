"""`spec.autoscaling` of an InferenceGroup: how the prefill, decode and any other managed roles grow and shrink.

Only field-local rules live here; rules that relate fields to each other or to the
group's roles (unknown roles, min > max, bands whose minimums exceed 100%, a GPU budget
below the minimums) are in `tandem.api.validation` so each names its own field path.
Every policy's block may be present at once, so a comparison can switch `policy` alone.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from tandem.api.base import DNSLabel, NonNegativeInt, PositiveInt, StrictModel
from tandem.api.quantity import MILLI
from tandem.api.naming import GPU_RESOURCE

if TYPE_CHECKING:  # resources imports this module; the type is only for the signature
    from tandem.api.resources import Role


Policy = Literal["FixedRatio", "PreferredBand", "SLO", "Independent"]
# How a ratio-keeping policy reconciles each role's own need with the ratio (docs/autoscaling.md,
# "Ratio enforcement"): keep the total and re-split it, or raise the role that is short.
RatioEnforcement = Literal["keepTotal", "raiseShort"]
# Per-role figures a target can name (see docs/autoscaling.md for how each becomes replicas).
Metric = Literal["queueDepth", "busyFraction", "kvUtilization", "tokensPerSecond", "ttftSeconds", "itlSeconds"]
# Metrics that are fractions of a replica's capacity: a target above 1 could never be reached.
FRACTION_METRICS = ("busyFraction", "kvUtilization")

# Strict: an int is accepted for a float, a string or a boolean is not (as for counts).
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)]
Percent = Annotated[int, Field(ge=0, le=100, strict=True)]
# Kubernetes caps HPA stabilisation windows at one hour; so does tandem.
WindowSeconds = Annotated[int, Field(ge=0, le=3600, strict=True)]


class RoleBounds(StrictModel):
    """Replicas of one managed role PER UNIT the autoscaler may choose between."""

    min_replicas: NonNegativeInt | None = None  # default: the role's own minReplicas
    max_replicas: PositiveInt

    def minimum_for(self, role: Role) -> int:
        """`minReplicas`, or the role's own minimum when it is not given."""
        return role.minimum if self.min_replicas is None else self.min_replicas


class Stabilization(StrictModel):
    """Kubernetes HPA behaviour: scale up to the lowest, down to the highest recent recommendation."""

    scale_up_seconds: WindowSeconds = 0
    scale_down_seconds: WindowSeconds = 300


class Panic(StrictModel):
    """Knative-style panic: a burst scales up at once and forbids scaling down for a while."""

    threshold_percent: Annotated[int, Field(gt=100, le=100000, strict=True)] = 200
    window_seconds: Annotated[int, Field(ge=1, le=3600, strict=True)] = 60


class MetricTarget(StrictModel):
    metric: Metric
    value: PositiveFloat


class FixedRatio(StrictModel):
    """HeteroScale: decode tokens/s sizes decode; prefill follows at a fixed ratio."""

    ratio: dict[str, PositiveInt]
    decode_tokens_per_second_per_replica: PositiveFloat


class Band(StrictModel):
    """A role's share of the managed total, in percent."""

    min_percent: Percent = 0
    max_percent: Percent = 100


class PreferredBand(StrictModel):
    """Kthena's draft: a cost+pressure blend of the total, clipped to per-role percent bands."""

    targets: dict[str, MetricTarget]
    bands: dict[str, Band] = Field(default_factory=dict)
    cost_weight: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False, strict=True)] = 0.5


class SLO(StrictModel):
    """Dynamo's planner: prefill from a TTFT target, decode from an ITL target, under a GPU budget."""

    ttft_seconds: PositiveFloat
    itl_seconds: PositiveFloat
    prefill_tokens_per_second_per_replica: PositiveFloat
    decode_tokens_per_second_per_replica: PositiveFloat
    gpu_budget: PositiveInt | None = None  # GPUs of the managed roles, all units together


class Independent(StrictModel):
    """The baseline: one Kubernetes-HPA-style autoscaler per role, each on its own metric."""

    targets: dict[str, MetricTarget]
    tolerance_percent: Percent = 10


class AutoscalingSpec(StrictModel):
    policy: Policy
    prefill_role: DNSLabel = "prefill"
    decode_role: DNSLabel = "decode"
    interval_seconds: PositiveInt = 15
    metric_max_age_seconds: PositiveInt = 60
    roles: dict[str, RoleBounds]
    stabilization: Stabilization = Field(default_factory=Stabilization)
    panic: Panic = Field(default_factory=Panic)
    ratio_enforcement: RatioEnforcement = "keepTotal"
    fixed_ratio: FixedRatio | None = None
    preferred_band: PreferredBand | None = None
    slo: SLO | None = None
    independent: Independent | None = None

    @property
    def managed_roles(self) -> tuple[str, ...]:
        """The roles the autoscaler sizes: prefill, decode, then every other role named in
        `roles` (router, encoder, ...) in the order written; ties are broken in this order."""
        pair = (self.prefill_role, self.decode_role)
        return pair + tuple(name for name in self.roles if name not in pair)

    def policy_block(self) -> FixedRatio | PreferredBand | SLO | Independent | None:
        """The configuration block of the chosen policy (None when it is missing)."""
        return {
            "FixedRatio": self.fixed_ratio,
            "PreferredBand": self.preferred_band,
            "SLO": self.slo,
            "Independent": self.independent,
        }[self.policy]


# The wire name of each policy's block, for messages.
POLICY_FIELDS: dict[str, str] = {
    "FixedRatio": "fixedRatio",
    "PreferredBand": "preferredBand",
    "SLO": "slo",
    "Independent": "independent",
}


def gpus_per_replica(role: Role) -> int:
    """Whole GPUs one complete replica requests: its leader pod plus its workers.

    Each pod's request is rounded up to whole GPUs, as placement counts devices.
    """

    def pod_gpus(index: int) -> int:
        return math.ceil(role.pod_template(index).spec.requests().get(GPU_RESOURCE, 0) / MILLI)

    return pod_gpus(0) + (role.pods_per_replica - 1) * pod_gpus(1)
