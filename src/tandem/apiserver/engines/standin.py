"""The HTTP edge of an engine stand-in: SGLang's or vLLM's endpoints on the pod's IP and port.

A thin layer over `core.EngineLoop` (the batching and timing) and `metrics.EngineMetrics`.
SGLang's prefill/decode handoff: a prefill stand-in also listens on its bootstrap port;
a decode stand-in given `bootstrap_host`, `bootstrap_port`, `bootstrap_room` (the fields
SGLang's router adds) asks that address for the room's KV over HTTP and waits until the
prefill stand-in has prefilled it. Every serving request (`SERVING_PATHS`) and KV handoff
is recorded (`RequestLog`) with its arrival time and whether it failed; `/tandem/requests`
answers them. Health, metrics and info polls are not recorded: a router polls them for the
pod's whole life.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import logging
import queue
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

from tandem.apiserver.engines import timing
from tandem.apiserver.engines.core import EngineLoop, Job
from tandem.apiserver.engines.metrics import EngineMetrics
from tandem.apiserver.engines.recognition import EngineSpec
from tandem.apiserver.engines.timing import Timing

log = logging.getLogger("tandem.apiserver.engines")
KV_WAIT_SECONDS = 60.0  # a decode waits this long (real time) for its prefill's KV
ROOMS_KEPT_SECONDS = 120.0
KEEP_ALIVE_SECONDS = 120.0  # an idle connection is closed after this; longer than routers' idle pools (reqwest's 90 s) keep one
JOB_SILENCE_SECONDS = 600.0  # a backstop: a handler that hears nothing of its job this long answers it failed
SERVING_PATHS = frozenset({"/generate", "/v1/completions", "/v1/chat/completions"})  # recorded, with the KV handoff
KV_HANDOFF_PATH = "/tandem/kv"  # how a KV handoff is recorded (its room in `bootstrapRoom`)
VERSION = {"sglang": "0.5.5", "vllm": "0.11.0"}  # what /get_server_info and /version answer


@dataclass
class EngineFaults:
    """Faults a test sets on every stand-in of a server at once (`PUT /tandem/engines/faults`):
    `metrics_down` makes `/metrics` answer 503 while the engine keeps serving, a metrics
    outage as an autoscaler sees one."""

    metrics_down: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"metricsDown": self.metrics_down}


@dataclass
class RequestLog:
    """Per pod, every serving request and KV handoff it received: path, arrival (wall-clock seconds), status, failed,
    and the SGLang bootstrap room when the request carried one."""

    records: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def arrived(self, path: str, room: Any = None) -> dict[str, Any]:
        record: dict[str, Any] = {"path": path, "arrival": time.time(), "status": None, "failed": False}
        if room is not None:
            record["bootstrapRoom"] = room
        with self.lock:
            self.records.append(record)
        return record

    def finished(self, record: dict[str, Any], status: int) -> None:
        with self.lock:
            record["status"] = status
            record["failed"] = status >= 400

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(r) for r in self.records]


class Rooms:
    """Bootstrap rooms a prefill stand-in has prefilled, for its decode peers to wait on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rooms: dict[str, tuple[threading.Event, float]] = {}

    def _event(self, room: str) -> threading.Event:
        with self._lock:
            now = time.monotonic()
            for key in [k for k, (_, t) in self._rooms.items() if now - t > ROOMS_KEPT_SECONDS]:
                del self._rooms[key]
            if room not in self._rooms:
                self._rooms[room] = (threading.Event(), now)
            return self._rooms[room][0]

    def prefilled(self, room: str) -> None:
        self._event(room).set()

    def wait(self, room: str, timeout: float) -> bool:
        done = self._event(room).wait(timeout)
        if done:
            with self._lock:
                self._rooms.pop(room, None)
        return done


