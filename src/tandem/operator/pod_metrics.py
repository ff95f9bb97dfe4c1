"""The pods' own `/metrics` as the autoscaler's metrics source (no Prometheus needed).

    metrics = PodMetrics(cluster.snapshot)          # one per operator; holds the scrape history
    signals = metrics("serving", "llama", now)       # the autoscaler's `Metrics` callable

Each call scrapes the group's Ready replica leaders (pod index 0, the one serving the
engine's HTTP) once: a plain HTTP GET of `/metrics` on the pod IP and the engine's port (a
container port named `metrics` when the engine container declares one; a group may name
another port, path and series: `spec.autoscaling.metrics`), with a time-out,
through no proxy (`http.client`), parsed with prometheus-client's parser. The round joins the
group's history; `tandem.autoscaling.scrape_window` turns the history inside the window into
`Signals` and states what a counter reset, a pod missing from a scrape, a stale series and
all scrapes failing mean. A pod that does not answer never raises: it is missing.
"""

from __future__ import annotations

import http.client
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping

from prometheus_client.parser import text_string_to_metric_families

from tandem.api.engines import ENGINE_ANNOTATION, HTTP_PORT_NAME, engine_of, serving_role
from tandem.api.naming import GROUP_LABEL, ROLE_LABEL
from tandem.autoscaling.engine_metrics import ENGINE_NAMES, EngineNames, PodReading, Sample, read_pod, renamed
from tandem.autoscaling.scrape_window import ScrapedPod, ScrapeRound, Serves, window_signals
from tandem.autoscaling.signals import Signals
from tandem.cluster.payloads import as_pod
from tandem.cluster.pods import serving_leader
from tandem.cluster.ports import ApiError, Reader

METRICS_PORT_NAME = "metrics"
DEFAULT_WINDOW_S = 60.0  # Knative's stable window, and Kthena's default
DEFAULT_TIMEOUT_S = 2.0
DEFAULT_PATH = "/metrics"
MAX_EXPOSITION_BYTES = 16 * 1024 * 1024


