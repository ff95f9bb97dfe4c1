"""`tandem operator`'s autoscaler loop over the real API (`tandem apiserver`, kubectl).

Without a metrics source (`--metrics-source none`) it does not ignore `spec.autoscaling`
in silence: the autoscaled example gets `ScalingActive=False NoMetricsSource`, a Warning
event `kubectl describe` shows, and keeps the condition while the reconcile pass rolls the
group out; its counts stay as written. With the default source (`pods`) and the local API
server's engine stand-ins, the condition turns True once two scrapes of every pod make a
window; a group that chooses a Prometheus server of its own (spec.autoscaling.metrics) is
read from it while the operator's default stays the pods."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tandem.topology.generate import generate_cluster
from e2e.processes import KUBECTL, NO_KUBECTL, REPO, ApiServer, start_apiserver, start_operator, wait_for
from support.prometheus_server import NO_PROMETHEUS, PROMETHEUS, prometheus_server

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)
NS, NAME = "serving", "llama-70b-chat"
GROUP = f"/apis/tandem.dev/v1alpha1/namespaces/{NS}/inferencegroups/{NAME}"


def _server(tmp_path: Path, *args: str) -> Iterator[ApiServer]:
    topology, nodes = generate_cluster([("block", 2), ("rack", 2), ("host", 4)], 8)
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    (tmp_path / "topology.yaml").write_text(yaml.safe_dump(topology))
    started = start_apiserver(tmp_path, "--cluster", str(tmp_path / "nodes.yaml"), "--no-crds", "--ready-after", "0.2", *args)
    try:
        yield started
    finally:
        assert started.stop() == 0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ApiServer]:
    yield from _server(tmp_path)


@pytest.fixture
def engines(tmp_path: Path) -> Iterator[ApiServer]:
    yield from _server(tmp_path, "--engines", "--engine-time-scale", "0.01")


def _condition(group: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (group.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def test_an_autoscaled_group_without_a_metrics_source_is_told_so(server: ApiServer, tmp_path: Path) -> None:
    server.kubectl("apply", "-k", "deploy/crds")
    operator = start_operator(server, tmp_path, "solo", "--resync", "30", "--metrics-source", "none")
    try:
        server.kubectl("apply", "-f", str(tmp_path / "topology.yaml"))
        server.kubectl("apply", "-f", "examples/llama-70b-autoscaled.yaml")

        def told() -> dict[str, Any] | None:
            group = server.get(GROUP)
            available = _condition(group, "Available")
            return group if _condition(group, "ScalingActive") and available and available["status"] == "True" else None

        group = wait_for(told, 60, "the group Available with its ScalingActive condition")
        condition = _condition(group, "ScalingActive")
        assert condition is not None and (condition["status"], condition["reason"]) == ("False", "NoMetricsSource")
        assert {r["name"]: r["replicas"] for r in group["spec"]["roles"]} == {"prefill": 2, "decode": 1}, "counts as written"
        described = server.kubectl("describe", "ig", NAME, "-n", NS).stdout
        assert "NoMetricsSource" in described and "Warning" in described
        assert '"metrics_source": false' in operator.log() and "NoMetricsSource" in operator.log()
    finally:
        operator.process.terminate()
        assert operator.process.wait(timeout=20) == 0


def test_with_the_pods_own_metrics_the_autoscaler_reads_valid_signals(engines: ApiServer, tmp_path: Path) -> None:
    engines.kubectl("apply", "-k", "deploy/crds")
    operator = start_operator(engines, tmp_path, "solo", "--resync", "30")  # the default source: pods
    try:
        engines.kubectl("apply", "-f", str(tmp_path / "topology.yaml"))
        group = yaml.safe_load((REPO / "examples" / "llama-70b-autoscaled.yaml").read_text())
        group["spec"]["autoscaling"]["intervalSeconds"] = 2  # two decisions, two scrapes, a window: soon
        (tmp_path / "group.yaml").write_text(yaml.safe_dump(group))
        engines.kubectl("apply", "-f", str(tmp_path / "group.yaml"))

        def valid() -> dict[str, Any] | None:
            condition = _condition(engines.get(GROUP), "ScalingActive")
            return condition if condition and condition["status"] == "True" else None

        condition = wait_for(valid, 90, "ScalingActive=True from the pods' /metrics")
        assert condition["reason"] == "ValidSignals"
        assert '"metrics_source": true' in operator.log()
    finally:
        operator.process.terminate()
        assert operator.process.wait(timeout=20) == 0


@pytest.mark.skipif(PROMETHEUS is None, reason=NO_PROMETHEUS)
def test_a_group_that_chooses_a_prometheus_server_is_read_from_it_while_the_operator_scrapes_by_default(engines: ApiServer, tmp_path: Path) -> None:
    """The operator runs with its default source (pods); the group chooses Prometheus in
    spec.autoscaling.metrics, naming the server there. A real Prometheus scrapes the pods
    with the shipped job. Debian's build has no Kubernetes discovery, so the test writes
    the pods' targets to a file as Prometheus' pod role would see them
    (`support.prometheus_server`), again as pods come."""
    engines.kubectl("apply", "-k", "deploy/crds")
    with prometheus_server(tmp_path) as prometheus:
        operator = start_operator(engines, tmp_path, "solo", "--resync", "30")  # the default source: pods
        try:
            engines.kubectl("apply", "-f", str(tmp_path / "topology.yaml"))
            group = yaml.safe_load((REPO / "examples" / "llama-70b-autoscaled.yaml").read_text())
            group["spec"]["autoscaling"]["intervalSeconds"] = 2
            group["spec"]["autoscaling"]["metrics"] = {"source": "prometheus", "prometheus": {"url": prometheus.url}}
            (tmp_path / "group.yaml").write_text(yaml.safe_dump(group))
            engines.kubectl("apply", "-f", str(tmp_path / "group.yaml"))

            def valid() -> dict[str, Any] | None:
                prometheus.discover(engines.get(f"/api/v1/namespaces/{NS}/pods")["items"])
                condition = _condition(engines.get(GROUP), "ScalingActive")
                return condition if condition and condition["status"] == "True" else None

            condition = wait_for(valid, 120, "ScalingActive=True from Prometheus", every=1.0)
            assert condition["reason"] == "ValidSignals"
            assert all(target["scrapeUrl"].startswith("http://127.") for target in prometheus.active_targets())
            assert _queries_answered(prometheus.url) > 0, "the group's signals came from its Prometheus, not the operator's default"
            assert '"metrics_source": true' in operator.log()
        finally:
            operator.process.terminate()
            assert operator.process.wait(timeout=20) == 0


def _queries_answered(url: str) -> float:
    """Instant queries Prometheus answered, from its own /metrics."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("prometheus_http_requests_total{") and 'handler="/api/v1/query"' in line and 'code="200"' in line)
