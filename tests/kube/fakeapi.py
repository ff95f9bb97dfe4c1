"""A small Kubernetes REST API over the simulator's in-memory store, for the adapter's tests.

It speaks what `tandem.kube` sends: list (paged with limit/continue, items without
apiVersion/kind as a real server sends them), watch (resourceVersion, bookmarks,
timeoutSeconds, chunked JSON lines), get, create, merge patch (the precondition taken
from `metadata.resourceVersion` in the body) of an object or its /status, and delete
with DeleteOptions. The store gives the semantics (conflicts, generation, cascades).
A resource it does not serve is a 404, as on a real server. A CustomResourceDefinition
created through it serves its kind (its storage version, keyed `Kind.group` as tandem
registers delegated kinds) until it is deleted, which takes the kind's objects with it.

Test controls: `fail(...)` answers the next matching requests with an error;
`compact()` makes every older resourceVersion too old to watch from (410, as after etcd
compaction); `end_watches()` closes every open watch; `bookmark()` sends a bookmark on
every open watch; `requests` records what came in. `tandem apiserver` (issue 12) is the
product's real one, and the fault campaign runs against it (its own fault hook,
`tandem.apiserver.faults`); this fake stays for the adapter's tests (tests/kube), where a
request-level script of failures (`fail`) is the point.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tandem.cluster.kind_keys import key_of
from tandem.cluster.memory import MemoryStore
from tandem.errors import ApiError, BadRequest, Gone, NotFound

PLURALS = {
    ("", "pods"): ("Pod", "v1"),
    ("", "nodes"): ("Node", "v1"),
    ("", "services"): ("Service", "v1"),
    ("", "configmaps"): ("ConfigMap", "v1"),
    ("", "events"): ("Event", "v1"),
    ("", "namespaces"): ("Namespace", "v1"),
    ("coordination.k8s.io", "leases"): ("Lease", "coordination.k8s.io/v1"),
    ("tandem.dev", "inferencegroups"): ("InferenceGroup", "tandem.dev/v1alpha1"),
    ("tandem.dev", "clustertopologies"): ("ClusterTopology", "tandem.dev/v1alpha1"),
    # one kind name in two groups, kept apart under their qualified keys (tandem.cluster.kind_keys)
    ("kai.scheduler", "topologies"): ("Topology", "kai.scheduler/v1alpha1"),
    ("kueue.x-k8s.io", "topologies"): ("Topology", "kueue.x-k8s.io/v1beta2"),
    ("apiextensions.k8s.io", "customresourcedefinitions"): ("CustomResourceDefinition", "apiextensions.k8s.io/v1"),
}
CRD_KIND = "CustomResourceDefinition"
QUALIFIED = ("Topology.kai.scheduler", "Topology.kueue.x-k8s.io")  # cluster-scoped, no status


def _store() -> MemoryStore:
    store = MemoryStore(clock=time.time)
    for key in QUALIFIED:
        store.register_kind(key, cluster_scoped=True, status=False)
    return store


@dataclass
class Seen:
    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    code: int
    reason: str
    headers: dict[str, str]
    times: int
    watch: bool | None  # None: watches and other requests alike
    delay: float = 0.0


@dataclass
class Route:
    kind: str
    api_version: str
    namespace: str | None
    name: str | None
    subresource: str | None
    qualified: tuple[str, ...] = QUALIFIED

    @property
    def key(self) -> str:
        """The store's name for the kind (`Topology.kai.scheduler` where qualified)."""
        return key_of(self.api_version, self.kind, self.qualified)


