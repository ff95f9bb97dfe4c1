"""A real Prometheus (Debian's `prometheus`) for tests: the shipped scrape job
(examples/prometheus/prometheus.yml) with file discovery in place of Kubernetes', fed the
targets and meta labels Kubernetes' pod role would give.

Debian builds Prometheus without Kubernetes service discovery, so `discover(pods)` writes
what Prometheus' pod role makes of the pods (a target per declared container port,
`podIP:port`, with `__meta_kubernetes_*` labels) to a file Prometheus watches; the relabel
config is the shipped one, unchanged. Prometheus listens on 127.0.0.1, its config has no
remote write, no rules and no other job, and every target is a pod IP (127.X).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from e2e.processes import free_port, wait_for
from tandem.cluster.pods import pod_ready

PROMETHEUS = shutil.which("prometheus")
NO_PROMETHEUS = "Prometheus is not installed (`apt-get install prometheus`; .ci/run installs it)"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "prometheus" / "prometheus.yml"


def _label_name(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def kubernetes_pod_targets(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Prometheus' Kubernetes pod role, as file_sd target groups: a target per declared
    container port (`podIP:port`) with the pod's meta labels."""
    groups = []
    for pod in pods:
        meta, ip = pod["metadata"], (pod.get("status") or {}).get("podIP")
        if not ip:
            continue
        labels = {"__meta_kubernetes_namespace": meta["namespace"], "__meta_kubernetes_pod_name": meta["name"],
                  "__meta_kubernetes_pod_ip": ip, "__meta_kubernetes_pod_ready": str(pod_ready(pod)).lower(),
                  "__meta_kubernetes_pod_phase": (pod.get("status") or {}).get("phase", "")}
        for key, value in (meta.get("labels") or {}).items():
            labels[f"__meta_kubernetes_pod_label_{_label_name(key)}"] = value
            labels[f"__meta_kubernetes_pod_labelpresent_{_label_name(key)}"] = "true"
        for container in pod["spec"]["containers"]:
            for port in container.get("ports") or []:
                groups.append({"targets": [f"{ip}:{port['containerPort']}"], "labels": {
                    **labels, "__meta_kubernetes_pod_container_name": container["name"],
                    "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
                    "__meta_kubernetes_pod_container_port_number": str(port["containerPort"])}})
    return groups


def scrape_config(targets: Path, interval: str = "1s") -> dict[str, Any]:
    """The shipped job with file discovery in place of Kubernetes', scraping every `interval`."""
    config = copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))
    config["global"] = {"scrape_interval": interval, "evaluation_interval": interval}
    (job,) = config["scrape_configs"]
    assert [sd["role"] for sd in job.pop("kubernetes_sd_configs")] == ["pod"]
    job["file_sd_configs"] = [{"files": [str(targets)], "refresh_interval": interval}]
    assert set(config) == {"global", "scrape_configs"}, "no remote write, no rule files, no alerting"
    return config


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


@dataclass
class PrometheusServer:
    url: str
    process: subprocess.Popen
    targets: Path
    log: Path

    def discover(self, pods: list[dict[str, Any]]) -> None:
        """Tell Prometheus these pods (the file written whole: file discovery reads it again)."""
        staged = self.targets.with_suffix(".new")
        staged.write_text(json.dumps(kubernetes_pod_targets(pods)))
        staged.replace(self.targets)

    def active_targets(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(self.url + "/api/v1/targets?state=active", timeout=5) as answer:
            return json.load(answer)["data"]["activeTargets"]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)

    def restart(self) -> None:
        """Start it again after `stop`, on the same port with the same config and data (a
        server back from an outage); returns once it is ready."""
        assert self.process.poll() is not None, "stop it first"
        with self.log.open("a") as log:
            self.process = subprocess.Popen(self.process.args, stdout=log, stderr=log)
        wait_for(lambda: answers(self.url + "/-/ready") or self.process.poll() is not None, 30, "Prometheus ready again", every=0.2)
        assert self.process.poll() is None, self.log.read_text()


@contextmanager
def prometheus_server(work: Path, interval: str = "1s") -> Iterator[PrometheusServer]:
    """Prometheus on 127.0.0.1:<free>, its data in `work`, no targets until `discover`."""
    assert PROMETHEUS is not None, NO_PROMETHEUS
    targets = work / "targets.json"
    targets.write_text("[]")
    config = work / "prometheus.yml"
    config.write_text(yaml.safe_dump(scrape_config(targets, interval)))
    port = free_port()
    log_path = work / "prometheus.log"
    with log_path.open("w") as log:
        process = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={work / 'prometheus-data'}",
                                    f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"], stdout=log, stderr=log)
        server = PrometheusServer(f"http://127.0.0.1:{port}", process, targets, log_path)
        try:
            wait_for(lambda: answers(server.url + "/-/ready") or process.poll() is not None, 30, "Prometheus ready", every=0.2)
            assert process.poll() is None, log_path.read_text()
            yield server
        finally:
            server.stop()
