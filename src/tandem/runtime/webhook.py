"""An admission webhook's HTTPS endpoint (`POST /validate`), for whichever process serves one.

A request body over the API server's limit, or one that is not an AdmissionReview v1,
gets 400 with the reason; nothing in a request can crash the server. The review itself is
the caller's (`review(body) -> Verdict`): the operator's reads its informers' snapshot,
the topology controller's its own, never the network.
TLS from a certificate directory (`tls.crt`, `tls.key`; `tandem certs` makes them),
read again when either file changes (cert-manager renews a certificate long before it
expires, and a Secret volume swaps the files in place): each connection is served with
the pair on disk at the time, and a pair that does not load (caught half-written) leaves
the last good one in use, with a warning.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

from tandem.runtime.admission_review import MAX_BODY, Malformed, Verdict
from tandem.runtime.certs import CERT_FILE, KEY_FILE

log = logging.getLogger("tandem.webhook")
Review = Callable[[bytes], Verdict]
Counted = Callable[[str, float], None]  # (verdict: allowed, denied, malformed, error; seconds)
READ_TIMEOUT_S = 10.0


class Certificates:
    """The serving certificate of a directory, loaded again when its files change."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.reloads = 0  # times a changed pair was loaded (not counting the first)
        self._stamp = self._files()
        self._context = self._load()
        self._refused: tuple[tuple[int, int], ...] | None = None  # the stamp of a pair that did not load

    def context(self) -> ssl.SSLContext:
        """The context for a new connection: the pair on disk now, or the last good one."""
        stamp = self._files()
        if stamp != self._stamp and stamp != self._refused:
            try:
                self._context = self._load()
            except (ssl.SSLError, OSError) as exc:
                self._refused = stamp
                log.warning("the webhook certificate in %s changed but does not load (%s); serving the previous one", self.directory, exc)
            else:
                self._stamp, self._refused = stamp, None
                self.reloads += 1
                log.info("reloaded the webhook certificate from %s", self.directory)
        return self._context

    def _files(self) -> tuple[tuple[int, int], ...]:
        stamps = []
        for name in (CERT_FILE, KEY_FILE):
            try:
                info = (self.directory / name).stat()
            except OSError:
                stamps.append((0, 0))
                continue
            stamps.append((info.st_mtime_ns, info.st_size))
        return tuple(stamps)

    def _load(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.directory / CERT_FILE, self.directory / KEY_FILE)
        return context


class _TLSServer(ThreadingHTTPServer):
    """TLS handshakes in the request's own thread (not the accepting one), and a listen
    backlog for an API server that opens many connections at once."""

    request_queue_size = 256
    daemon_threads = True
    certificates: Certificates

    def get_request(self):  # type: ignore[no-untyped-def]
        sock, address = self.socket.accept()
        return self.certificates.context().wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def finish_request(self, request, client_address):  # type: ignore[no-untyped-def]
        request.settimeout(READ_TIMEOUT_S)
        try:
            request.do_handshake()
        except (ssl.SSLError, OSError):
            return  # a client that cannot speak TLS to us gets nothing
        super().finish_request(request, client_address)


def serve_admission(review: Review, cert_dir: Path, port: int, host: str = "0.0.0.0", counted: Counted | None = None) -> ThreadingHTTPServer:
    """Serve `/validate` with `review`; `counted` hears each verdict and how long it took."""
    certificates = Certificates(cert_dir)  # before binding: a pair that does not load is a start-up error
    server = _TLSServer((host, port), _handler(review, counted))
    server.certificates = certificates
    threading.Thread(target=server.serve_forever, name=f"webhook-{port}", daemon=True).start()
    return server


def _handler(review: Review, on_review: Counted | None) -> type[BaseHTTPRequestHandler]:
    def counted(verdict: str, started: float) -> None:
        if on_review is not None:
            on_review(verdict, max(time.monotonic() - started, 0.0))

    class Handler(BaseHTTPRequestHandler):
        timeout = READ_TIMEOUT_S

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            if self.path.split("?", 1)[0] != "/validate":
                self._send(404, {"message": "not found"})
                return
            try:
                length = int(self.headers.get("Content-Length", "-1"))
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY:
                self._send(400 if length < 0 else 413, {"message": f"a Content-Length from 0 to {MAX_BODY} is required"})
                return
            started = time.monotonic()
            try:
                verdict = review(self.rfile.read(length))
            except Malformed as exc:
                counted("malformed", started)
                self._send(400, {"message": str(exc)})
                return
            except Exception:  # a review must answer, never take the server down
                log.exception("review failed")
                counted("error", started)
                self._send(500, {"message": "internal error while reviewing"})
                return
            counted("allowed" if verdict.allowed else "denied", started)
            self._send(200, verdict.response())

        def _send(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler
