"""A real Prometheus server (Debian's `prometheus`) scraping the local API server's engine
stand-ins with the shipped scrape job (examples/prometheus/prometheus.yml): PrometheusMetrics
reads the same load as PodMetrics reads from the pods directly, a pod whose series went
stale or that Prometheus does not scrape leaves its role not measured, and Prometheus
stopped gives no signals.

Debian builds Prometheus without Kubernetes service discovery: the job's discovery is a
file of the targets and meta labels Kubernetes' pod role gives (`support.prometheus_server`),
its relabel config the shipped one. Every address is on 127.0.0.0/8: the pods' IPs, the
server, Prometheus' own listener; the config has no remote write and no other job.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from apiserver.engine_pods import PODS, call, vllm_pod
from apiserver.helpers import NS, Client, small_cluster
from e2e.processes import wait_for
from support.prometheus_server import NO_PROMETHEUS, PROMETHEUS, prometheus_server
from tandem.apiserver.server import ApiServer
from tandem.cluster.pods import pod_ready
from tandem.errors import NotFound
from tandem.operator.pod_metrics import PodMetrics
from tandem.operator.prometheus_metrics import PrometheusMetrics

pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason=NO_PROMETHEUS)

GROUP = "g"
WINDOW_S = 12.0
SCALE = 0.001


def member(pod: dict[str, Any], role: str, index: int = 0) -> dict[str, Any]:
    """A group's pod as the operator makes it: its labels, the engine's port named `http`."""
    pod["metadata"].setdefault("labels", {}).update({"tandem.dev/group": GROUP, "tandem.dev/role": role, "tandem.dev/pod-index": str(index)})
    pod["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 8000}]
    return pod


class Snapshot:
    """A Reader over the server: the group as given, its pods as the API lists them."""

    def __init__(self, client: Client, roles: list[str]):
        self.client = client
        self.group = {"metadata": {"name": GROUP, "namespace": NS}, "spec": {"roles": [{"name": r} for r in roles]}}

    def __call__(self) -> Snapshot:
        return self

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        if kind != "InferenceGroup" or name != GROUP:
            raise NotFound(f"{kind} {name} not found")
        return self.group

    def list(self, kind: str, namespace: str | None = None, labels: Any = None, fields: Any = None) -> list[dict[str, Any]]:
        selector = urllib.parse.quote(f"tandem.dev/group={GROUP}")
        return list(self.client.get(f"{PODS}?labelSelector={selector}").body["items"])


def loopback(url: str) -> bool:
    return ipaddress.ip_address(urllib.parse.urlsplit(url).hostname or "").is_loopback


@pytest.fixture
def prometheus_world(tmp_path: Path):
    with ApiServer(objects=small_cluster(gpus=8), engines=True, engine_time_scale=1.0, engine_lifecycle_scale=SCALE) as server:
        with prometheus_server(tmp_path) as prometheus:
            yield Client(server.url), prometheus


def close(got: float, want: float, rel: float, abs_: float = 0.0) -> bool:
    return (math.isnan(got) and math.isnan(want)) or abs(got - want) <= max(abs_, rel * abs(want))


def test_prometheus_reads_what_the_pods_show_and_nothing_when_it_is_down(prometheus_world) -> None:
    client, prometheus = prometheus_world
    discover = prometheus.discover
    pods = [member(vllm_pod("p-0", kv_role="kv_producer"), "prefill"), member(vllm_pod("d-0", kv_role="kv_consumer"), "decode"),
            member(vllm_pod("d-1", kv_role="kv_consumer"), "decode"), member(vllm_pod("d-1-w", kv_role="kv_consumer"), "decode", index=1)]
    for pod in pods:
        assert client.post(PODS, pod).code == 201
    listed = lambda: Snapshot(client, []).list("Pod")  # noqa: E731
    wait_for(lambda: all(pod_ready(p) for p in listed()) and len(listed()) == 4, 60, "the engine pods Ready", every=0.2)
    discover(listed())
    wait_for(lambda: len(prometheus.active_targets()) == 3 and all(t["health"] == "up" for t in prometheus.active_targets()), 30,
             "Prometheus scraping the three leaders", every=0.2)
    scraped = prometheus.active_targets()
    assert all(loopback(t["scrapeUrl"]) for t in scraped), [t["scrapeUrl"] for t in scraped]
    assert sorted(t["labels"]["pod"] for t in scraped) == ["d-0", "d-1", "p-0"], "the leaders only, on their `http` port"
    assert {t["labels"]["tandem_dev_role"] for t in scraped} == {"prefill", "decode"}
    assert all(t["labels"]["namespace"] == NS and t["labels"]["tandem_dev_group"] == GROUP for t in scraped)

    ips = {p["metadata"]["name"]: p["status"]["podIP"] for p in listed()}
    stop = threading.Event()

    def load(pod: str, tokens: int) -> None:
        """A steady load: one request at a time, `tokens` generated each."""
        while not stop.is_set():
            call(f"http://{ips[pod]}:8000/v1/completions", {"prompt": "a b c d e f g h", "max_tokens": tokens})
            time.sleep(0.05)

    workers = [threading.Thread(target=load, args=args, daemon=True) for args in (("d-0", 20), ("d-1", 10), ("p-0", 1))]
    snapshot = Snapshot(client, ["prefill", "decode"])
    direct = PodMetrics(snapshot, window_s=WINDOW_S)
    through = PrometheusMetrics(prometheus.url, snapshot, window_s=WINDOW_S)
    for worker in workers:
        worker.start()
    try:
        start = time.monotonic()
        while time.monotonic() - start < WINDOW_S + 3:  # the pods source scrapes as often as Prometheus
            direct("serving", GROUP, time.monotonic())
            time.sleep(1.0)
        pods_said = direct("serving", GROUP, time.monotonic())
        prometheus_said = through("serving", GROUP, time.monotonic())
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=30)
    assert pods_said is not None and prometheus_said is not None
    for role in ("prefill", "decode"):
        a, b = pods_said.roles[role], prometheus_said.roles[role]
        assert a.replicas == b.replicas == {"prefill": 1, "decode": 2}[role]
        assert b.tokens_per_s > 0 and close(b.tokens_per_s, a.tokens_per_s, 0.25), (role, a, b)
        assert close(b.queue_depth, a.queue_depth, 0.5, abs_=0.5), (role, a, b)
        # Busy is sampled at each source's own scrapes. The decode pods' long generations
        # keep them busy most of the time, so both samplings agree; p-0's one-token
        # requests are caught by chance (about a dozen scrapes each: two independent
        # estimates of a fraction near 0.2 differ by more than 0.35 a few times in a
        # hundred, which `make test` met), so there only the range is checked.
        if role == "decode":
            assert close(b.busy_fraction, a.busy_fraction, 0.0, abs_=0.35), (role, a, b)
        else:
            assert 0.0 <= a.busy_fraction <= 1.0 and 0.0 <= b.busy_fraction <= 1.0, (role, a, b)
        assert close(b.kv_utilization, a.kv_utilization, 0.5, abs_=0.05), (role, a, b)
    assert close(prometheus_said.arrival_rate, pods_said.arrival_rate, 0.25), (pods_said, prometheus_said)
    assert close(prometheus_said.output_tokens_per_s, pods_said.output_tokens_per_s, 0.25)
    assert close(prometheus_said.input_tokens_per_s, pods_said.input_tokens_per_s, 0.25)
    assert prometheus_said.ttft_p90_s > 0 and close(prometheus_said.ttft_p90_s, pods_said.ttft_p90_s, 0.5)
    assert prometheus_said.itl_p90_s > 0 and close(prometheus_said.itl_p90_s, pods_said.itl_p90_s, 0.5)

    # d-1 leaves Prometheus' targets (its series are marked stale) while it stays Ready: its
    # scrapes inside the window stand for it, then its role is not measured, never summed low.
    discover([p for p in listed() if p["metadata"]["name"] != "d-1"])
    gone = wait_for(lambda: (s := through("serving", GROUP, time.monotonic())) is not None and math.isnan(s.roles["decode"].queue_depth) and s,
                    WINDOW_S + 15, "d-1's series stale past the window", every=0.5)
    assert gone.roles["decode"].replicas == 2 and math.isnan(gone.roles["decode"].tokens_per_s)
    assert gone.roles["prefill"].tokens_per_s == 0.0 and gone.roles["prefill"].queue_depth == 0.0, "p-0 is still scraped, idle"
    discover(listed())

    # A Ready decode pod that Prometheus does not scrape: decode is not measured, prefill is.
    assert client.post(PODS, member(vllm_pod("d-2", kv_role="kv_consumer"), "decode")).code == 201
    wait_for(lambda: pod_ready(client.get(f"{PODS}/d-2").body), 60, "d-2 Ready", every=0.2)
    missing = through("serving", GROUP, time.monotonic())
    assert missing is not None and missing.roles["decode"].replicas == 3
    assert math.isnan(missing.roles["decode"].tokens_per_s) and math.isnan(missing.roles["decode"].queue_depth)
    assert math.isnan(missing.output_tokens_per_s) and not math.isnan(missing.roles["prefill"].tokens_per_s)

    # Prometheus stopped: no signals, so no decision.
    prometheus.stop()
    assert through("serving", GROUP, time.monotonic()) is None
