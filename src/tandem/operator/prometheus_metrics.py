"""A Prometheus server's HTTP API as the autoscaler's metrics source.

    metrics = PrometheusMetrics("http://prometheus.monitoring:9090", cluster.snapshot)
    signals = metrics("serving", "llama", now)       # the autoscaler's `Metrics` callable

Each call lists the group's Ready replica leaders from the cluster (the operator's informer
caches: which pods should have series, their roles and engines), then asks the server one
instant query per figure and engine kind (`GET /api/v1/query`, evaluated at the server's
own time; `Signals.at` is the caller's `now`), with a time-out and through no proxy
(`http.client`). The series must carry the labels the relabel config of
`examples/prometheus/prometheus.yml` gives them (`namespace`, `pod`, `tandem_dev_group`,
`tandem_dev_role`). What the answers mean, a missing pod, a stale series, a server that is
down: `tandem.autoscaling.prometheus_queries`. Nothing is kept between calls: the window
is Prometheus' own.
"""

from __future__ import annotations

import http.client
import json
import math
import urllib.parse
from typing import Any, Callable, Mapping

from tandem.api.engines import ENGINE_ANNOTATION, engine_of, serving_role
from tandem.api.naming import GROUP_LABEL, ROLE_LABEL
from tandem.autoscaling.engine_metrics import ENGINE_NAMES, renamed
from tandem.autoscaling.prometheus_queries import (
    ENGINE_QUERIES,
    PER_POD,
    POD_LABEL,
    EngineQueries,
    KindAnswers,
    LeaderPod,
    default_queries,
    group_signals,
    render,
    with_queries,
)
from tandem.autoscaling.signals import Signals
from tandem.cluster.payloads import as_pod
from tandem.cluster.pods import serving_leader
from tandem.cluster.ports import ApiError, Reader

DEFAULT_WINDOW_S = 60.0  # as the pods source
DEFAULT_TIMEOUT_S = 5.0
MAX_ANSWER_BYTES = 16 * 1024 * 1024


class PrometheusDown(Exception):
    """The server gave no usable answer to a query (refused, time-out, not 200, an error)."""


