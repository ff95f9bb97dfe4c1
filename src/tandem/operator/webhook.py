"""The operator's admission webhook: `admission.review` over the informers' snapshot,
served by the shared HTTPS endpoint (runtime/webhook.py), counted in the operator's metrics."""

from __future__ import annotations

from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Callable

from tandem.cluster.ports import Reader
from tandem.operator.admission import review
from tandem.operator.metrics import OperatorMetrics
from tandem.runtime.webhook import serve_admission


def serve_webhook(
    snapshot: Callable[[], Reader], cert_dir: Path, port: int, host: str = "0.0.0.0", metrics: OperatorMetrics | None = None
) -> ThreadingHTTPServer:
    """Serve `/validate`; with `metrics`, count each verdict and time each review."""

    def counted(verdict: str, seconds: float) -> None:
        if metrics is not None:
            metrics.webhook_requests.labels(verdict=verdict).inc()
            metrics.webhook_seconds.observe(seconds)

    return serve_admission(lambda body: review(body, snapshot()), cert_dir, port, host=host, counted=counted)
