"""`ApiServer`: the Kubernetes REST API over the in-memory store, on plain HTTP, on 127.0.0.1.

One thread per connection (HTTP/1.1, keep-alive), a thread per open watch, one for the
simulated kubelet; all meet at the state's one lock. No authentication, no TLS, no
persistence: it is for trying tandem and for end-to-end tests (docs/apiserver.md).

    with ApiServer(objects=cluster_objects(sources)) as server:
        ...  # server.url, e.g. http://127.0.0.1:41234
"""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

import yaml

from tandem.apiserver import cel, discovery, pod_network, prometheus_sd, protobuf, tables, verbs, watch
from tandem.apiserver.error_status import Expired, Refused, UnsupportedMediaType, failure
from tandem.apiserver.faults import Faults, Injected, Request
from tandem.apiserver.engines.host import EngineHost
from tandem.apiserver.evictions import DEFAULT_TOLERATION_SECONDS
from tandem.apiserver.kubelets import Kubelet
from tandem.apiserver.provisioner import Provisioner, install_crd
from tandem.apiserver.routes import Route, route
from tandem.apiserver.seed import seed
from tandem.apiserver.workload_api import serve as serve_workload_api
from tandem.apiserver.server_state import State
from tandem.cluster.memory import MemoryStore
from tandem.errors import ApiError, BadRequest, InternalError, NotFound

log = logging.getLogger("tandem.apiserver")
MAX_BODY = 3 * 1024 * 1024  # the real server's request limit
JSON = "application/json"
PROTOBUF = "application/vnd.kubernetes.protobuf"


