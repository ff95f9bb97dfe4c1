"""A tandem process from start to stop: connect, elect, serve probes, metrics and
(optionally) admission, loop until SIGTERM/SIGINT, close. Both processes run it; each
names what is its own (its loop, its Lease, its webhook configuration, its review).

Everything here is edge: the wall clock, signals, sockets, the Kubernetes connection.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, TypeVar

from prometheus_client import Counter, Histogram

from tandem.cluster.ports import Cluster, Reader
from tandem.runtime.endpoints import Probed
from tandem.runtime.leader import LeaderElector, LeaseConfig
from tandem.runtime.loop import LoopMetrics
from tandem.runtime.serving import WebhookSettings, close, install_signals, serve_probes, start_webhook
from tandem.runtime.webhook import Verdict
from tandem.runtime.webhook_config import Registration


@dataclass(frozen=True)
class ProcessConfig:
    """The flags both processes take; each process's config adds its own."""

    kubeconfig: str | None = None
    leader_elect: bool = False
    lease_name: str = LeaseConfig.name
    lease_namespace: str = "tandem-system"
    lease_duration: float = 15.0
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    metrics_port: int = 8080
    health_port: int = 8081
    resync: float = 300.0
    bind_host: str = "0.0.0.0"
    webhook_port: int = 0  # 0: no webhook in this process
    webhook_cert_dir: str | None = None  # without certificates in it: a fresh self-signed pair
    manage_webhook_config: bool = False  # create and keep the process's ValidatingWebhookConfiguration
    webhook_host: str = "127.0.0.1"  # the name the API server reaches the webhook by (managed config)

    def lease(self) -> LeaseConfig:
        return LeaseConfig(name=self.lease_name, namespace=self.lease_namespace, identity=self.identity, duration=self.lease_duration,
                           renew_deadline=min(10.0, self.lease_duration * 2 / 3))

    def webhook(self) -> WebhookSettings:
        return WebhookSettings(self.webhook_port, self.webhook_cert_dir, self.manage_webhook_config, self.webhook_host, self.bind_host)


class ServedMetrics(LoopMetrics, Protocol):
    """The loop's series, the exposition, and the webhook's two."""

    @property
    def webhook_requests(self) -> Counter: ...  # labelled by `verdict`

    @property
    def webhook_seconds(self) -> Histogram: ...

    def exposition(self) -> bytes: ...


class Served(Probed, Protocol):
    """A process's loop (runtime/loop.PassLoop) as the process drives and probes it."""

    @property
    def metrics(self) -> ServedMetrics: ...

    def changed(self, *args: Any) -> None: ...

    def run(self, stop: threading.Event) -> None: ...

    def stop_waiting(self) -> None: ...


@dataclass(frozen=True)
class Admission:
    """What the process's webhook serves: `review(body, snapshot)`, registered as `registration`."""

    registration: Registration
    review: Callable[[bytes, Reader], Verdict]


Loop = TypeVar("Loop", bound=Served)


def run_process(config: ProcessConfig, connect: Callable[[Callable[..., None]], Cluster],
                start: Callable[[Cluster, Callable[[], float], LeaderElector | None], Loop], admission: Callable[[], Admission],
                name: str, started: dict[str, Any], stop: threading.Event | None, log: logging.Logger) -> int:
    """Run until SIGTERM/SIGINT (or `stop`); returns the exit status. `connect(changed)`
    opens the cluster with informers that call `changed`; `start` builds the loop over it;
    `admission` is asked for only when the process serves a webhook."""
    stop = stop or threading.Event()
    clock = time.time
    box: list[Loop] = []

    def changed(*args: object) -> None:
        if box:
            box[0].changed(*args)

    cluster = connect(changed)
    elector = LeaderElector(cluster, config.lease()) if config.leader_elect else None
    loop = start(cluster, clock, elector)
    box.append(loop)
    servers: list[Any] = []
    scratch: list[Path] = []  # temporary directories to remove on the way out (a private key)
    try:
        servers += serve_probes(loop, config.metrics_port, config.health_port, config.bind_host, clock, log)
        if config.webhook_port:
            servers.append(_webhook(config, cluster, admission(), loop.metrics, scratch, stop, log))
    except BaseException:
        close(servers, cluster, scratch)
        raise

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()
        loop.stop_waiting()

    install_signals(on_signal)
    log.info("%s started", name, extra={"identity": config.identity, "leader_elect": config.leader_elect, **started})
    try:
        loop.run(stop)
    finally:
        close(servers, cluster, scratch)
    log.info("%s stopped", name)
    return 0


def _webhook(config: ProcessConfig, cluster: Cluster, admission: Admission, metrics: ServedMetrics, scratch: list[Path], stop: threading.Event,
             log: logging.Logger) -> Any:
    """Serve admission (`review` over the informers' snapshot) over HTTPS, each review counted."""

    def counted(verdict: str, seconds: float) -> None:
        metrics.webhook_requests.labels(verdict=verdict).inc()
        metrics.webhook_seconds.observe(seconds)

    review = admission.review
    return start_webhook(config.webhook(), cluster, admission.registration, lambda body: review(body, cluster.snapshot()), counted, scratch, stop, log)
