"""PrometheusMetrics against a tiny fake of Prometheus' HTTP API on 127.0.0.1: the queries it
sends for a group, how the answers become Signals, and that a server down, failing or
answering nonsense gives no signals (so nothing is decided on missing data)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from e2e.processes import free_port
from support.metrics_fakes import STEADY, FakePrometheus, figure_of, vector
from support.one_group import HeldPods
from tandem.autoscaling.prometheus_queries import GROUP_LABEL, NAMESPACE_LABEL, POD_LABEL, ROLE_LABEL
from tandem.operator.prometheus_metrics import PrometheusMetrics

NS, GROUP = "serving", "g"
VLLM = "vllm/vllm-openai:v0.11.0"


def pod(name: str, role: str, kv_role: str, *, ready: bool = True, index: int = 0) -> dict[str, Any]:
    args = ["--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": kv_role})]
    return {"metadata": {"name": name, "namespace": NS, "labels": {"tandem.dev/group": GROUP, "tandem.dev/role": role, "tandem.dev/pod-index": str(index)}},
            "spec": {"containers": [{"name": "vllm", "image": VLLM, "command": ["vllm", "serve", "m"], "args": args}]},
            "status": {"podIP": "127.10.0.9", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


class Cluster(HeldPods):
    """A Reader holding one group and its pods."""

    def __init__(self, pods: list[dict[str, Any]]):
        super().__init__(NS, GROUP, ["prefill", "decode"], pods)

    def pods(self, namespace: str | None) -> list[dict[str, Any]]:
        assert namespace == NS
        return self.held


@pytest.fixture
def prometheus() -> Iterator[FakePrometheus]:
    fake = FakePrometheus()
    yield fake
    fake.close()


def group_pods() -> list[dict[str, Any]]:
    return [pod("p-0", "prefill", "kv_producer"), pod("d-0", "decode", "kv_consumer"), pod("d-1", "decode", "kv_consumer"),
            pod("d-1-w", "decode", "kv_consumer", index=1), pod("d-2", "decode", "kv_consumer", ready=False)]


def test_one_query_per_figure_selects_the_group_over_the_window_and_the_answers_become_signals(prometheus) -> None:
    metrics = PrometheusMetrics(prometheus.url, Cluster(group_pods()), window_s=30)
    got = metrics(NS, GROUP, 42.0)
    assert len(prometheus.queries) == 9 and sorted(map(figure_of, prometheus.queries)) == sorted(STEADY)
    assert all('namespace="serving",tandem_dev_group="g"' in q and "[30s" in q for q in prometheus.queries)
    assert got is not None and got.at == 42.0 and got.window_s == 30
    decode, prefill = got.roles["decode"], got.roles["prefill"]
    assert decode.replicas == 2, "Ready replica leaders only: not a worker, not a pod still loading"
    assert (decode.queue_depth, decode.busy_fraction, decode.kv_utilization, decode.tokens_per_s) == (1, 0.5, pytest.approx(0.2), 100)
    assert (prefill.replicas, prefill.queue_depth, prefill.tokens_per_s) == (1, 2, 800)
    assert (got.arrival_rate, got.input_tokens_per_s, got.output_tokens_per_s) == (3, 800, 100)
    assert got.ttft_p90_s == 0.25 and math.isnan(got.itl_p90_s), "NaN: no token in the window"


def test_a_pod_whose_series_went_stale_leaves_its_role_not_measured(prometheus) -> None:
    stale = {**STEADY, "scrapes": {"p-0": 12, "d-0": 12}, "waiting": {"p-0": 2, "d-0": 1}, "generation_tokens": {"d-0": 60}}
    prometheus.respond = lambda figure: (200, {"status": "success", "data": {"resultType": "vector", "result": vector(stale[figure])}})
    got = PrometheusMetrics(prometheus.url, Cluster(group_pods()))(NS, GROUP, 0.0)
    assert got is not None and got.roles["decode"].replicas == 2
    assert math.isnan(got.roles["decode"].queue_depth) and math.isnan(got.roles["decode"].tokens_per_s), "one series for two Ready replicas"
    assert got.roles["prefill"].tokens_per_s == 800


@pytest.mark.parametrize("answer", [
    (503, "service unavailable"),
    (200, {"status": "error", "errorType": "timeout", "error": "query timed out"}),
    (200, "not json"),
    (200, {"status": "success", "data": {"resultType": "matrix", "result": []}}),
])
def test_a_failing_answer_to_any_query_gives_no_signals(prometheus, answer) -> None:
    prometheus.respond = lambda figure: answer if figure == "busy" else (200, {"status": "success", "data": {"resultType": "vector", "result": vector(STEADY[figure])}})
    assert PrometheusMetrics(prometheus.url, Cluster(group_pods()))(NS, GROUP, 0.0) is None


def test_prometheus_down_or_without_the_groups_series_gives_no_signals(prometheus) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    assert PrometheusMetrics(nobody, Cluster(group_pods()), timeout_s=1)(NS, GROUP, 0.0) is None
    prometheus.respond = lambda figure: (200, {"status": "success", "data": {"resultType": "vector", "result": []}})
    assert PrometheusMetrics(prometheus.url, Cluster(group_pods()))(NS, GROUP, 0.0) is None, "the relabel config missing, or every series stale"


def test_a_group_gone_or_without_ready_engines_gives_no_signals_and_asks_nothing(prometheus) -> None:
    cluster = Cluster([pod("d-2", "decode", "kv_consumer", ready=False)])
    assert PrometheusMetrics(prometheus.url, cluster)(NS, GROUP, 0.0) is None
    cluster.group = None
    assert PrometheusMetrics(prometheus.url, cluster)(NS, GROUP, 0.0) is None
    assert prometheus.queries == []


def tgi_figure(query: str) -> str:
    """Which figure a query made from TGI's series (or the group's own busy query) asks for."""
    for marker, figure in (("count_over_time", "scrapes"), ("max_over_time", "busy"), ("tgi_queue_size", "waiting"),
                           ("input_length_sum", "prompt_tokens"), ("generated_tokens_sum", "generation_tokens"),
                           ("tgi_request_success", "requests"), ("mean_time_per_token", "itl_p90")):
        if marker in query:
            return figure
    raise AssertionError(query)


def test_a_group_naming_its_engines_series_and_a_query_of_its_own_is_asked_for_those(prometheus) -> None:
    """spec.autoscaling.metrics with source prometheus: the queries are made from the group's
    names (TGI's), its own template replaces one, and a figure with no series is not asked."""
    tgi = {"waiting": "tgi_queue_size", "running": "tgi_batch_current_size", "requests": "tgi_request_success",
           "prompt_tokens": "tgi_request_input_length_sum", "generation_tokens": "tgi_request_generated_tokens_sum",
           "itl": "tgi_request_mean_time_per_token_duration"}
    busy = "avg by (pod) (max_over_time(tgi_batch_current_size{$selector}[$window]) > bool 0)"
    pods = []
    for made in group_pods()[:3]:
        made["metadata"]["annotations"] = {"tandem.dev/engine": "tgi"}
        made["spec"]["containers"][0] = {"name": "tgi", "image": "ghcr.io/huggingface/text-generation-inference:3.3"}
        pods.append(made)
    prometheus.classify = tgi_figure
    got = PrometheusMetrics(prometheus.url, Cluster(pods), window_s=30, renames=tgi, overrides={"busy": busy})(NS, GROUP, 0.0)
    assert sorted(map(tgi_figure, prometheus.queries)) == sorted(["scrapes", "waiting", "busy", "prompt_tokens", "generation_tokens", "requests", "itl_p90"])
    assert 'avg by (pod) (max_over_time(tgi_batch_current_size{namespace="serving",tandem_dev_group="g"}[30s]) > bool 0)' in prometheus.queries
    assert got is not None and got.roles["decode"].queue_depth == 1 and got.roles["decode"].tokens_per_s == 100
    assert math.isnan(got.roles["decode"].kv_utilization) and math.isnan(got.ttft_p90_s), "no series named: not asked, not measured"
    assert PrometheusMetrics(prometheus.url, Cluster(pods))(NS, GROUP, 0.0) is None, "without the group's names TGI pods are not read"


def test_a_url_that_is_not_http_is_refused_naming_the_flag() -> None:
    with pytest.raises(ValueError, match="^--prometheus-url: 'prometheus:9090'"):
        PrometheusMetrics("prometheus:9090", Cluster([]))


def test_the_docs_show_the_relabel_config_that_ships() -> None:
    repo = Path(__file__).resolve().parents[2]
    shipped = yaml.safe_load((repo / "examples" / "prometheus" / "prometheus.yml").read_text())["scrape_configs"][0]
    section = (repo / "docs" / "autoscaling.md").read_text().split("## Signals from a Prometheus server", 1)[1]
    shown = yaml.safe_load(section.split("```yaml", 1)[1].split("```", 1)[0])["scrape_configs"][0]
    assert shown["relabel_configs"] == shipped["relabel_configs"]
    assert shown["kubernetes_sd_configs"] == shipped["kubernetes_sd_configs"] == [{"role": "pod"}]
    targets = {r.get("target_label") for r in shipped["relabel_configs"]} - {None}
    assert targets == {NAMESPACE_LABEL, POD_LABEL, GROUP_LABEL, ROLE_LABEL}, "the labels the queries select on"
