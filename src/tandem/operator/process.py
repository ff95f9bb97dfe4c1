"""The `tandem operator` process: connect, elect, serve probes and metrics, loop, stop.

Everything here is edge: the wall clock, signals, sockets, the Kubernetes connection.
The loop itself (`runner.Operator`) and the pass (`tandem.controller`) are the same code
the simulator drives.
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
from tandem.controller import ProvisioningSettings
from tandem.operator.runner import Operator
from tandem.runtime import webhook_config
from tandem.runtime.leader import LeaderElector, LeaseConfig
from tandem.runtime.schedule import PassSchedule
from tandem.runtime.serving import WebhookSettings, close, freeze_heap, install_signals, serve_probes, start_webhook
from tandem.runtime.webhook_config import Registration

log = logging.getLogger("tandem.operator")


@dataclass(frozen=True)
class OperatorConfig:
    kubeconfig: str | None = None
    namespaces: tuple[str, ...] = ()
    leader_elect: bool = False
    lease_namespace: str = "tandem-system"
    lease_duration: float = 15.0
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    metrics_port: int = 8080
    health_port: int = 8081
    resync: float = 300.0
    bind_host: str = "0.0.0.0"
    webhook_port: int = 0  # 0: no webhook in this process
    webhook_cert_dir: str | None = None  # without certificates in it: a fresh self-signed pair
    manage_webhook_config: bool = False  # create and keep our ValidatingWebhookConfiguration
    webhook_host: str = "127.0.0.1"  # the name the API server reaches the webhook by (managed config)
    # Units that do not fit ask for nodes with ProvisioningRequests (docs/provisioning.md): off by default.
    provisioning: ProvisioningSettings = field(default_factory=ProvisioningSettings)


def run(config: OperatorConfig, connect: Callable[[OperatorConfig, Callable[..., None]], Cluster], stop: threading.Event | None = None) -> int:
    """Run until SIGTERM/SIGINT (or `stop`); returns the exit status."""
    stop = stop or threading.Event()
    clock = time.time
    operator_box: list[Operator] = []

    def changed(*args: object) -> None:
        if operator_box:
            operator_box[0].changed(*args)

    cluster = connect(config, changed)
    elector = None
    if config.leader_elect:
        lease = LeaseConfig(namespace=config.lease_namespace, identity=config.identity, duration=config.lease_duration,
                            renew_deadline=min(10.0, config.lease_duration * 2 / 3))
        elector = LeaderElector(cluster, lease)
    operator = Operator(cluster, clock, elector, PassSchedule(resync=config.resync), on_synced=_freeze_heap, provisioning=config.provisioning)
    operator_box.append(operator)
    servers: list[Any] = []
    scratch: list[Path] = []  # temporary directories to remove on the way out (a private key)
    try:
        servers += serve_probes(operator, config.metrics_port, config.health_port, config.bind_host, clock, log)
        if config.webhook_port:
            servers.append(_webhook(config, cluster, scratch, stop, operator))
    except BaseException:
        close(servers, cluster, scratch)
        raise

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()
        operator.stop_waiting()

    install_signals(on_signal)
    log.info("operator started", extra={"identity": config.identity, "leader_elect": config.leader_elect})
    try:
        operator.run(stop)
    finally:
        close(servers, cluster, scratch)
    log.info("operator stopped")
    return 0


def _freeze_heap() -> None:
    freeze_heap(log)


WEBHOOK_CONFIG = "tandem-operator"
REGISTRATION = Registration(
    WEBHOOK_CONFIG,
    (
        {
            "apiGroups": ["tandem.dev"],
            "apiVersions": ["v1alpha1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["inferencegroups", "inferencegroups/scale"],
            "scope": "*",
        },
        {  # deleting a topology groups name is refused, naming them (api/topology_admission.py)
            "apiGroups": ["tandem.dev"],
            "apiVersions": ["v1alpha1"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "resources": ["clustertopologies"],
            "scope": "Cluster",
        },
    ),
)


def _webhook(config: OperatorConfig, cluster: Cluster, scratch: list[Path], stop: threading.Event, operator: Operator) -> Any:
    """Serve admission (`admission.review` over the informers' snapshot) over HTTPS."""
    from tandem.operator.admission import review

    metrics = operator.metrics

    def counted(verdict: str, seconds: float) -> None:
        metrics.webhook_requests.labels(verdict=verdict).inc()
        metrics.webhook_seconds.observe(seconds)

    settings = WebhookSettings(config.webhook_port, config.webhook_cert_dir, config.manage_webhook_config, config.webhook_host, config.bind_host)
    return start_webhook(settings, cluster, REGISTRATION, lambda body: review(body, cluster.snapshot()), counted, scratch, stop, log)


def keep_registered(cluster: Cluster, url: str, bundle: Callable[[], str], stop: threading.Event, every: float = 5.0) -> None:
    """The operator's configuration, registered and kept (runtime/webhook_config.py)."""
    webhook_config.keep_registered(cluster, REGISTRATION, url, bundle, stop, log, every)


def register_when_reachable(cluster: Cluster, url: str, ca_bundle: str, stop: threading.Event, first_delay: float = 0.5, most: float = 30.0) -> bool:
    """The operator's configuration, registered once the API server answers (runtime/webhook_config.py)."""
    return webhook_config.register_when_reachable(cluster, REGISTRATION, url, ca_bundle, stop, log, first_delay, most)


def register_webhook(cluster: Cluster, url: str, ca_bundle: str) -> None:
    """Create or update the ValidatingWebhookConfiguration that sends tandem's kinds here (and
    ClusterTopology deletes): fail closed, 5 s."""
    webhook_config.register_webhook(cluster, REGISTRATION, url, ca_bundle, log)
