"""`/healthz`, `/readyz` and `/metrics`, on one or two ports (stdlib HTTP server, a thread each).

- `/healthz`: 200 while the loop turns (its last turn is recent), else 503: a stuck
  process gets restarted by its liveness probe.
- `/readyz`: 200 once the informers have synced; a follower is ready too (it is a warm
  standby), so a rollout of the Deployment is not blocked by leader election.
- `/metrics`: the Prometheus text exposition of the process's own registry.

Generic over the loop it watches (`Probed`: the operator's, the topology controller's).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Protocol

from prometheus_client.exposition import CONTENT_TYPE_LATEST

STALE_AFTER_S = 30.0


class Exposing(Protocol):
    def exposition(self) -> bytes: ...


class Probed(Protocol):
    """A process loop: its metrics, whether its informers have synced, its last turn."""

    @property
    def metrics(self) -> Exposing: ...

    @property
    def last_tick(self) -> float | None: ...

    def ready(self) -> bool: ...


def serve(loop: Probed, ports: dict[int, set[str]], clock: Callable[[], float], host: str = "0.0.0.0") -> list[ThreadingHTTPServer]:
    """Start one server per port with the paths it serves ({"/healthz", "/readyz", "/metrics"})."""
    servers = []
    for port, paths in sorted(ports.items()):
        server = ThreadingHTTPServer((host, port), _handler(loop, frozenset(paths), clock))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name=f"http-{port}", daemon=True).start()
        servers.append(server)
    return servers


def _handler(loop: Probed, paths: frozenset[str], clock: Callable[[], float]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            path = self.path.split("?", 1)[0]
            if path not in paths:
                self._send(404, b"not found\n")
            elif path == "/metrics":
                self._send(200, loop.metrics.exposition(), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                alive = loop.last_tick is not None and clock() - loop.last_tick < STALE_AFTER_S
                self._send(200 if alive else 503, b"ok\n" if alive else b"loop stalled\n")
            else:
                ready = loop.ready()
                self._send(200 if ready else 503, b"ok\n" if ready else b"informers not synced\n")

        def _send(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # probes every few seconds: not worth a line
            return

    return Handler