class StandIn:
    def __init__(self, spec: EngineSpec, ip: str, cost: Timing, scale: float, requests: RequestLog, name: str, ready_at: float,
                 monotonic: Callable[[], float] = time.monotonic, faults: EngineFaults | None = None):
        """Listens at once (answering 503 on its health endpoints until `ready_at` on the
        `monotonic` clock); raises OSError when the port cannot be bound."""
        self.spec, self.ip, self.cost, self.scale, self.requests, self.name = spec, ip, cost, scale, requests, name
        self.ready_at = ready_at
        self._monotonic = monotonic
        self.faults = EngineFaults() if faults is None else faults  # shared by the server's stand-ins
        self.draining = False
        self.rooms = Rooms()
        self._inflight = 0
        self._lock = threading.Lock()
        self.metrics = EngineMetrics(spec, cost.profiled)
        self.loop = EngineLoop(cost, scale, self.metrics.observe, name)
        self._servers = [_serve((ip, spec.port), _handler(self, bootstrap=False), f"tandem-engine-http-{name}")]
        # The KV handoff's own listeners (SGLang's bootstrap port, vLLM's NIXL side channel):
        # open until close(), so a decode still fetches from a prefill that stopped taking requests.
        for port, what in ((spec.bootstrap_port, "bootstrap"), (spec.side_channel_port, "side-channel")):
            if port is None:
                continue
            try:
                self._servers.append(_serve((ip, port), _handler(self, bootstrap=True), f"tandem-engine-{what}-{name}"))
            except OSError:
                for server in self._servers:
                    _close(server)
                self.loop.close()
                raise
        if not cost.profiled:
            log.warning("engine stand-in %s: model %r has no bundled profile; fixed timing (docs/apiserver.md)", name, spec.served_model)

    @property
    def url(self) -> str:
        return f"http://{self.ip}:{self.spec.port}"

    def loaded(self) -> bool:
        return self._monotonic() >= self.ready_at

    def serving(self) -> bool:
        """What its health endpoint would answer, known in-process: loaded, listening and
        not stopping (the kubelet asks this under the server's lock, where an HTTP round
        trip would hold up the whole API)."""
        return self.loaded() and not self.draining

    def probe(self) -> bool:
        """The readiness probe: its health endpoint answers 200 (asked directly, never through a proxy)."""
        try:
            return _get(self.ip, self.spec.port, "/health", 1.0) == 200
        except (OSError, http.client.HTTPException):
            return False

    def stop_accepting(self) -> None:
        """SIGTERM: the listener closes (new connections are refused); requests on open
        connections are answered 503; in-flight ones finish."""
        if self.draining:
            return
        self.draining = True
        for server in self._servers[:1]:
            threading.Thread(target=_close, args=(server,), daemon=True).start()

    def idle(self) -> bool:
        with self._lock:
            return self._inflight == 0

    def close(self, wait: bool = False) -> None:
        """Stop: every job fails, the ports are released and the connections still open
        ended (before returning when `wait`)."""
        self.draining = True
        self.loop.close()
        for server in self._servers:
            if wait:
                _end(server)
            else:
                threading.Thread(target=_end, args=(server,), daemon=True).start()

    def begin(self) -> None:
        with self._lock:
            self._inflight += 1

    def end(self) -> None:
        with self._lock:
            self._inflight -= 1


