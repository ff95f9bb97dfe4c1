"""The `tandem topology-controller` process: connect, elect, serve probes, metrics and
(optionally) admission, loop, stop.

Everything here is edge: the wall clock, signals, sockets, the Kubernetes connection. It
shares the operator's process pieces (tandem.runtime) and none of its pass: a cluster can
run this alone, the operator alone, or both. Its Lease and its webhook configuration have
names of their own, so the two never take each other's.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tandem.cluster.ports import Cluster
from tandem.kube import kinds
from tandem.runtime.leader import LeaderElector, LeaseConfig
from tandem.runtime.schedule import PassSchedule
from tandem.runtime.serving import WebhookSettings, close, freeze_heap, install_signals, serve_probes, start_webhook
from tandem.runtime.webhook_config import Registration
from tandem.topology_controller.admission import RULES, review
from tandem.topology_controller.kinds import BACKEND_KINDS
from tandem.topology_controller.reconcile import TopologySettings
from tandem.topology_controller.runner import BATCH_WINDOW_S, TopologyController

log = logging.getLogger("tandem.topology")
LEASE_NAME = "tandem-topology-controller"
WEBHOOK_CONFIG = "tandem-topology-controller"
REGISTRATION = Registration(WEBHOOK_CONFIG, RULES, webhook="topologies.validate.tandem.dev")


@dataclass(frozen=True)
class TopologyControllerConfig:
    kubeconfig: str | None = None
    settings: TopologySettings = field(default_factory=TopologySettings)
    leader_elect: bool = False
    lease_name: str = LEASE_NAME
    lease_namespace: str = "tandem-system"
    lease_duration: float = 15.0
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    metrics_port: int = 8080
    health_port: int = 8081
    resync: float = 300.0
    batch_window: float = BATCH_WINDOW_S  # seconds from the first change to the pass that sees it (a burst is one pass)
    bind_host: str = "0.0.0.0"
    webhook_port: int = 0  # 0: no webhook in this process
    webhook_cert_dir: str | None = None
    manage_webhook_config: bool = False
    webhook_host: str = "127.0.0.1"


def register_backend_kinds(settings: TopologySettings) -> None:
    """Tell the Kubernetes adapter where the managed backends' kinds live in the REST API."""
    for backend in settings.backends:
        for kind in BACKEND_KINDS[backend]:
            kinds.register(kinds.Kind(kind.kind, kind.api_version, kind.plural, namespaced=kind.namespaced))


def run(config: TopologyControllerConfig, connect: Callable[[TopologyControllerConfig, Callable[..., None]], Cluster],
        stop: threading.Event | None = None) -> int:
    """Run until SIGTERM/SIGINT (or `stop`); returns the exit status."""
    stop = stop or threading.Event()
    clock = time.time
    box: list[TopologyController] = []

    def changed(*args: object) -> None:
        if box:
            box[0].changed(*args)

    cluster = connect(config, changed)
    elector = None
    if config.leader_elect:
        lease = LeaseConfig(name=config.lease_name, namespace=config.lease_namespace, identity=config.identity, duration=config.lease_duration,
                            renew_deadline=min(10.0, config.lease_duration * 2 / 3))
        elector = LeaderElector(cluster, lease)
    schedule = PassSchedule(debounce=config.batch_window, resync=config.resync)
    controller = TopologyController(cluster, clock, config.settings, elector, schedule, on_synced=lambda: freeze_heap(log))
    box.append(controller)
    servers: list[Any] = []
    scratch: list[Path] = []
    try:
        servers += serve_probes(controller, config.metrics_port, config.health_port, config.bind_host, clock, log)
        if config.webhook_port:
            servers.append(_webhook(config, cluster, scratch, stop, controller))
    except BaseException:
        close(servers, cluster, scratch)
        raise

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()
        controller.stop_waiting()

    install_signals(on_signal)
    log.info("topology controller started",
             extra={"identity": config.identity, "leader_elect": config.leader_elect, "backends": list(config.settings.backends)})
    try:
        controller.run(stop)
    finally:
        close(servers, cluster, scratch)
    log.info("topology controller stopped")
    return 0


def _webhook(config: TopologyControllerConfig, cluster: Cluster, scratch: list[Path], stop: threading.Event, controller: TopologyController) -> Any:
    metrics = controller.metrics

    def counted(verdict: str, seconds: float) -> None:
        metrics.webhook_requests.labels(verdict=verdict).inc()
        metrics.webhook_seconds.observe(seconds)

    settings = WebhookSettings(config.webhook_port, config.webhook_cert_dir, config.manage_webhook_config, config.webhook_host, config.bind_host)
    return start_webhook(settings, cluster, REGISTRATION, lambda body: review(body, cluster.snapshot()), counted, scratch, stop, log)