class ApiServer:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        objects: list[dict[str, Any]] | None = None,
        crds: bool = True,
        ready_after: float = 0.0,
        bind_latency: float = 0.0,
        default_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
        kubelet: bool = True,
        bookmark_every: float = 10.0,
        clock: Callable[[], float] = time.time,
        history: int | None = None,
        store: MemoryStore | None = None,
        faults: Faults | None = None,
        provisioner: bool = False,
        provision_after: float = 0.0,
        workload_api: bool = False,
        engines: bool = False,
        engine_time_scale: float = 1.0,
        engine_lifecycle_scale: float | None = None,
    ):
        """`objects` are stored first (`seed.cluster_objects`); `crds`: tandem's CRDs installed;
        `kubelet`: run the simulated kubelet (ready `ready_after` s after start, bound
        `bind_latency` s after the gates go; a pod tolerates a node not ready or unreachable
        for `default_toleration_seconds` unless it says otherwise). For tests, in-process only: `store` serves a
        store of the caller's (empty), `faults` installs a fault-injection hook
        (`tandem.apiserver.faults`; None, the default and what `tandem apiserver` runs: no faults).
        `provisioner`: serve ProvisioningRequests and answer them with nodes, `provision_after`
        seconds after accepting them (`provisioner.py`). `workload_api`: serve the Workload API
        (`scheduling.k8s.io/v1alpha3`, `workload_api.py`), as a server with its alpha gates on.
        `engines`: run an engine stand-in for every pod whose container is SGLang or vLLM
        (`engines/`), every duration it waits (model load, prefill, decode, preStop, grace
        period) times `engine_time_scale` (the load, preStop and grace period times
        `engine_lifecycle_scale` instead, when given); `engine_report()` (and `GET /tandem/engines`)
        tells what each received."""
        if not cel.available():
            log.warning("cel-python is not installed (pip install 'tandem[apiserver]'): CRDs' x-kubernetes-validations rules are not checked")
        self.state = State(clock, store=store) if history is None else State(clock, history, store=store)
        self.faults = faults
        self.state.faults = faults
        self.state.default_toleration_seconds = default_toleration_seconds
        if faults is not None:
            faults.install(lambda: int(self.state.store.resource_version), self._wake)
        if workload_api:
            serve_workload_api(self.state.registry)
        seed(self.state, objects or [], crds=crds)
        self.provisioner = None
        if provisioner:
            install_crd(self.state)
            self.provisioner = Provisioner(self.state, delay=provision_after)
        self.bookmark_every = bookmark_every
        self.engines = EngineHost(engine_time_scale, lifecycle_scale=engine_lifecycle_scale) if engines and kubelet else None
        # Stand-ins listen on pod IPs: a block no other local server on this machine hands out.
        self._pod_network = pod_network.reserve() if self.engines is not None else None
        block = self._pod_network.block if self._pod_network is not None else pod_network.DEFAULT_BLOCK
        self.kubelet = (Kubelet(self.state, ready_after=ready_after, bind_latency=bind_latency, engines=self.engines, address_block=block)
                        if kubelet else None)
        try:
            self._http = ThreadingHTTPServer((host, port), _handler(self))
        except OSError:  # the port is taken: the pod network block goes back too
            if self._pod_network is not None:
                self._pod_network.release()
            raise
        self._http.daemon_threads = True
        self._thread: threading.Thread | None = None

    def _wake(self) -> None:
        with self.state.lock:
            self.state.changed()

    @property
    def url(self) -> str:
        host, port = self._bound()
        return f"http://{host}:{port}"

    @property
    def address(self) -> str:
        host, port = self._bound()
        return f"{host}:{port}"

    def _bound(self) -> tuple[str, int]:
        """The host and port served. typeshed types the host `str | bytes` (what bind accepts);
        once bound, `server_address` is the socket's own name, whose host is a str."""
        host, port = self._http.server_address[:2]
        assert isinstance(host, str)
        return host, port

    def start(self) -> "ApiServer":
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, name="tandem-apiserver", daemon=True)
        self._thread.start()
        if self.kubelet is not None:
            self.kubelet.start()
        if self.provisioner is not None:
            self.provisioner.start()
        return self

    def stop(self) -> None:
        """Stop serving: open watches end, the kubelet stops, the port is released."""
        self.state.stop()
        self._http.shutdown()
        self._http.server_close()
        if self.kubelet is not None:
            self.kubelet.join()
        if self.engines is not None:
            self.engines.close_all()
        if self._pod_network is not None:
            self._pod_network.release()
        if self.provisioner is not None:
            self.provisioner.join()
        if self._thread is not None:
            self._thread.join(5.0)

    def engine_report(self) -> dict[str, Any]:
        """Every pod that ran an engine stand-in and each request it received (arrival, wall
        clock; status; failed), kept after the pod is gone; empty without `engines`."""
        return self.engines.report() if self.engines is not None else {"timeScale": None, "pods": []}

    def __enter__(self) -> "ApiServer":
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def _handler(server: ApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        api = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    api: ApiServer
    _streaming = False  # a watch's response has begun
    protocol_version = "HTTP/1.1"  # keep-alive, and the chunked encoding watches use (HTTP/1.0 has none)
    disable_nagle_algorithm = True  # headers and body go in separate writes: no delayed-ACK stalls
    server_version = "tandem-apiserver"

    def handle(self) -> None:
        """Serve the connection's requests; a client that goes away between two requests of
        a kept-alive connection (a process killed, a connection pool closing) is not an error."""
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError):
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:  # noqa: N802
        self._serve("GET")

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._serve("PUT")

    def do_PATCH(self) -> None:  # noqa: N802
        self._serve("PATCH")

    def do_DELETE(self) -> None:  # noqa: N802
        self._serve("DELETE")

    # ------------------------------------------------------------------ dispatch

    def _serve(self, method: str) -> None:
        self._streaming = False
        url = urlsplit(self.path)
        params = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        target: Route | None = None
        try:
            raw = self._read()
            state = self.api.state
            with state.lock:
                target = route(state.registry, url.path)
            if target is None:
                self._other(method, url.path, raw)
                return
            body = self._parse(raw)
            accept = self.headers.get("Accept") or JSON
            watching = method == "GET" and target.name is None and params.get("watch") in ("true", "1")
            injected: Injected | None = None
            if self.api.faults is not None:
                request = Request(method, url.path, params, watching, target.resource.kind, target.subresource)
                injected = self.api.faults.decide(request)
                if injected is not None and not injected.applied:
                    self._injected(injected)
                    return
            if watching:
                self._watch(target, params, accept)
                return
            call = verbs.Call(method, target, params, body, self.headers.get("Content-Type") or JSON, accept)
            answer = verbs.handle(state, call)
            if injected is not None and self.api.faults is not None:  # applied, and the answer lost
                self.api.faults.lost(request, answer.code, answer.body)
                self._injected(injected)
                return
            self._json(answer.code, answer.body, answer.warnings)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:
            warnings: list[str] = []
            if isinstance(exc, Refused):
                warnings = exc.warnings
                exc = exc.error
            if not isinstance(exc, ApiError):  # a bug: answer 500, never drop the connection silently
                log.exception("%s %s failed", method, self.path)
                exc = InternalError(f"internal error: {type(exc).__name__}: {exc}")
            if self._streaming:  # a watch's 200 went out already: all that is left is to hang up
                self.close_connection = True
                return
            try:
                self._json(exc.code, failure(exc, target.resource if target else None, target.name if target else None), warnings)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting (on a slow webhook, say)
                self.close_connection = True

    def _injected(self, fault: Injected) -> None:
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": fault.status_message,
                "reason": fault.status_reason, "code": fault.code}
        self._send(fault.code, json.dumps(body).encode(), JSON, list(fault.headers.items()))

    def _other(self, method: str, path: str, raw: bytes = b"") -> None:
        """Everything that is not a resource: health, version, discovery, OpenAPI."""
        state = self.api.state
        path = "/" + path.strip("/")
        if path in ("/healthz", "/readyz", "/livez"):
            self._send(200, b"ok", "text/plain; charset=utf-8")
            return
        if path == "/tandem/engines/faults" and self.api.engines is not None and method in ("GET", "PUT"):
            self._json(200, self._engine_faults(method, raw))
            return
        if method != "GET":
            raise NotFound("the server could not find the requested resource")
        if path == "/tandem/engines":
            self._json(200, self.api.engine_report())
            return
        wanted, namespace = prometheus_sd.namespace_of(path)
        if wanted:  # Prometheus' http_sd_configs (Debian's build has no kubernetes_sd_configs)
            with state.lock:
                pods = state.store.list("Pod", namespace)
            self._json(200, prometheus_sd.pod_targets(pods))
            return
        if path == "/version":
            self._json(200, discovery.version_info())
            return
        if path == "/openapi/v2":
            content_type, data = discovery.openapi_v2(self.headers.get("Accept") or "")
            self._send(200, data, content_type)
            return
        with state.lock:
            answer: Any = None
            if path == "/api":
                answer = discovery.api_versions(self.api.address)
            elif path == "/apis":
                answer = discovery.api_group_list(state.registry)
            elif path == "/openapi/v3":
                answer = discovery.openapi_v3_root(state.registry)
            elif path.startswith("/openapi/v3/"):
                answer = discovery.openapi_v3_for_path(state.registry, path[len("/openapi/v3/"):])
            else:
                parts = path.strip("/").split("/")
                if parts[0] == "api" and len(parts) == 2:
                    answer = discovery.resource_list(state.registry, "", parts[1])
                elif parts[0] == "apis" and len(parts) == 2:
                    answer = discovery.api_group(state.registry, parts[1])
                elif parts[0] == "apis" and len(parts) == 3:
                    answer = discovery.resource_list(state.registry, parts[1], parts[2])
        if answer is None:
            raise NotFound("the server could not find the requested resource")
        self._json(200, answer)

    def _engine_faults(self, method: str, raw: bytes) -> dict[str, Any]:
        """The engine stand-ins' faults (`engines/standin.py` EngineFaults): read, or set whole."""
        engines = self.api.engines
        assert engines is not None
        if method == "GET":
            return engines.faults.to_dict()
        try:
            body = json.loads(raw or b"null")
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            return engines.set_faults(body)
        except ValueError as exc:
            raise BadRequest(f"/tandem/engines/faults: {exc}") from None

    def _watch(self, target: Route, params: dict[str, str], accept: str) -> None:
        watch.check(params)  # a bad selector is a 400, before the 200 goes out
        faults = self.api.faults
        if faults is not None and faults.gone_as_status and faults.too_old(params.get("resourceVersion") or ""):
            raise Expired(f"too old resource version: {params.get('resourceVersion')} ({faults.compacted})")
        stream = watch.events(
            self.api.state, target.resource, target.namespace, params, table=tables.wants_table(accept), bookmark_every=self.api.bookmark_every
        )
        self._streaming = True
        self.send_response(200)
        self.send_header("Content-Type", JSON)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.flush()
        try:
            for event in stream:
                self._chunk(json.dumps(event).encode() + b"\n")
            self._chunk(b"")
        finally:
            stream.close()

    # ------------------------------------------------------------------ input, output

    def _read(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True  # the body stays unread
            raise BadRequest(f"the request body of {length} bytes is over the {MAX_BODY}-byte limit")
        return self.rfile.read(length) if length else b""

    def _parse(self, raw: bytes) -> Any:
        if not raw:
            return None
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if content_type == PROTOBUF:
            try:
                return protobuf.decode(raw)
            except protobuf.Unreadable as exc:
                raise UnsupportedMediaType(
                    f"{exc}; send JSON (for kubectl create <kind>: `kubectl create ... --dry-run=client -o yaml | kubectl apply -f -`)"
                ) from None
        if "protobuf" in content_type or "cbor" in content_type:
            raise UnsupportedMediaType(f"the body is {content_type}; this server reads JSON, YAML and Kubernetes protobuf of a few kinds")
        try:
            if "yaml" in content_type:
                return yaml.safe_load(raw)
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as exc:
            raise BadRequest(f"the request body is not valid {'YAML' if 'yaml' in content_type else 'JSON'}: {exc}") from None

    def _json(self, code: int, body: Any, warnings: list[str] | None = None) -> None:
        headers = [("Warning", '299 - "' + _header_text(w).replace("\\", "\\\\").replace('"', '\\"') + '"') for w in warnings or []]
        self._send(code, json.dumps(body).encode(), JSON, headers)

    def _send(self, code: int, data: bytes, content_type: str, headers: list[tuple[str, str]] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for name, value in headers or []:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _header_text(text: str) -> str:
    """A warning as one header line of UTF-8, as kubectl reads it (it drops any other bytes):
    control characters (a webhook's newlines) become spaces; http.server writes Latin-1."""
    line = "".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in text)
    return line.encode("utf-8").decode("latin-1")
