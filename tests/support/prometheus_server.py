"""A real Prometheus (Debian's `prometheus`) for tests: the shipped scrape job
(examples/prometheus/prometheus.yml) with its Kubernetes discovery swapped for one this
build has, the relabel config unchanged.

Debian builds Prometheus without Kubernetes service discovery. Two stand-ins give what
Kubernetes' pod role gives (a target per declared container port, `podIP:port`, with
`__meta_kubernetes_*` labels): `prometheus_server(work, discovery=URL)` points
`http_sd_configs` at `tandem apiserver`'s `/tandem/prometheus/pods`, so Prometheus finds the
server's pods by itself as they come and go (tandem.apiserver.prometheus_sd); without a URL,
`discover(pods)` writes the targets of exactly these pods to a file Prometheus watches, for
a test that hides a pod from Prometheus on purpose. Prometheus listens on 127.0.0.1, its
config has no remote write, no rules and no other job, and every target is a pod IP (127.X).
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from e2e.processes import free_port, wait_for
from tandem.apiserver.prometheus_sd import pod_targets

PROMETHEUS = shutil.which("prometheus")
NO_PROMETHEUS = "Prometheus is not installed (`apt-get install prometheus`; .ci/run installs it)"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "prometheus" / "prometheus.yml"


def scrape_config(targets: Path, interval: str = "1s", discovery: str | None = None) -> dict[str, Any]:
    """The shipped job scraping every `interval`, discovering through `discovery` (an
    http_sd URL) or, without one, through the file `targets`."""
    config = copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))
    config["global"] = {"scrape_interval": interval, "evaluation_interval": interval}
    (job,) = config["scrape_configs"]
    assert [sd["role"] for sd in job.pop("kubernetes_sd_configs")] == ["pod"]
    if discovery is not None:
        job["http_sd_configs"] = [{"url": discovery, "refresh_interval": interval}]
    else:
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
        staged.write_text(json.dumps(pod_targets(pods)))
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
def prometheus_server(work: Path, interval: str = "1s", discovery: str | None = None) -> Iterator[PrometheusServer]:
    """Prometheus on 127.0.0.1:<free>, its data in `work`; its targets from the http_sd URL
    `discovery` (a loopback `tandem apiserver`), else none until `discover`."""
    assert discovery is None or discovery.startswith("http://127."), discovery
    assert PROMETHEUS is not None, NO_PROMETHEUS
    targets = work / "targets.json"
    targets.write_text("[]")
    config = work / "prometheus.yml"
    config.write_text(yaml.safe_dump(scrape_config(targets, interval, discovery)))
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
