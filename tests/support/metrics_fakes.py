"""Fakes of what the metrics sources read, on 127.0.0.1: a Prometheus server's query API that
answers each figure's query (`FakePrometheus`), and a vLLM-format /metrics whose counter a
test moves (`VllmExposition`)."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse
from typing import Any, Callable


def figure_of(query: str) -> str:
    """Which figure a default vLLM query asks for."""
    for marker, figure in (("count_over_time", "scrapes"), ("> bool 0", "busy"), ("num_requests_waiting", "waiting"),
                           ("cache_usage", "kv_usage"), ("prompt_tokens", "prompt_tokens"), ("generation_tokens", "generation_tokens"),
                           ("request_success", "requests"), ("time_to_first_token", "ttft_p90"), ("inter_token", "itl_p90")):
        if marker in query:
            return figure
    raise AssertionError(query)


STEADY: dict[str, Any] = {
    "scrapes": {"p-0": 12, "d-0": 12, "d-1": 11},
    "waiting": {"p-0": 2, "d-0": 1, "d-1": 0},
    "busy": {"p-0": 1, "d-0": 0.5, "d-1": 0.5},
    "kv_usage": {"p-0": 0, "d-0": 0.3, "d-1": 0.1},
    "prompt_tokens": {"p-0": 800},
    "generation_tokens": {"d-0": 60, "d-1": 40},
    "requests": {"d-0": 2, "d-1": 1},
    "ttft_p90": 0.25,
    "itl_p90": "NaN",
}


def vector(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [{"metric": {"pod": p, "namespace": "serving"}, "value": [1700000000.5, str(v)]} for p, v in value.items()]
    return [{"metric": {}, "value": [1700000000.5, str(value)]}]


class FakePrometheus:
    """Answers `/api/v1/query` with `respond(figure) -> (status, body)`, the figure told from the
    query by `classify` (default: the vLLM queries' `figure_of`); keeps every query."""

    def __init__(self) -> None:
        self.queries: list[str] = []
        self.classify: Callable[[str], str] = figure_of
        self.respond: Callable[[str], tuple[int, Any]] = lambda figure: (200, {"status": "success", "data": {"resultType": "vector", "result": vector(STEADY[figure])}})
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parsed = urllib.parse.urlsplit(self.path)
                assert parsed.path == "/prom/api/v1/query", parsed.path
                query = urllib.parse.parse_qs(parsed.query)["query"][0]
                fake.queries.append(query)
                status, body = fake.respond(fake.classify(query))
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/prom"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class VllmExposition:
    """A vLLM-format /metrics on 127.0.0.1 whose generated-token counter a test moves; `up` False answers 500."""

    def __init__(self) -> None:
        self.generated = 0.0
        self.up = True
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = (f'vllm:num_requests_waiting{{engine="0"}} 0\nvllm:num_requests_running{{engine="0"}} 1\n'
                        f'vllm:kv_cache_usage_perc{{engine="0"}} 0.5\nvllm:generation_tokens_total{{engine="0"}} {outer.generated}\n').encode()
                self.send_response(200 if outer.up else 500)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