class _Server(ThreadingHTTPServer):
    """Knows its open connections, so that stopping ends them too (a keep-alive connection
    would otherwise outlive the listener, its handler thread waiting for the next request)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]):
        super().__init__(address, handler)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def end_connections(self) -> None:
        with self._open_lock:
            connections = list(self._open)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # closed meanwhile


def _serve(address: tuple[str, int], handler: type[BaseHTTPRequestHandler], name: str) -> _Server:
    server = _Server(address, handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True).start()
    return server


def _close(server: _Server) -> None:
    """Stop listening (new connections refused)."""
    server.shutdown()
    server.server_close()


def _end(server: _Server) -> None:
    """Stop listening and end every connection still open."""
    _close(server)
    server.end_connections()


def _handler(standin: StandIn, *, bootstrap: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        engine = standin
        is_bootstrap = bootstrap

    return Handler


class _Handler(BaseHTTPRequestHandler):
    engine: StandIn
    is_bootstrap: bool
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = KEEP_ALIVE_SECONDS  # the socket's: an idle keep-alive connection ends

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        log.debug("%s %s " + format, self.engine.name, self.address_string(), *args)

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError):
            self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._serve("PUT")

    # ------------------------------------------------------------------ dispatch

    def _serve(self, method: str) -> None:
        path = urlsplit(self.path).path.rstrip("/") or "/"
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if length < 0:
                raise ValueError(length)
        except ValueError:  # the body cannot be told from what follows it: answer, then close
            self.close_connection = True
            self._json(400, {"error": f"bad Content-Length {self.headers.get('Content-Length')!r}"})
            return
        raw = self.rfile.read(length)
        engine = self.engine
        if self.is_bootstrap:
            self._bootstrap(path)
            return
        if path == "/tandem/requests":
            self._json(200, {"pod": engine.name, "requests": engine.requests.snapshot()})
            return
        if path.startswith("/tandem/kv/") and engine.spec.engine == "vllm":  # a vLLM without a side channel: the handoff comes to the HTTP port
            self._bootstrap(path)
            return
        record = engine.requests.arrived(path) if path in SERVING_PATHS else None
        engine.begin()  # in flight from its arrival: a drain waits for it
        status = 500
        try:
            if engine.draining:
                self.close_connection = True
                status = self._json(503, {"error": "the server is shutting down"})
                return
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                status = self._json(400, {"error": "the request body is not JSON"})
                return
            if record is not None and isinstance(body, dict) and body.get("bootstrap_room") is not None:
                record["bootstrapRoom"] = body["bootstrap_room"]
            status = self._route(method, path, body if isinstance(body, dict) else {})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            status = 499
        except Exception as exc:  # a bug: say so, never hang the client
            log.exception("engine stand-in %s: %s %s failed", engine.name, method, path)
            status = self._json(500, {"error": f"{type(exc).__name__}: {exc}"})
        finally:
            if record is not None:
                engine.requests.finished(record, status)
            engine.end()

    def _route(self, method: str, path: str, body: dict[str, Any]) -> int:
        engine, spec = self.engine, self.engine.spec
        sglang = spec.engine == "sglang"
        if path in ("/health", "/health_generate", "/ping") and (sglang or path != "/health_generate"):
            if not engine.loaded():
                return self._json(503, {"error": "the model is loading"})
            return self._send(200, b"", "text/plain")
        if path == "/metrics":
            if engine.faults.metrics_down:
                return self._json(503, {"error": "metrics outage (set through the API server's /tandem/engines/faults)"})
            data = engine.metrics.exposition(engine.loop.load, engine.loop.capacity, timing.token_usage)
            return self._send(200, data, "text/plain; version=0.0.4; charset=utf-8")
        if not engine.loaded():
            return self._json(503, {"error": "the model is loading"})
        if path == "/v1/models":
            return self._json(200, {"object": "list", "data": [{"id": spec.served_model, "object": "model", "created": 0,
                                                                "owned_by": spec.engine, "root": spec.served_model, "parent": None,
                                                                "max_model_len": timing.kv_capacity_tokens(engine.cost)}]})
        if sglang and path in ("/model_info", "/get_model_info"):
            # No model_path or tokenizer_path: given one, sglang-router fetches the tokenizer
            # from Hugging Face (a connection off this machine); `served_model_name` names it.
            return self._json(200, {"served_model_name": spec.served_model, "is_generation": True,
                                    "preferred_sampling_params": None, "weight_version": "default", "has_image_understanding": False,
                                    "has_audio_understanding": False, "model_type": None, "architectures": None})
        if sglang and path in ("/get_server_info", "/server_info"):
            waiting, running, held = engine.loop.load()
            return self._json(200, {"served_model_name": spec.served_model, "tp_size": spec.tp,
                                    "host": engine.ip, "port": spec.port, "disaggregation_mode": spec.role or "null",
                                    "disaggregation_bootstrap_port": spec.bootstrap_port, "max_total_num_tokens": engine.loop.capacity,
                                    "version": VERSION["sglang"], "internal_states": [{"num_running_reqs": running, "num_queue_reqs": waiting,
                                                                                         "token_usage": timing.token_usage(held, engine.loop.capacity)}]})
        if path == "/version":
            return self._json(200, {"version": VERSION[spec.engine]})
        if sglang and path in ("/flush_cache", "/get_load"):
            return self._json(200, {"load": engine.loop.load()[1]} if path == "/get_load" else {})
        if method == "POST" and ((sglang and path == "/generate") or path in ("/v1/completions", "/v1/chat/completions")):
            return self._generate(path, body)
        return self._json(404, {"detail": "Not Found"})

    # ------------------------------------------------------------------ generation

    def _generate(self, path: str, body: dict[str, Any]) -> int:
        engine, spec = self.engine, self.engine.spec
        started = time.monotonic()
        prompt, max_new = timing.prompt_tokens(body), timing.max_new_tokens(body)
        room = body.get("bootstrap_room")
        given = body.get("kv_transfer_params")
        kv: dict[str, Any] = given if spec.engine == "vllm" and isinstance(given, dict) else {}
        handed: dict[str, Any] | None = None  # what a vLLM prefill tells its proxy, for the decode
        if spec.role == "decode" and room is not None:
            host, port = str(body.get("bootstrap_host") or ""), body.get("bootstrap_port")
            problem = _fetch_kv(host, port, room)
            if problem:
                return self._json(500, {"error": {"message": problem, "type": "KVTransferError"}})
            job = Job(prompt, max_new, prefill=False, decode=True)
        elif kv.get("do_remote_prefill") and kv.get("remote_host"):
            problem = _fetch_kv(str(kv["remote_host"]), kv.get("remote_port"), kv.get("remote_request_id"))
            if problem:
                return self._json(500, {"error": {"message": problem, "type": "KVTransferError"}})
            job = Job(prompt, max_new, prefill=False, decode=True)
        elif spec.role == "prefill" or kv.get("do_remote_decode"):
            job = Job(prompt, max_new, prefill=True, decode=False)
            if kv.get("do_remote_decode"):
                room = uuid.uuid4().hex
                handed = {"do_remote_prefill": True, "do_remote_decode": False, "remote_engine_id": engine.name, "remote_block_ids": [],
                          "remote_host": engine.ip, "remote_port": spec.side_channel_port or spec.port, "remote_request_id": room, "tp_size": spec.tp}
        else:
            job = Job(prompt, max_new, prefill=True, decode=True)
        engine.loop.submit(job)
        stream = bool(body.get("stream"))
        kind = "generate" if path == "/generate" else "chat" if path.endswith("chat/completions") else "completion"
        rid = str(body.get("rid") or uuid.uuid4().hex)
        if stream:
            self._start_stream()
            sent, cut = 0, False
            for count, done, failed in _updates(job):
                if failed:
                    self._chunk(b'data: {"error": {"message": "the engine stopped"}}\n\n')
                    cut = True
                    break
                if done and room is not None and not job.decode:
                    engine.rooms.prefilled(str(room))
                self._chunk(b"data: " + json.dumps(_piece(kind, spec, rid, _text(sent, count), _text(0, count), count, prompt, done),
                                                    separators=(",", ":")).encode() + b"\n\n")
                sent = count
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
            if cut:  # the 200 header went out before the engine stopped: the record says what happened
                return 503
            engine.metrics.observe("e2e", time.monotonic() - started)
            return 200
        final = 0
        for final, _, failed in _updates(job):
            if failed:
                return self._json(503, {"error": {"message": "the engine stopped"}})
        if room is not None and not job.decode:
            engine.rooms.prefilled(str(room))
        engine.metrics.observe("e2e", time.monotonic() - started)
        whole = _whole(kind, spec, rid, _text(0, final), final, prompt, time.monotonic() - started)
        if handed is not None:
            whole["kv_transfer_params"] = handed
        return self._json(200, whole)

    def _bootstrap(self, path: str) -> None:
        """The prefill's bootstrap port: `GET /tandem/kv/<room>` answers once it has prefilled the room."""
        parts = path.strip("/").split("/")
        if len(parts) == 3 and parts[:2] == ["tandem", "kv"]:
            record = self.engine.requests.arrived(KV_HANDOFF_PATH, parts[2])
            status = 499
            try:
                if self.engine.rooms.wait(parts[2], KV_WAIT_SECONDS):
                    status = self._json(200, {"room": parts[2]})
                else:
                    status = self._json(504, {"error": f"room {parts[2]} was not prefilled within {KV_WAIT_SECONDS:.0f} s"})
            finally:
                self.engine.requests.finished(record, status)
            return
        self._json(404, {"detail": "Not Found"})

    # ------------------------------------------------------------------ output

    def _json(self, code: int, body: Any) -> int:
        return self._send(code, json.dumps(body).encode(), "application/json")

    def _send(self, code: int, data: bytes, content_type: str) -> int:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        return code

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _updates(job: Job, silence: float = JOB_SILENCE_SECONDS) -> Iterator[tuple[int, bool, bool]]:
    """(tokens so far, done, failed) as the engine makes them: every event already queued is
    taken at once, so a last token and the end come as one update (an engine's last streamed
    chunk carries both), and a reader slower than the engine gets tokens in bunches. No
    event for `silence` seconds counts as failed, so no handler waits forever."""
    while True:
        try:
            events = [job.events.get(timeout=silence)]
        except queue.Empty:
            yield job.generated, False, True
            return
        while True:
            try:
                events.append(job.events.get_nowait())
            except queue.Empty:
                break
        count = max(n for _, n in events)
        done, failed = any(e == "done" for e, _ in events), any(e == "error" for e, _ in events)
        yield count, done, failed
        if done or failed:
            return