def server_url(url: str) -> urllib.parse.SplitResult:
    """`url` read as a Prometheus server's address; ValueError unless it is http(s)://host[:port][/prefix]."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"--prometheus-url: {url!r} is not http(s)://host[:port]")
    return parsed


class PrometheusMetrics:
    """The autoscaler's `Metrics` over a Prometheus server's HTTP API."""

    def __init__(
        self,
        url: str,
        snapshot: Callable[[], Reader],
        *,
        window_s: float = DEFAULT_WINDOW_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        queries: Mapping[str, EngineQueries] = ENGINE_QUERIES,
        renames: Mapping[str, str] | None = None,
        overrides: Mapping[str, str] | None = None,
    ):
        """`url`: the server (`http://host:9090`, a path prefix kept); `snapshot` gives a Reader
        of the cluster; `queries` by engine kind (a pod annotated `tandem.dev/engine: KIND` is
        read with `queries[KIND]`). A group's own mapping (`spec.autoscaling.metrics`):
        `renames` (figure -> series) makes every engine kind's queries from its series with
        those in their place, an annotated kind of any name included; `overrides` (figure of
        `EngineQueries` -> template) replace those queries. A `url` that is not
        http(s)://host raises ValueError."""
        self.url = url
        self._parsed = server_url(url)
        self._snapshot = snapshot
        self.window_s = float(window_s)
        self.timeout_s = float(timeout_s)
        self._queries = dict(queries)
        self._renames = dict(renames or {})
        self._overrides = dict(overrides or {})

    def __call__(self, namespace: str, name: str, now: float) -> Signals | None:
        """The group's signals over the window ending at the server's now; None when Prometheus
        is down or has no series of the group's engine pods."""
        reader = self._snapshot()
        try:
            group = reader.get("InferenceGroup", namespace, name)
        except ApiError:
            return None
        roles = [str(r.get("name")) for r in (group.get("spec") or {}).get("roles") or []]
        pods = self._leaders(reader, namespace, name)
        kinds = sorted({p.kind for p in pods.values() if p.kind is not None})
        try:
            answers = {kind: self._ask(self._read_with(kind), namespace, name) for kind in kinds}
        except PrometheusDown:
            return None
        return group_signals(pods, roles, answers, now, self.window_s)

    def _read_with(self, kind: str) -> EngineQueries:
        """The queries of an engine kind that is read (`_reads`)."""
        if not self._renames and not self._overrides:
            return self._queries[kind]
        if self._renames or kind not in self._queries:
            base = default_queries(renamed(ENGINE_NAMES.get(kind), self._renames))
        else:
            base = self._queries[kind]
        return with_queries(base, self._overrides)

    def _reads(self, kind: str) -> bool:
        """Whether pods of this engine kind are read: it has queries, or the group maps its own."""
        return kind in self._queries or bool(self._renames or self._overrides)

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's result vector; PrometheusDown on any failure."""
        path = (self._parsed.path.rstrip("/") or "") + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        connection_type = http.client.HTTPSConnection if self._parsed.scheme == "https" else http.client.HTTPConnection
        connection = connection_type(self._parsed.hostname or "", self._parsed.port, timeout=self.timeout_s)
        try:
            connection.request("GET", path, headers={"Accept": "application/json"})
            answer = connection.getresponse()
            body = answer.read(MAX_ANSWER_BYTES + 1)
            if answer.status != 200 or len(body) > MAX_ANSWER_BYTES:
                raise PrometheusDown(f"{promql}: HTTP {answer.status}")
            payload = json.loads(body)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise PrometheusDown(f"{promql}: {exc}") from exc
        finally:
            connection.close()
        if not isinstance(payload, dict):
            raise PrometheusDown(f"{promql}: not a JSON object")
        data = payload.get("data")
        if payload.get("status") != "success" or not isinstance(data, dict) or data.get("resultType") != "vector":
            raise PrometheusDown(f"{promql}: {payload.get('error') or 'not an instant vector'}")
        result = data.get("result")
        if not isinstance(result, list):
            raise PrometheusDown(f"{promql}: no result")
        return result

    def _ask(self, queries: EngineQueries, namespace: str, name: str) -> KindAnswers:
        per_pod: dict[str, dict[str, float]] = {}
        for figure in PER_POD:
            if not getattr(queries, figure):
                continue  # no query for it: not measured
            values: dict[str, float] = {}
            for series in self.query(render(getattr(queries, figure), namespace, name, self.window_s)):
                pod = (series.get("metric") or {}).get(POD_LABEL)
                value = _value(series)
                if isinstance(pod, str) and not math.isnan(value):
                    values[pod] = value
            per_pod[figure] = values
        return KindAnswers(
            per_pod=per_pod,
            ttft_p90=self._one(render(queries.ttft_p90, namespace, name, self.window_s)),  # "" stays "": not asked
            itl_p90=self._one(render(queries.itl_p90, namespace, name, self.window_s)),
        )

    def _one(self, promql: str) -> float:
        """A group query's value: NaN with no query, no series or NaN (nothing observed in the window)."""
        if not promql:
            return math.nan
        values = [v for v in (_value(s) for s in self.query(promql)) if not math.isnan(v)]
        return max(values) if values else math.nan

    def _leaders(self, reader: Reader, namespace: str, name: str) -> dict[str, LeaderPod]:
        """The group's Ready replica leaders (pod index 0), by pod name."""
        leaders: dict[str, LeaderPod] = {}
        for pod in reader.list("Pod", namespace, labels={GROUP_LABEL: name}):
            meta = pod.get("metadata") or {}
            if not serving_leader(as_pod(pod)):
                continue
            role = (meta.get("labels") or {}).get(ROLE_LABEL, "")
            engine = engine_of(pod)
            if engine is not None:
                kind: str | None = engine.kind if self._reads(engine.kind) else None
                leaders[meta["name"]] = LeaderPod(role, serving_role(engine, pod), kind)
                continue
            annotated = (meta.get("annotations") or {}).get(ENGINE_ANNOTATION)
            read = isinstance(annotated, str) and self._reads(annotated)
            leaders[meta["name"]] = LeaderPod(role, None, annotated if read else None)
        return leaders


def _value(series: Mapping[str, Any]) -> float:
    """A sample's value (`[time, "1.5"]`); NaN when it is not one."""
    try:
        return float(series["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return math.nan