@dataclass
class FakeApi:
    store: MemoryStore = field(default_factory=_store)
    bookmark_every: float | None = None  # seconds between bookmarks on a quiet watch
    requests: list[Seen] = field(default_factory=list)
    compacted: int = 0
    gone_as_status: bool = False  # 410 as the HTTP status of the watch request, not an ERROR event

    def __post_init__(self) -> None:
        self.lock = threading.Condition()
        self.faults: list[Fault] = []
        self._epoch = 0  # end_watches() bumps it
        self._bookmarks = 0  # bookmark() bumps it
        self._pages: dict[str, list[Any]] = {}
        self.custom: dict[tuple[str, str], tuple[str, str]] = {}  # served by a CRD: (group, plural) -> (kind, apiVersion)
        handler = type("Handler", (_Handler,), {"api": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), name="fake-api", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.end_watches()
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ controls

    def fail(self, method: str, path: str, code: int, reason: str = "", *, headers: dict[str, str] | None = None,
             times: int = 1, watch: bool | None = None, delay: float = 0.0) -> None:
        with self.lock:
            self.faults.append(Fault(method.upper(), re.compile(path), code, reason, headers or {}, times, watch, delay))

    def compact(self) -> None:
        with self.lock:
            self.compacted = int(self.store.resource_version)

    def end_watches(self) -> None:
        with self.lock:
            self._epoch += 1
            self.lock.notify_all()

    def bookmark(self) -> None:
        with self.lock:
            self._bookmarks += 1
            self.lock.notify_all()

    def write(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        """Change the store directly (as another client would) and wake the watches."""
        with self.lock:
            out = fn(*args, **kwargs)
            self.lock.notify_all()
            return out

    def route(self, path: str) -> Route:
        with self.lock:
            served = {**PLURALS, **self.custom}
            qualified = (*QUALIFIED, *(f"{kind}.{group}" for (group, _), (kind, _) in self.custom.items()))
        return _route(path, served, qualified)

    def crd_written(self, crd: dict[str, Any]) -> None:
        """Serve the kind of a CRD just stored (with the lock held), keyed `Kind.group`."""
        spec = crd.get("spec") or {}
        group, names = spec.get("group", ""), spec.get("names") or {}
        version = next((v["name"] for v in spec.get("versions") or [] if v.get("storage")), "v1")
        self.custom[(group, names.get("plural", ""))] = (names.get("kind", ""), f"{group}/{version}")
        status = any("status" in (v.get("subresources") or {}) for v in spec.get("versions") or [])
        self.store.register_kind(f"{names.get('kind')}.{group}", cluster_scoped=spec.get("scope") == "Cluster", status=status)

    def crd_deleting(self, name: str) -> None:
        """Stop serving a CRD's kind and delete its objects (with the lock held)."""
        plural, _, group = name.partition(".")
        served = self.custom.pop((group, plural), None)
        if served is None:
            return
        key = f"{served[0]}.{group}"
        for obj in self.store.list(key):
            self.store.delete(key, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        self.store.forget_kind(key)

    def seen(self, method: str | None = None, path: str = "") -> list[Seen]:
        return [r for r in list(self.requests) if (method is None or r.method == method) and path in r.path]

    # ------------------------------------------------------------------ serving

    def fault_for(self, method: str, path: str, watch: bool) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.times > 0 and fault.method == method and fault.path.search(path) and fault.watch in (None, watch):
                    fault.times -= 1
                    return fault
        return None


class _Handler(BaseHTTPRequestHandler):
    api: FakeApi
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms delayed-ACK stalls

    def log_message(self, *_: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        api = self.api
        url = urlsplit(self.path)
        params = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        api.requests.append(Seen(method, url.path, params, {k.lower(): v for k, v in self.headers.items()}, body))
        watch = params.get("watch") in ("true", "1")
        with api.lock:
            # The watch epoch is read with the faults: a watch that got past them before
            # `fail` and `end_watches` ran ends with the others, instead of living on.
            epoch = api._epoch
            fault = api.fault_for(method, url.path, watch)
        if fault is not None:
            time.sleep(fault.delay)
            self._status(fault.code, fault.reason or "Injected", f"injected {fault.code}", fault.headers)
            return
        try:
            route = api.route(url.path)
            if watch:
                self._watch(route, params, epoch)
                return
            self._json(200 if method != "POST" else 201, self._answer(method, route, params, body))
        except ApiError as exc:
            self._status(exc.code, exc.reason, str(exc))

    def _answer(self, method: str, route: Route, params: dict[str, str], body: Any) -> Any:
        api, store = self.api, self.api.store
        with api.lock:
            try:
                if method == "GET" and route.name is None:
                    return self._list(route, params)
                if method == "GET":
                    return store.get(route.key, route.namespace, route.name)
                if method == "POST":
                    body.setdefault("metadata", {})
                    if route.namespace and not body["metadata"].get("namespace"):
                        body["metadata"]["namespace"] = route.namespace
                    if body.get("kind") != route.kind:
                        raise BadRequest(f"kind {body.get('kind')!r} posted to {route.kind}")
                    created = store.create(body)
                    if route.kind == CRD_KIND:
                        api.crd_written(created)
                    return created
                if method == "PATCH":
                    if self.headers.get("Content-Type") != "application/merge-patch+json":
                        raise ApiError(f"unsupported patch type {self.headers.get('Content-Type')}")
                    patch = dict(body)
                    meta = dict(patch.get("metadata") or {})
                    version = meta.pop("resourceVersion", None)
                    if "metadata" in patch:
                        patch["metadata"] = meta
                    if route.subresource == "status":
                        return store.patch_status(route.key, route.namespace, route.name, patch, resource_version=version)
                    return store.patch(route.key, route.namespace, route.name, patch, resource_version=version)
                if method == "DELETE":
                    options = body or {}
                    pre = options.get("preconditions") or {}
                    if route.kind == CRD_KIND and route.name:
                        api.crd_deleting(route.name)
                    store.delete(
                        route.key, route.namespace, route.name, uid=pre.get("uid"), resource_version=pre.get("resourceVersion"),
                        propagation=options.get("propagationPolicy") or "Background",
                    )
                    return {"apiVersion": "v1", "kind": "Status", "status": "Success"}
                raise BadRequest(f"{method} not served")
            finally:
                api.lock.notify_all()

    def _list(self, route: Route, params: dict[str, str]) -> Any:
        api = self.api
        token = params.get("continue")
        if token:
            items = api._pages.pop(token, None)
            if items is None:
                raise Gone("the continue token has expired")
            version = json.loads(base64.b64decode(token))["rv"]
        else:
            items = api.store.list(route.key, route.namespace, labels=params.get("labelSelector"))
            version = api.store.resource_version
        limit = int(params.get("limit") or 0)
        meta: dict[str, Any] = {"resourceVersion": version}
        if limit and len(items) > limit:
            rest = items[limit:]
            items = items[:limit]
            token = base64.b64encode(json.dumps({"rv": version, "n": len(api._pages) + len(rest) + time.time_ns()}).encode()).decode()
            api._pages[token] = rest
            meta["continue"] = token
        for item in items:  # a real server's list items carry no apiVersion/kind
            item.pop("apiVersion", None)
            item.pop("kind", None)
        return {"apiVersion": route.api_version, "kind": f"{route.kind}List", "metadata": meta, "items": items}

    def _watch(self, route: Route, params: dict[str, str], epoch: int) -> None:
        api = self.api
        since = int(params.get("resourceVersion") or api.store.resource_version)
        deadline = time.monotonic() + float(params.get("timeoutSeconds") or 3600)
        bookmarks = params.get("allowWatchBookmarks") == "true"
        if since < api.compacted and api.gone_as_status:
            raise Gone(f"too old resource version: {since} ({api.compacted})")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with api.lock:
            marks = api._bookmarks
        last_bookmark = time.monotonic()
        try:
            while time.monotonic() < deadline:
                with api.lock:
                    if api._epoch != epoch:
                        break
                    lines: list[dict[str, Any]] = []
                    if since < api.compacted:
                        lines.append(_error_event(since, api.compacted))
                    else:
                        try:
                            events = api.store.watch(route.key, str(since), route.namespace)
                        except Gone as exc:
                            events = []
                            lines.append({"type": "ERROR", "object": _status_body(410, "Expired", str(exc))})
                        for event in events:
                            obj = event.object
                            if event.type == "DELETED":  # a real server stamps the deletion's version on it
                                obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": event.resource_version}}
                            lines.append({"type": event.type, "object": obj})
                            since = int(event.resource_version)
                    due = api.bookmark_every is not None and time.monotonic() - last_bookmark >= api.bookmark_every
                    if bookmarks and (api._bookmarks != marks or due) and not lines:
                        marks = api._bookmarks
                        last_bookmark = time.monotonic()
                        since = max(since, int(api.store.resource_version))
                        lines.append({"type": "BOOKMARK", "object": {"apiVersion": route.api_version, "kind": route.kind,
                                                                      "metadata": {"resourceVersion": str(since)}}})
                    if not lines:
                        api.lock.wait(timeout=0.05)
                        continue
                for line in lines:
                    self._chunk(json.dumps(line).encode() + b"\n")
                if lines and lines[-1]["type"] == "ERROR":
                    break
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            pass

    # ------------------------------------------------------------------ output

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _json(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _status(self, code: int, reason: str, message: str, headers: dict[str, str] | None = None) -> None:
        self._json(code, _status_body(code, reason, message), headers)


def _status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code, "reason": reason, "message": message, "metadata": {}}


def _error_event(since: int, compacted: int) -> dict[str, Any]:
    return {"type": "ERROR", "object": _status_body(410, "Expired", f"too old resource version: {since} ({compacted})")}


def _route(path: str, served: dict[tuple[str, str], tuple[str, str]], qualified: tuple[str, ...]) -> Route:
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise ApiError(f"no route to {path}")  # 500, not a kind the adapter would ask for
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or (group, rest[0]) not in served:
        raise NotFound(f"the server could not find the requested resource ({path})")
    kind, api_version = served[(group, rest[0])]
    return Route(kind, api_version, namespace, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None, qualified)
