"""`spec.autoscaling` of an InferenceGroup: how the prefill, decode and any other managed roles grow and shrink.

Only field-local rules live here; rules that relate fields to each other or to the
group's roles (unknown roles, min > max, bands whose minimums exceed 100%, a GPU budget
below the minimums) are in `tandem.api.validation` so each names its own field path.
Every policy's block may be present at once, so a comparison can switch `policy` alone.
`metrics` is the group's own metrics source over the operator's flags (its rules are all
field-local: patterns the CRD's schema holds too, and the PromQL template check, which
only the webhook and `tandem validate` run); `tandem.autoscaling.metrics_source` chooses from it.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field

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


# ----------------------------------------------------------------------------- metrics source

MetricsSourceName = Literal["pods", "prometheus"]
# Prometheus' data model: a metric name is [a-zA-Z_:][a-zA-Z0-9_:]*.
METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
# A server's address: http(s)://host[:port][/prefix] (a DNS name, an IPv4 or a bracketed IPv6).
HTTP_URL = re.compile(r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?)(:[0-9]{1,5})?(/[^\s?#]*)?$")
URL_PATH = re.compile(r"^/[^\s?#]*$")
# A container port's name (IANA_SVC_NAME): lower-case letters, digits and '-', at least one letter.
PORT_NAME = re.compile(r"^(?=.*[a-z])[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# The placeholders `tandem.autoscaling.prometheus_queries.render` fills in; `$1` (a
# label_replace group) is PromQL's own and left alone.
QUERY_PLACEHOLDERS = ("selector", "window")
_PLACEHOLDER = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
_CLOSING = {")": "(", "]": "[", "}": "{"}


def _metric_name(value: str) -> str:
    if len(value) > 200 or not METRIC_NAME.match(value):
        raise ValueError(f"{value!r} is not a Prometheus metric name (letters, digits, '_' and ':', not starting with a digit; at most 200)")
    return value


def _http_url(value: str) -> str:
    match = HTTP_URL.match(value) if len(value) <= 2048 else None
    if match is None or (match[3] is not None and not 1 <= int(match[3][1:]) <= 65535) or not _ipv6_or_name(match[1]):
        raise ValueError(f"{value!r} is not http(s)://host[:port][/path]")
    return value


def _ipv6_or_name(host: str) -> bool:
    """A bracketed host is an IPv6 address (as the client reading the URL requires); a name passes."""
    if not host.startswith("["):
        return True
    try:
        ipaddress.IPv6Address(host[1:-1])
    except ValueError:
        return False
    return True


def _url_path(value: str) -> str:
    if len(value) > 1024 or not URL_PATH.match(value):
        raise ValueError(f"{value!r} is not a URL path (starting with '/', no spaces, '?' or '#')")
    return value


def _port_type(value: object) -> object:
    """Reject other types here, with one message, before the int|str union reports two."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("must be a port number or a container port's name")
    return value


def _port(value: int | str) -> int | str:
    if isinstance(value, int):
        if not 1 <= value <= 65535:
            raise ValueError(f"must be a port number from 1 to 65535, got {value}")
        return value
    if len(value) > 15 or not PORT_NAME.match(value):
        raise ValueError(f"{value!r} is not a container port's name (at most 15 lower-case letters, digits and '-', with a letter)")
    return value


def _query_template(value: str) -> str:
    """A PromQL template as `prometheus_queries.render` fills it: `$selector` (the group's
    label matchers) present, no other `$name`, brackets balanced outside strings."""
    if len(value) > 4096:
        raise ValueError(f"must be at most 4096 characters, got {len(value)}")
    unknown = sorted({m for m in _PLACEHOLDER.findall(value) if m not in QUERY_PLACEHOLDERS})
    if unknown:
        raise ValueError(f"${unknown[0]} is not a placeholder (only $selector and $window are filled in)")
    if "$selector" not in value:
        raise ValueError("must use $selector (the group's label matchers), e.g. my_queue{$selector}")
    problem = _unbalanced(value)
    if problem:
        raise ValueError(f"is not PromQL: {problem}")
    return value


def _unbalanced(text: str) -> str | None:
    """Where brackets do not pair up, outside quoted strings; None when they do."""
    opened: list[str] = []
    quote: str | None = None
    escaped = False
    for char in text:
        if quote is not None:
            if escaped:
                escaped = False
            elif char == "\\" and quote != "`":
                escaped = True
            elif char == quote:
                quote = None
        elif char in "\"'`":
            quote = char
        elif char in "([{":
            opened.append(char)
        elif char in _CLOSING:
            if not opened or opened.pop() != _CLOSING[char]:
                return f"unmatched {char!r}"
    if quote is not None:
        return f"unterminated string {quote}"
    return f"unclosed {opened[-1]!r}" if opened else None


MetricName = Annotated[str, Field(strict=True), AfterValidator(_metric_name)]
HttpUrl = Annotated[str, Field(strict=True), AfterValidator(_http_url)]
UrlPath = Annotated[str, Field(strict=True), AfterValidator(_url_path)]
PortOrName = Annotated[int | str, BeforeValidator(_port_type), AfterValidator(_port)]
QueryTemplate = Annotated[str, Field(strict=True), AfterValidator(_query_template)]


class EngineSeries(StrictModel):
    """Which series of an engine's `/metrics` give each figure (`tandem.autoscaling.engine_metrics`);
    a figure not named keeps the engine's default (vLLM, SGLang) or, for another engine, is not measured."""

    waiting: MetricName | None = None  # gauge: requests queued
    running: MetricName | None = None  # gauge: requests in the running batch
    kv_usage: MetricName | None = None  # gauge: KV-cache use, 0..1
    prompt_tokens: MetricName | None = None  # counter: prompt tokens processed (`_total` optional)
    generation_tokens: MetricName | None = None  # counter: tokens generated
    requests: MetricName | None = None  # counter: requests finished
    ttft: MetricName | None = None  # histogram (its name without `_bucket`): time to first token, seconds
    itl: MetricName | None = None  # histogram: inter-token latency, seconds


class PodsMetricsSource(StrictModel):
    """Where the operator scrapes the group's Ready replica leaders."""

    port: PortOrName | None = None  # default: the container port named `metrics`, else the engine's HTTP port
    path: UrlPath = "/metrics"


class PrometheusQueries(StrictModel):
    """PromQL templates per figure (`tandem.autoscaling.prometheus_queries.EngineQueries`);
    a figure not given keeps the query made from the engine's series names."""

    scrapes: QueryTemplate | None = None
    waiting: QueryTemplate | None = None
    busy: QueryTemplate | None = None
    kv_usage: QueryTemplate | None = None
    prompt_tokens: QueryTemplate | None = None
    generation_tokens: QueryTemplate | None = None
    requests: QueryTemplate | None = None
    ttft_p90: QueryTemplate | None = None
    itl_p90: QueryTemplate | None = None


class PrometheusMetricsSource(StrictModel):
    """A Prometheus server's HTTP API."""

    url: HttpUrl | None = None  # default: the operator's --prometheus-url
    queries: PrometheusQueries = Field(default_factory=PrometheusQueries)


class MetricsSpec(StrictModel):
    """The group's own metrics source; every field absent keeps the operator's flags."""

    source: MetricsSourceName | None = None  # default: the operator's --metrics-source
    names: EngineSeries = Field(default_factory=EngineSeries)
    pods: PodsMetricsSource = Field(default_factory=PodsMetricsSource)
    prometheus: PrometheusMetricsSource = Field(default_factory=PrometheusMetricsSource)


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
    metrics: MetricsSpec | None = None  # absent: the operator's --metrics-source and --prometheus-url

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
