"""A tiny validating webhook over HTTPS for the local API server's admission tests.

Its certificate comes from tandem's own helper (a fresh CA and a serving certificate for
127.0.0.1); each review is answered by `answer(request) -> response fields`, which a test
sets (allow, deny, warn, sleep, read the API server...), and every request is kept.
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

from tandem.runtime.certs import CERT_FILE, KEY_FILE, make_certificates

Answer = Callable[[dict[str, Any]], dict[str, Any]]


def allow(_: dict[str, Any]) -> dict[str, Any]:
    return {"allowed": True}


class Webhook:
    """Serves `POST /validate` on 127.0.0.1 with a fresh certificate; `with Webhook() as hook:`."""

    def __init__(self, answer: Answer = allow):
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self.certificates = make_certificates(["localhost"], datetime.now(timezone.utc))
        self._dir = tempfile.TemporaryDirectory(prefix="tandem-test-webhook-")
        self.certificates.write(Path(self._dir.name))
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(Path(self._dir.name) / CERT_FILE, Path(self._dir.name) / KEY_FILE)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._server.server_address[1]}/validate"

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.certificates.ca_pem).decode()

    def operations(self) -> list[tuple[str, str]]:
        """(operation, resource[/subresource]) of every review received, in order."""
        return [(r["operation"], r["resource"]["resource"] + (f"/{r['subResource']}" if r.get("subResource") else "")) for r in self.requests]

    def __enter__(self) -> "Webhook":
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._dir.cleanup()


def _handler(hook: Webhook) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            request = review["request"]
            hook.requests.append({**request, "path": self.path})
            data = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                               "response": {"uid": request["uid"], **hook.answer(request)}}).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the API server gave up waiting (a timeout test)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


def configuration(name: str, webhooks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": name},
            "webhooks": webhooks}


def webhook(name: str, url: str, ca_bundle: str, *, resources: tuple[str, ...] = ("inferencegroups",), groups: tuple[str, ...] = ("tandem.dev",),
            versions: tuple[str, ...] = ("*",), operations: tuple[str, ...] = ("CREATE", "UPDATE"), scope: str = "*", **fields: Any) -> dict[str, Any]:
    """One webhook entry: its rule sends `operations` on `resources` of `groups` (in `scope`) to `url`."""
    return {
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca_bundle},
        "rules": [{"apiGroups": list(groups), "apiVersions": list(versions), "operations": list(operations), "resources": list(resources),
                   "scope": scope}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        **fields,
    }
