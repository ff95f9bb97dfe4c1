"""Starting and stopping what a process serves: the probe and metrics ports, the admission
webhook (its certificate, and with `--manage-webhook-config` its registration), and the
heap frozen once the informers hold the cluster. A port that cannot be had is the user's
to fix: one `error:` line naming the flag."""

from __future__ import annotations

import base64
import logging
import shutil
import tempfile
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, TypeVar

from tandem.cluster.ports import Cluster
from tandem.errors import InputError, Problem
from tandem.runtime.endpoints import Probed, serve
from tandem.runtime.webhook import Counted, Review
from tandem.runtime.webhook_config import Registration, keep_registered

T = TypeVar("T")


@dataclass(frozen=True)
class WebhookSettings:
    port: int  # 0: no webhook
    cert_dir: str | None = None  # without certificates in it: a fresh self-signed pair
    manage_config: bool = False  # create and keep the process's ValidatingWebhookConfiguration
    host: str = "127.0.0.1"  # the name the API server reaches the webhook by (managed config)
    bind_host: str = "0.0.0.0"


def listening(flag: str, port: int, host: str, start: Callable[[], T]) -> T:
    """Start a server; a port that cannot be had (in use, not allowed) is the user's to fix:
    one `error:` line naming the flag, not a traceback."""
    try:
        return start()
    except OSError as exc:
        raise InputError(Problem(flag, f"cannot listen on {host}:{port}: {exc.strerror or exc}")) from None


def serve_probes(loop: Probed, metrics_port: int, health_port: int, host: str, clock: Callable[[], float], log: logging.Logger) -> list[ThreadingHTTPServer]:
    """`/metrics` on one port and `/healthz` `/readyz` on another (or all on one; 0: off)."""
    ports: dict[int, set[str]] = {}
    flags: dict[int, list[str]] = {}
    if metrics_port:
        ports.setdefault(metrics_port, set()).add("/metrics")
        flags.setdefault(metrics_port, []).append("--metrics-port")
    if health_port:
        ports.setdefault(health_port, set()).update({"/healthz", "/readyz"})
        flags.setdefault(health_port, []).append("--health-port")
    servers: list[ThreadingHTTPServer] = []
    try:
        for port, paths in sorted(ports.items()):
            server = listening("/".join(flags[port]), port, host, lambda: serve(loop, {port: paths}, clock, host=host)[0])
            servers.append(server)
            log.info("serving %s on port %d", " ".join(sorted(paths)), server.server_address[1])
    except BaseException:
        close(servers, None, [])
        raise
    return servers


def start_webhook(settings: WebhookSettings, cluster: Cluster, registration: Registration, review: Review, counted: Counted | None,
                  scratch: list[Path], stop: threading.Event, log: logging.Logger) -> ThreadingHTTPServer:
    """Serve admission over HTTPS; with `manage_config`, register it as kopf's managed
    admission does. A certificate made for this run goes in a temporary directory (added
    to `scratch`, removed when the process stops)."""
    from tandem.runtime.certs import CA_FILE, CERT_FILE, KEY_FILE, make_certificates
    from tandem.runtime.webhook import serve_admission

    if settings.cert_dir:
        cert_dir = Path(settings.cert_dir)
    else:
        cert_dir = Path(tempfile.mkdtemp(prefix="tandem-webhook-"))
        scratch.append(cert_dir)
    if not all((cert_dir / name).is_file() for name in (CERT_FILE, KEY_FILE)):
        make_certificates([settings.host, "localhost"], datetime.now(timezone.utc)).write(cert_dir)
        log.info("wrote a self-signed webhook certificate to %s", cert_dir)
    server = listening("--webhook-port", settings.port, settings.bind_host,
                       lambda: serve_admission(review, cert_dir, settings.port, host=settings.bind_host, counted=counted))
    port = server.server_address[1]
    log.info("serving /validate on port %d", port)
    if settings.manage_config:
        url = f"https://{settings.host}:{port}/validate"

        def bundle() -> str:
            ca = cert_dir / CA_FILE if (cert_dir / CA_FILE).is_file() else cert_dir / CERT_FILE
            return base64.b64encode(ca.read_bytes()).decode()

        threading.Thread(target=keep_registered, args=(cluster, registration, url, bundle, stop, log), name="webhook-config", daemon=True).start()
    return server


def close(servers: list[Any], cluster: Cluster | None, scratch: list[Path]) -> None:
    """Stop serving, disconnect, and remove the temporary certificate directory."""
    for server in servers:
        server.shutdown()
        server.server_close()
    stop = getattr(cluster, "stop", None)
    if stop is not None:
        stop()
    for directory in scratch:
        shutil.rmtree(directory, ignore_errors=True)


def freeze_heap(log: logging.Logger) -> None:
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


def install_signals(on_signal: Callable[[int, object], None]) -> None:
    """SIGTERM and SIGINT stop the loop (only the main thread may set handlers; a test
    running the process in a thread stops it with its `stop` event)."""
    import signal

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