def _fetch_kv(host: str, port: Any, room: Any) -> str | None:
    """Wait for the prefill at `host:port` to have prefilled `room`; a problem, or None."""
    try:
        if not ipaddress.ip_address(host).is_loopback:
            return f"bootstrap_host {host} is not a loopback address: the stand-ins connect only within 127.0.0.0/8"
    except ValueError:
        return f"bootstrap_host {host!r} is not an IP address"
    try:
        status = _get(host, int(port), f"/tandem/kv/{room}", KV_WAIT_SECONDS + 5)
        return None if status == 200 else f"bootstrap {host}:{port} answered {status}"
    except (OSError, ValueError, TypeError, http.client.HTTPException) as exc:
        return f"KV transfer from {host}:{port} room {room} failed: {exc}"


def _get(host: str, port: int, path: str, timeout: float) -> int:
    """The status of `GET path` at host:port, on a connection of its own: stand-ins talk to
    loopback addresses only, never through a proxy (urllib would obey `http_proxy`, which
    Python does not bypass for 127.x)."""
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", path)
        answer = connection.getresponse()
        answer.read()
        return answer.status
    finally:
        connection.close()


def _text(start: int, end: int) -> str:
    """Tokens start+1..end of the made-up output: " t1 t2 ..." (a word per token)."""
    return "".join(f" t{i}" for i in range(start + 1, end + 1))


