"""The `tandem operator` process: connect, elect, serve probes and metrics, loop, stop.

Everything here is edge: the wall clock, signals, sockets, the Kubernetes connection.
The loop itself (`runner.Operator`) and the pass (`tandem.controller`) are the same code
the simulator drives.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

from tandem.cluster.ports import Cluster
from tandem.controller import ProvisioningSettings
from tandem.errors import ApiError, InputError, Problem
from tandem.operator.endpoints import serve
from tandem.operator.leader import LeaderElector, LeaseConfig
from tandem.operator.metrics import OperatorMetrics
from tandem.operator.runner import Operator
from tandem.operator.schedule import PassSchedule

log = logging.getLogger("tandem.operator")
T = TypeVar("T")


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
    ports: dict[int, set[str]] = {}
    flags: dict[int, list[str]] = {}
    if config.metrics_port:
        ports.setdefault(config.metrics_port, set()).add("/metrics")
        flags.setdefault(config.metrics_port, []).append("--metrics-port")
    if config.health_port:
        ports.setdefault(config.health_port, set()).update({"/healthz", "/readyz"})
        flags.setdefault(config.health_port, []).append("--health-port")
    servers: list[Any] = []
    scratch: list[Path] = []  # temporary directories to remove on the way out (a private key)
    try:
        for port, paths in sorted(ports.items()):
            server = _listening("/".join(flags[port]), port, config.bind_host, lambda: serve(operator, {port: paths}, clock, host=config.bind_host)[0])
            servers.append(server)
            log.info("serving %s on port %d", " ".join(sorted(paths)), server.server_address[1])
        if config.webhook_port:
            servers.append(_webhook(config, cluster, scratch, stop, operator.metrics))
    except BaseException:
        _close(servers, cluster, scratch)
        raise

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
        _close(servers, cluster, scratch)
    log.info("operator stopped")
    return 0


def _listening(flag: str, port: int, host: str, start: Callable[[], T]) -> T:
    """Start a server; a port that cannot be had (in use, not allowed) is the user's to fix:
    one `error:` line naming the flag, not a traceback."""
    try:
        return start()
    except OSError as exc:
        raise InputError(Problem(flag, f"cannot listen on {host}:{port}: {exc.strerror or exc}")) from None


def _close(servers: list[Any], cluster: Cluster, scratch: list[Path]) -> None:
    """Stop serving, disconnect, and remove the temporary certificate directory."""
    for server in servers:
        server.shutdown()
        server.server_close()
    close = getattr(cluster, "stop", None)
    if close is not None:
        close()
    for directory in scratch:
        shutil.rmtree(directory, ignore_errors=True)


def _freeze_heap() -> None:
    """Once the informers hold the cluster, move what exists to the garbage collector's
    permanent generation: the caches are long-lived, and a collection that walks hundreds
    of thousands of cached objects stalls whichever pass happens to trigger it (profiled at
    10,000 nodes: a pass placing one group fell from 0.97 s to 0.35 s). What changes later
    is tracked as usual."""
    import gc

    gc.collect()
    gc.freeze()
    log.info("informers synced")
    log.debug("%d objects frozen out of the garbage collector's walks", gc.get_freeze_count())


WEBHOOK_CONFIG = "tandem-operator"


def _webhook(config: OperatorConfig, cluster: Cluster, scratch: list[Path], stop: threading.Event, metrics: OperatorMetrics):  # type: ignore[no-untyped-def]
    """Serve admission over HTTPS; with `manage_webhook_config`, register it as kopf's
    managed admission does. A certificate made for this run goes in a temporary directory
    (added to `scratch`, removed when the process stops)."""
    import base64
    import tempfile
    from datetime import datetime, timezone

    from tandem.operator.certs import CA_FILE, CERT_FILE, KEY_FILE, make_certificates
    from tandem.operator.webhook import serve_webhook

    if config.webhook_cert_dir:
        cert_dir = Path(config.webhook_cert_dir)
    else:
        cert_dir = Path(tempfile.mkdtemp(prefix="tandem-webhook-"))
        scratch.append(cert_dir)
    if not all((cert_dir / name).is_file() for name in (CERT_FILE, KEY_FILE)):
        make_certificates([config.webhook_host, "localhost"], datetime.now(timezone.utc)).write(cert_dir)
        log.info("wrote a self-signed webhook certificate to %s", cert_dir)
    server = _listening("--webhook-port", config.webhook_port, config.bind_host,
                        lambda: serve_webhook(cluster.snapshot, cert_dir, config.webhook_port, host=config.bind_host, metrics=metrics))
    port = server.server_address[1]
    log.info("serving /validate on port %d", port)
    if config.manage_webhook_config:
        url = f"https://{config.webhook_host}:{port}/validate"

        def bundle() -> str:
            ca = cert_dir / CA_FILE if (cert_dir / CA_FILE).is_file() else cert_dir / CERT_FILE
            return base64.b64encode(ca.read_bytes()).decode()

        threading.Thread(target=keep_registered, args=(cluster, url, bundle, stop), name="webhook-config", daemon=True).start()
    return server


def keep_registered(cluster: Cluster, url: str, bundle: Callable[[], str], stop: threading.Event, every: float = 5.0) -> None:
    """Register the webhook configuration once the API server answers, and again whenever
    the CA bundle on disk changes (a renewed certificate with a new CA), so the API server
    keeps trusting what the webhook serves."""
    registered: str | None = None
    while not stop.is_set():
        current: str | None
        try:
            current = bundle()
        except OSError:
            current = registered  # caught mid-rotation: look again later
        if current is not None and current != registered:
            if not register_when_reachable(cluster, url, current, stop):
                return
            if registered is not None:
                log.info("the webhook's CA changed: registered the new bundle")
            registered = current
        stop.wait(every)


def register_when_reachable(cluster: Cluster, url: str, ca_bundle: str, stop: threading.Event, first_delay: float = 0.5, most: float = 30.0) -> bool:
    """Register the webhook configuration, again and again while the API server cannot be
    reached (it may not be up yet) or answers a retryable error, with a doubling delay
    (each attempt's failure logged); a terminal answer (403, 422) is logged once as an
    error. Whether it was registered."""
    delay = first_delay
    while not stop.is_set():
        try:
            register_webhook(cluster, url, ca_bundle)
            return True
        except ApiError as exc:
            if not exc.retryable:
                log.error("cannot register the admission webhook configuration: %s", exc.message)
                return False
            log.warning("cannot register the admission webhook configuration yet (%s); retrying in %.1f s", exc.message, delay)
        stop.wait(delay)
        delay = min(delay * 2, most)
    return False


def register_webhook(cluster: Cluster, url: str, ca_bundle: str) -> None:
    """Create or update the ValidatingWebhookConfiguration that sends tandem's kinds here (and
    ClusterTopology deletes): fail closed, 5 s."""
    from tandem.cluster.ports import AlreadyExists

    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK_CONFIG, "labels": {"app.kubernetes.io/managed-by": "tandem"}},
        "webhooks": [
            {
                "name": "validate.tandem.dev",
                "clientConfig": {"url": url, "caBundle": ca_bundle},
                "rules": [
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
                ],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "timeoutSeconds": 5,
                "admissionReviewVersions": ["v1"],
            }
        ],
    }
    try:
        cluster.create(body)
    except AlreadyExists:
        cluster.patch("ValidatingWebhookConfiguration", None, WEBHOOK_CONFIG, {"webhooks": body["webhooks"]})
    log.info("registered the admission webhook at %s", url)
