"""The `tandem operator` process: connect, elect, serve probes and metrics, loop, stop.

Everything here is edge: the wall clock, signals, sockets, the Kubernetes connection.
The loop itself (`runner.Operator`) and the pass (`tandem.controller`) are the same code
the simulator drives.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from tandem.controller.ports import Cluster
from tandem.operator.endpoints import serve
from tandem.operator.leader import LeaderElector, LeaseConfig
from tandem.operator.runner import Operator
from tandem.operator.schedule import PassSchedule

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
    operator = Operator(cluster, clock, elector, PassSchedule(resync=config.resync))
    operator_box.append(operator)
    ports: dict[int, set[str]] = {}
    if config.metrics_port:
        ports.setdefault(config.metrics_port, set()).add("/metrics")
    if config.health_port:
        ports.setdefault(config.health_port, set()).update({"/healthz", "/readyz"})
    servers = serve(operator, ports, clock, host=config.bind_host)
    for (_, paths), server in zip(sorted(ports.items()), servers):
        log.info("serving %s on port %d", " ".join(sorted(paths)), server.server_address[1])

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()
        operator.stop_waiting()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    log.info("operator started", extra={"identity": config.identity, "leader_elect": config.leader_elect})
    try:
        operator.run(stop)
    finally:
        for server in servers:
            server.shutdown()
        close = getattr(cluster, "stop", None)
        if close is not None:
            close()
    log.info("operator stopped")
    return 0