def _finish(engine: str, count: int) -> Any:
    return {"type": "length", "length": count} if engine == "sglang" else "length"


def _piece(kind: str, spec: EngineSpec, rid: str, delta: str, whole: str, count: int, prompt: int, done: bool) -> dict[str, Any]:
    if kind == "generate":  # SGLang streams the text so far
        return {"text": whole, "output_ids": list(range(1, count + 1)),
                "meta_info": {"id": rid, "finish_reason": _finish("sglang", count) if done else None, "prompt_tokens": prompt,
                              "completion_tokens": count, "cached_tokens": 0}}
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": "length" if done else None}
    if kind == "chat":
        choice["delta"] = {"role": "assistant", "content": delta} if delta == whole else {"content": delta}  # the first chunk names the role
        return {"id": f"chatcmpl-{rid}", "object": "chat.completion.chunk", "created": 0, "model": spec.served_model, "choices": [choice]}
    choice["text"] = delta
    return {"id": f"cmpl-{rid}", "object": "text_completion", "created": 0, "model": spec.served_model, "choices": [choice]}


def _whole(kind: str, spec: EngineSpec, rid: str, text: str, count: int, prompt: int, seconds: float) -> dict[str, Any]:
    if kind == "generate":
        return {"text": text, "output_ids": list(range(1, count + 1)),
                "meta_info": {"id": rid, "finish_reason": _finish("sglang", count), "prompt_tokens": prompt, "completion_tokens": count,
                              "cached_tokens": 0, "e2e_latency": seconds}}
    usage = {"prompt_tokens": prompt, "completion_tokens": count, "total_tokens": prompt + count}
    if kind == "chat":
        return {"id": f"chatcmpl-{rid}", "object": "chat.completion", "created": 0, "model": spec.served_model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None, "finish_reason": "length"}],
                "usage": usage}
    return {"id": f"cmpl-{rid}", "object": "text_completion", "created": 0, "model": spec.served_model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}], "usage": usage}