class PodMetrics:
    """The autoscaler's `Metrics` over the group's pods' own `/metrics`."""

    def __init__(
        self,
        snapshot: Callable[[], Reader],
        *,
        window_s: float = DEFAULT_WINDOW_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        names: Mapping[str, EngineNames] = ENGINE_NAMES,
        renames: Mapping[str, str] | None = None,
        port: int | str | None = None,
        path: str = DEFAULT_PATH,
        parallel: int = 8,
    ):
        """`snapshot` gives a Reader of the cluster (the operator's informer caches); `names`
        maps each engine kind to its series (add a kind for another engine: a pod annotated
        `tandem.dev/engine: KIND` is read with `names[KIND]`). A group's own mapping
        (`spec.autoscaling.metrics`): `renames` reads each figure it names from that series, at
        every engine pod, an annotated one of any kind included; `port` (a number, or a
        container port's name) and `path` say where to scrape."""
        self._snapshot = snapshot
        self.window_s = float(window_s)
        self.timeout_s = float(timeout_s)
        self._names = dict(names)
        self._renames = dict(renames or {})
        self.port = port
        self.path = path
        self._parallel = max(1, parallel)
        self._history: dict[tuple[str, str], list[ScrapeRound]] = {}
        self._lock = threading.Lock()

    def __call__(self, namespace: str, name: str, now: float) -> Signals | None:
        """Scrape the group once at `now` (the caller's clock) and read the window ending there."""
        reader = self._snapshot()
        try:
            group = reader.get("InferenceGroup", namespace, name)
        except ApiError:
            self.forget(namespace, name)
            return None
        roles = [str(r.get("name")) for r in (group.get("spec") or {}).get("roles") or []]
        targets = self._targets(reader, namespace, name)
        with ThreadPoolExecutor(max_workers=self._parallel) as pool:
            readings = dict(zip(targets, pool.map(lambda pod: self._scrape(*targets[pod][2:]), targets)))
        scrape = ScrapeRound(now, {
            pod: ScrapedPod(role, serves, readings[pod], engine=names is not None) for pod, (role, serves, names, _, _) in sorted(targets.items())
        })
        with self._lock:
            rounds = [r for r in self._history.get((namespace, name), []) if r.at > now - self.window_s and r.at <= now]
            rounds.append(scrape)
            self._history[(namespace, name)] = rounds
            kept = list(rounds)
        return window_signals(kept, roles, self.window_s)

    def last_round(self, namespace: str, name: str) -> ScrapeRound | None:
        """The group's latest scrape (its time, and each Ready leader with its reading or None
        when it did not answer), for the operator's own metrics and messages."""
        with self._lock:
            rounds = self._history.get((namespace, name))
            return rounds[-1] if rounds else None

    def forget(self, namespace: str, name: str) -> None:
        """Drop a group's history (the group is gone)."""
        with self._lock:
            self._history.pop((namespace, name), None)

    def _targets(self, reader: Reader, namespace: str, name: str) -> dict[str, tuple[str, Serves, EngineNames | None, int, str]]:
        """Ready leader pods of the group: (role, serves, names, port, ip) by pod name."""
        targets: dict[str, tuple[str, Serves, EngineNames | None, int, str]] = {}
        for pod in reader.list("Pod", namespace, labels={GROUP_LABEL: name}):
            meta = pod.get("metadata") or {}
            ip = (pod.get("status") or {}).get("podIP")
            if not ip or not serving_leader(as_pod(pod)):
                continue
            role = (meta.get("labels") or {}).get(ROLE_LABEL, "")
            targets[meta["name"]] = (role, *self._endpoint(pod), ip)
        return targets

    def _endpoint(self, pod: Mapping[str, Any]) -> tuple[Serves, EngineNames | None, int]:
        """What the pod's engine serves, its series' names and its metrics port (0: unknown).

        SGLang and vLLM are recognised from the command line (`tandem.api.engines`); another
        engine by the annotation `tandem.dev/engine: KIND` with `names[KIND]` given, or any
        KIND when the group names series (`renames`). Its port: the group's `port`, else the
        container port named `metrics`, else the engine's (`http` for another engine)."""
        kind = ((pod.get("metadata") or {}).get("annotations") or {}).get(ENGINE_ANNOTATION)
        containers = (pod.get("spec") or {}).get("containers") or []
        engine = engine_of(pod)
        if engine is not None:
            chosen = self._chosen_port(containers, engine.container)
            port = chosen if chosen is not None else _named_port(containers[engine.container], METRICS_PORT_NAME) or engine.port
            return serving_role(engine, pod), self._read_with(engine.kind), port
        names = self._read_with(kind) if isinstance(kind, str) else None
        chosen = self._chosen_port(containers, 0)
        if chosen is not None:
            return None, names, chosen
        for wanted in (METRICS_PORT_NAME, HTTP_PORT_NAME):
            for container in containers:
                named = _named_port(container, wanted)
                if named:
                    return None, names, named
        return None, names, 0

    def _read_with(self, kind: str) -> EngineNames | None:
        """The names an engine of `kind` is read with: its own with the group's in their place;
        None when there are neither (it is not read)."""
        own = self._names.get(kind)
        return renamed(own, self._renames) if self._renames else own

    def _chosen_port(self, containers: list[Mapping[str, Any]], first: int) -> int | None:
        """The group's `port`: a number as it is, a name looked up in the engine container
        first, then the others (0: named but not declared, so the pod is not read)."""
        if self.port is None or isinstance(self.port, int):
            return self.port
        ordered = containers[first:first + 1] + containers[:first] + containers[first + 1:]
        return next((p for c in ordered if (p := _named_port(c, self.port))), 0)

    def _scrape(self, names: EngineNames | None, port: int, ip: str) -> PodReading | None:
        if names is None or port <= 0:
            return None
        text = fetch_exposition(ip, port, self.timeout_s, self.path)
        if text is None:
            return None
        try:
            return read_pod(parse_exposition(text), names)
        except (ValueError, IndexError, KeyError, TypeError):  # what the parser raises on a malformed line
            return None


def _named_port(container: Mapping[str, Any], name: str) -> int | None:
    port = next((p.get("containerPort") for p in container.get("ports") or [] if p.get("name") == name), None)
    return int(port) if isinstance(port, int) and port > 0 else None


def fetch_exposition(ip: str, port: int, timeout_s: float, path: str = DEFAULT_PATH) -> str | None:
    """The body of `GET http://ip:port/path`, or None on any failure (refused, time-out, not 200)."""
    connection = http.client.HTTPConnection(ip, port, timeout=timeout_s)
    try:
        connection.request("GET", path, headers={"Accept": "text/plain"})
        answer = connection.getresponse()
        body = answer.read(MAX_EXPOSITION_BYTES + 1)
        if answer.status != 200 or len(body) > MAX_EXPOSITION_BYTES:
            return None
        return body.decode("utf-8")
    except (OSError, http.client.HTTPException, UnicodeDecodeError):
        return None
    finally:
        connection.close()


def parse_exposition(text: str) -> list[Sample]:
    """Every sample of a Prometheus text exposition; ValueError when it does not parse."""
    samples: list[Sample] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.append(Sample(sample.name, tuple(sorted(sample.labels.items())), float(sample.value)))
    return samples
