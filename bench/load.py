"""Load (issue 16, item 4): the operator, the webhook and the local API server under load,
as processes over HTTP; prints one JSON object per case on stdout, a progress bar on stderr.

    python bench/load.py [--case operator|webhook|apiserver|all] [--quick]
    python bench/load.py --groups 1000 --bursts 10 --reviews 100 --watchers 10 --objects 1000

`operator`: `tandem apiserver` (a cluster with room for every group at its scaled size;
bindings at once, pods Ready as they start) and `tandem operator` as processes. `--groups`
small InferenceGroups (1 unit of prefill 1 + decode 1, 1 GPU a pod, packed in a rack) are
created in `--bursts` bursts (each burst POSTed at once from a few client threads, then
waited for), then scaled to 2 units in bursts, then deleted in bursts. Latency is per
group, from its request's start to the moment a watch on every pod saw the last of its
pods Ready (create, scale) or gone (delete); throughput is groups over the phase's wall
time. Then, from the API server: every group has exactly its pods, each pod name and
revision was created once (ADDED events counted per name and uid on the watch), every
event came once and in resourceVersion order, and after the deletes no Pod, Service or
ConfigMap of tandem's is left.

`webhook`: `tandem operator --webhook-port` with a certificate made here, over a
64-node cluster; `--reviews` AdmissionReviews (the bundled llama-70b group, each with its
own uid) sent at once, one HTTPS connection each, `--rounds` times; every review must be
answered once, for its own uid, allowed.

`apiserver`: `tandem apiserver` and `--watchers` watches on pods and as many on
InferenceGroups (threads of this process, each its own connection), opened from one
resourceVersion; two writers create, update and delete `--objects` pods and
`--objects // 5` groups. Every watcher must see every write's event exactly once, in
resourceVersion order, and all watchers the same stream; delivery latency is from the
write's request to the event's arrival at each watcher.

Peak RSS is each process's VmHWM (Linux /proc), the bench's own included. Figures are of
the machine they run on: see docs/reliability.md for the ones measured and how loaded it was.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import signal
import socket
import ssl
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import quote, urlsplit

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from e2e.processes import free_port, start_apiserver, start_operator  # noqa: E402
from tandem.topology.generate import generate_cluster  # noqa: E402

NS = "load"
IG = "/apis/tandem.dev/v1alpha1"
GROUP_LABEL = "tandem.dev/group"
REVISION_LABEL = "tandem.dev/revision"
CLIENTS = 4  # client threads sending a burst


# ----------------------------------------------------------------------------- measuring


def peak_rss_mib(pid: int | None = None) -> float:
    """The process's peak resident set (VmHWM), MiB; 0 where /proc does not say."""
    try:
        for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return 0.0


def percentiles(values: list[float], scale: float = 1000.0) -> dict[str, float]:
    """p50, p95, p99 and max, times `scale` (seconds to ms by default), nearest rank."""
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0, "n": 0}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))] * scale, 2)

    return {"p50": at(0.50), "p95": at(0.95), "p99": at(0.99), "max": round(ordered[-1] * scale, 2), "n": len(ordered)}


# ----------------------------------------------------------------------------- HTTP


class Client:
    """JSON over one kept-alive HTTP connection (one per thread: not thread-safe)."""

    def __init__(self, url: str, timeout: float = 60.0):
        parts = urlsplit(url)
        self.host, self.port, self.timeout = parts.hostname or "127.0.0.1", parts.port or 80, timeout
        self._conn: http.client.HTTPConnection | None = None

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type, "Accept": "application/json"} if data is not None else {"Accept": "application/json"}
        for attempt in range(2):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self._conn.request(method, path, body=data, headers=headers)
                response = self._conn.getresponse()
                payload = response.read()
                return response.status, json.loads(payload) if payload else None
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self._conn.close()
                self._conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


@dataclass
class Seen:
    type: str
    version: int
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    ready: bool
    at: float  # time.monotonic() of arrival


@dataclass
class Watcher:
    """One watch stream (reopened from its last version when it ends), every event kept.
    `on_event` runs in the watcher's thread for each one."""

    url: str
    path: str  # the collection, e.g. /api/v1/pods
    version: str
    on_event: Callable[["Seen"], None] | None = None
    events: list[Seen] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)  # ERROR events (410 Gone would mean a re-list)
    reopened: int = 0
    opened: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _conn: http.client.HTTPConnection | None = None

    def start(self) -> "Watcher":
        self._thread = threading.Thread(target=self._follow, daemon=True, name=f"watch {self.path}")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop following: the open stream is shut down at once (a blocked read wakes)."""
        self._stop.set()
        conn = self._conn
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(15)

    def _follow(self) -> None:
        parts = urlsplit(self.url)
        while not self._stop.is_set():
            conn = self._conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60.0)  # bookmarks every 10 s
            try:
                conn.request("GET", f"{self.path}?watch=true&allowWatchBookmarks=true&timeoutSeconds=600&resourceVersion={self.version}")
                response = conn.getresponse()
                if response.status != 200:
                    self.errors.append({"code": response.status, "body": response.read().decode(errors="replace")[:200]})
                    time.sleep(0.2)
                    continue
                self.opened.set()
                while not self._stop.is_set():
                    line = response.readline()
                    if not line:
                        break
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    meta = obj.get("metadata") or {}
                    if event["type"] == "ERROR":
                        self.errors.append(obj)
                        break
                    self.version = meta.get("resourceVersion") or self.version
                    if event["type"] == "BOOKMARK":
                        continue
                    seen = Seen(event["type"], int(meta.get("resourceVersion") or 0), meta.get("namespace") or "", meta.get("name") or "",
                                meta.get("uid") or "", meta.get("labels") or {}, _ready(obj), time.monotonic())
                    self.events.append(seen)
                    if self.on_event is not None:
                        self.on_event(seen)
                if not self._stop.is_set():
                    self.reopened += 1
            except (OSError, http.client.HTTPException):
                if not self._stop.is_set():
                    self.reopened += 1
                    time.sleep(0.1)
            finally:
                conn.close()


def _ready(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, dict))


def in_order_once(events: list[Seen]) -> tuple[int, int]:
    """(events out of resourceVersion order, events seen more than once) in one stream."""
    out_of_order = sum(1 for a, b in zip(events, events[1:]) if b.version < a.version)
    counts = Counter(e.version for e in events)
    return out_of_order, sum(n - 1 for n in counts.values() if n > 1)


def parallel(items: list[Any], work: Callable[[Client, Any], None], url: str, threads: int = CLIENTS) -> None:
    """`work(client, item)` for every item, spread over `threads` threads, each its own connection."""
    chunks = [items[i::threads] for i in range(threads)]
    failures: list[BaseException] = []

    def run(chunk: list[Any]) -> None:
        client = Client(url)
        try:
            for item in chunk:
                work(client, item)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            client.close()

    workers = [threading.Thread(target=run, args=(c,)) for c in chunks if c]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if failures:
        raise failures[0]


@contextmanager
def progress_bar(enabled: bool = True) -> Iterator[Progress]:
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True, disable=not enabled) as progress:
        yield progress


def _stop_process(process: Any) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except Exception:  # noqa: BLE001
            process.kill()


# ----------------------------------------------------------------------------- operator


def small_group(name: str) -> dict[str, Any]:
    role = lambda n: {"name": n, "replicas": 1, "minReplicas": 1, "podsPerReplica": 1,  # noqa: E731
                      "template": {"spec": {"containers": [{"name": "engine", "image": "vllm", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}}
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "metadata": {"name": name, "namespace": NS},
            "spec": {"topologyName": "default", "replicas": 1, "topology": {"pack": {"required": "rack"}}, "roles": [role("prefill"), role("decode")]}}


class PodBook:
    """What a watch on every pod has shown: per group, its pods now, when it reached a target."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pods: dict[str, dict[str, Seen]] = defaultdict(dict)  # group -> pod name -> last event
        self.target: dict[str, tuple[int, bool]] = {}  # group -> (pods wanted, all Ready? else: none left)
        self.reached: dict[str, float] = {}
        self.added: Counter[tuple[str, str, str]] = Counter()  # (namespace, name, uid) -> ADDED events
        self.incarnations: dict[tuple[str, str, str], dict[str, float]] = defaultdict(dict)  # (namespace, name, revision) -> uid -> ADDED at

    def expect(self, group: str, pods: int, ready: bool) -> None:
        with self.lock:
            self.target[group] = (pods, ready)
            self.reached.pop(group, None)
            self._check(group, time.monotonic())

    def __call__(self, seen: Seen) -> None:
        group = seen.labels.get(GROUP_LABEL)
        if group is None:
            return
        with self.lock:
            if seen.type == "ADDED":
                self.added[(seen.namespace, seen.name, seen.uid)] += 1
                self.incarnations[(seen.namespace, seen.name, seen.labels.get(REVISION_LABEL, ""))].setdefault(seen.uid, seen.at)
            if seen.type == "DELETED":
                self.pods[group].pop(seen.name, None)
            else:
                self.pods[group][seen.name] = seen
            self._check(group, seen.at)

    def _check(self, group: str, at: float) -> None:
        if group not in self.target or group in self.reached:
            return
        want, ready = self.target[group]
        pods = self.pods.get(group, {})
        if (ready and len(pods) == want and all(p.ready for p in pods.values())) or (not ready and not pods):
            self.reached[group] = at


def operator_case(groups: int = 1000, bursts: int = 10, show: bool = True, timeout: float = 120.0) -> dict[str, Any]:
    """Create, scale and delete `groups` groups in `bursts` bursts against the two processes;
    AssertionError (with what the server holds) if a burst is not done within `timeout` s."""
    started = time.perf_counter()
    peak_units = 2
    gpus_needed = groups * 2 * peak_units
    hosts = 20
    racks = max(2, math.ceil(gpus_needed * 1.1 / 8 / hosts))
    topology, nodes = generate_cluster([("rack", racks), ("host", hosts)], 8)
    names = [f"g{i:05d}" for i in range(groups)]
    per_burst = math.ceil(groups / bursts)
    burst_list = [names[i:i + per_burst] for i in range(0, groups, per_burst)]
    with tempfile.TemporaryDirectory(prefix="tandem-load-") as scratch:
        work = Path(scratch)
        (work / "cluster.yaml").write_text(yaml.safe_dump_all([topology, {"apiVersion": "v1", "kind": "List", "items": nodes}]))
        server = start_apiserver(work, "--cluster", str(work / "cluster.yaml"), "--ready-after", "0", "--bind-latency", "0")
        operator = None
        watcher = None
        try:
            operator = start_operator(server, work, "load", "--resync", "300")
            book = PodBook()
            version = Client(server.url).call("GET", "/api/v1/pods?limit=1")[1]["metadata"]["resourceVersion"]
            watcher = Watcher(server.url, "/api/v1/pods", version, on_event=book).start()
            if not watcher.opened.wait(10):
                raise AssertionError("the pod watch did not open")
            phases: dict[str, Any] = {}
            sent: dict[str, float] = {}
            sent_in: dict[str, dict[str, float]] = defaultdict(dict)  # phase -> group -> its request's start
            with progress_bar(show) as progress:

                def phase(name: str, request: Callable[[Client, str], None], pods: int, ready: bool, timeout: float) -> None:
                    task = progress.add_task(f"operator: {name} ({groups} groups)", total=groups)
                    phase_start = time.monotonic()
                    for burst in burst_list:
                        for g in burst:
                            book.expect(g, pods, ready)

                        def one(client: Client, g: str) -> None:
                            sent[g] = sent_in[name][g] = time.monotonic()
                            request(client, g)

                        parallel(burst, one, server.url)
                        deadline = time.monotonic() + timeout
                        while True:
                            with book.lock:
                                done = sum(1 for g in burst if g in book.reached)
                            progress.update(task, completed=burst_list.index(burst) * per_burst + done)
                            if done == len(burst):
                                break
                            if time.monotonic() > deadline or operator.process.poll() is not None:
                                raise AssertionError(f"{name}: {len(burst) - done} groups of a burst not done in {timeout:.0f} s "
                                                     f"(operator {'exited' if operator.process.poll() is not None else 'running'})\n"
                                                     + _diagnosis(server.url, [g for g in burst if g not in book.reached], book, operator.log()))
                            time.sleep(0.02)
                    wall = time.monotonic() - phase_start
                    with book.lock:
                        latencies = [book.reached[g] - sent[g] for g in names]
                    phases[name] = {"groups_per_s": round(groups / wall, 1), "wall_s": round(wall, 2), "latency_ms": percentiles(latencies)}

                def create(client: Client, g: str) -> None:
                    code, body = client.call("POST", f"{IG}/namespaces/{NS}/inferencegroups", small_group(g))
                    assert code == 201, (code, body)

                def scale(client: Client, g: str) -> None:
                    code, body = client.call("PATCH", f"{IG}/namespaces/{NS}/inferencegroups/{g}", {"spec": {"replicas": 2}},
                                             "application/merge-patch+json")
                    assert code == 200, (code, body)

                def delete(client: Client, g: str) -> None:
                    code, body = client.call("DELETE", f"{IG}/namespaces/{NS}/inferencegroups/{g}")
                    assert code == 200, (code, body)

                phase("create", create, 2, True, timeout)
                after_create = _census(server.url, names, 2)
                phase("scale", scale, 4, True, timeout)
                after_scale = _census(server.url, names, 4)
                phase("delete", delete, 0, False, timeout)
            time.sleep(1.0)  # a pass that raced the deletes has written and been collected
            left = _left_behind(server.url)
            rss = {"apiserver": peak_rss_mib(server.process.pid), "operator": peak_rss_mib(operator.process.pid), "bench": peak_rss_mib()}
            watcher.stop()
            out_of_order, repeated = in_order_once(watcher.events)
            with book.lock:
                again = {key: sorted(uids.values()) for key, uids in book.incarnations.items() if len(uids) > 1}
                repeated_added = sum(n - 1 for n in book.added.values() if n > 1)
            # A pod made again after its group's delete was sent: a pass that read the group from
            # a cache the delete had not reached yet; the server collects it at once (owner gone).
            raced = {key: times for key, times in again.items() if times[1] >= sent_in["delete"].get(_group_of(key[1]), math.inf)}
            twice = len(again) - len(raced)
            twice_examples = [f"{ns}/{name} revision {rev}" for (ns, name, rev) in sorted(set(again) - set(raced))][:5]
            return {
                "bench": "load", "case": "operator", "groups": groups, "bursts": len(burst_list), "burst_size": per_burst,
                "nodes": len(nodes), "pods_peak": groups * 2 * peak_units, "phases": phases, "rss_peak_mib": rss,
                "pod_events": len(watcher.events), "watch_reopened": watcher.reopened, "watch_errors": len(watcher.errors),
                "lost": after_create["missing"] + after_scale["missing"] + after_create["not_ready"] + after_scale["not_ready"],
                "extra": after_create["extra"] + after_scale["extra"],
                "created_twice": twice, "created_twice_examples": twice_examples, "created_after_group_deleted": len(raced),
                "events_duplicated": repeated + repeated_added, "events_out_of_order": out_of_order,
                "left_behind": left, "wall_s": round(time.perf_counter() - started, 1),
            }
        finally:
            if watcher is not None:
                watcher.stop()
            if operator is not None:
                _stop_process(operator.process)
            _stop_process(server.process)


def _group_of(pod: str) -> str:
    """The group of a pod tandem named `<group>-<unit>-<role>-<replica>-<index>`."""
    return pod.rsplit("-", 4)[0]


def _diagnosis(url: str, late: list[str], book: PodBook, log: str) -> str:
    """What the API server and the watch say of groups that did not get there, and the operator's last words."""
    client = Client(url)
    lines = []
    for g in late[:3]:
        code, group = client.call("GET", f"{IG}/namespaces/{NS}/inferencegroups/{g}")
        status = (group or {}).get("status") or {}
        pods = client.call("GET", f"/api/v1/namespaces/{NS}/pods?labelSelector={quote(GROUP_LABEL)}%3D{g}")[1]["items"]
        with book.lock:
            watched = {n: (p.type, p.ready, p.version) for n, p in book.pods.get(g, {}).items()}
        lines.append(f"{g}: {code} generation {(group or {}).get('metadata', {}).get('generation')} observed {status.get('observedGeneration')} "
                     f"units {[u.get('state') for u in status.get('units') or []]}; server pods "
                     f"{[(p['metadata']['name'], p['metadata']['resourceVersion'], _ready(p), bool(p['spec'].get('schedulingGates'))) for p in pods]}; "
                     f"watched {watched}")
    return "\n".join(lines) + "\noperator log:\n" + "\n".join(log.splitlines()[-15:])


def _census(url: str, names: list[str], want: int) -> dict[str, int]:
    """From the API server: pods per group against what each should have."""
    _, body = Client(url).call("GET", f"/api/v1/namespaces/{NS}/pods")
    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for pod in body["items"]:
        by_group[(pod["metadata"].get("labels") or {}).get(GROUP_LABEL, "")].append(pod)
    missing = sum(max(0, want - len(by_group.get(g, []))) for g in names)
    extra = sum(max(0, len(by_group.get(g, [])) - want) for g in names) + sum(len(v) for k, v in by_group.items() if k not in set(names))
    not_ready = sum(1 for g in names for p in by_group.get(g, []) if not _ready(p))
    return {"missing": missing, "extra": extra, "not_ready": not_ready}


def _left_behind(url: str) -> dict[str, int]:
    client = Client(url)
    selector = quote(GROUP_LABEL)
    return {kind: len(client.call("GET", f"/api/v1/{kind}?labelSelector={selector}")[1]["items"]) for kind in ("pods", "services", "configmaps")}


# ----------------------------------------------------------------------------- webhook


def review_body(uid: str) -> bytes:
    group = next(d for d in yaml.safe_load_all((ROOT / "examples" / "llama-70b.yaml").read_text()) if d and d.get("kind") == "InferenceGroup")
    group["spec"]["topologyName"] = "default"
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": uid, "operation": "CREATE", "object": group, "kind": {"group": "tandem.dev", "version": "v1alpha1", "kind": "InferenceGroup"},
                          "resource": {"group": "tandem.dev", "version": "v1alpha1", "resource": "inferencegroups"},
                          "namespace": group["metadata"].get("namespace", "default"), "name": group["metadata"]["name"]}}
    return json.dumps(review).encode()


def webhook_case(reviews: int = 100, rounds: int = 3, show: bool = True) -> dict[str, Any]:
    """`reviews` concurrent AdmissionReviews against `tandem operator`'s webhook, `rounds` times."""
    from tandem.runtime.certs import make_certificates

    started = time.perf_counter()
    topology, nodes = generate_cluster([("block", 4), ("rack", 2), ("host", 8)], 8)
    with tempfile.TemporaryDirectory(prefix="tandem-load-") as scratch:
        work = Path(scratch)
        (work / "cluster.yaml").write_text(yaml.safe_dump_all([topology, {"apiVersion": "v1", "kind": "List", "items": nodes}]))
        certs = make_certificates(["localhost"], datetime.now(timezone.utc))
        certs.write(work / "certs")
        port = free_port()
        server = start_apiserver(work, "--cluster", str(work / "cluster.yaml"))
        operator = None
        try:
            operator = start_operator(server, work, "webhook", "--webhook-port", str(port), "--webhook-cert-dir", str(work / "certs"))
            context = ssl.create_default_context(cadata=certs.ca_pem.decode())
            latencies: list[float] = []
            answered: Counter[str] = Counter()
            wrong: list[str] = []
            sent: list[str] = []
            lock = threading.Lock()
            walls: list[float] = []
            with progress_bar(show) as progress:
                task = progress.add_task(f"webhook: {rounds} x {reviews} concurrent reviews", total=rounds * reviews)
                for _ in range(rounds):
                    gate = threading.Barrier(reviews + 1)

                    def client(uid: str) -> None:
                        body = review_body(uid)
                        gate.wait()
                        start = time.perf_counter()
                        try:
                            conn = http.client.HTTPSConnection("localhost", port, context=context, timeout=60)
                            conn.request("POST", "/validate", body=body, headers={"Content-Type": "application/json"})
                            response = conn.getresponse()
                            answer = json.loads(response.read())
                            conn.close()
                            elapsed = time.perf_counter() - start
                            got = (answer.get("response") or {}).get("uid")
                            with lock:
                                latencies.append(elapsed)
                                answered[got] += 1
                                if got != uid or not answer["response"].get("allowed"):
                                    wrong.append(f"{uid}: {json.dumps(answer)[:200]}")
                        except Exception as exc:  # noqa: BLE001 - counted as lost
                            with lock:
                                wrong.append(f"{uid}: {type(exc).__name__}: {exc}")
                        progress.advance(task)

                    uids = [str(uuid.uuid4()) for _ in range(reviews)]
                    sent += uids
                    threads = [threading.Thread(target=client, args=(u,)) for u in uids]
                    for t in threads:
                        t.start()
                    gate.wait()
                    round_start = time.perf_counter()
                    for t in threads:
                        t.join()
                    walls.append(time.perf_counter() - round_start)
            rss = {"operator": peak_rss_mib(operator.process.pid), "apiserver": peak_rss_mib(server.process.pid), "bench": peak_rss_mib()}
            return {
                "bench": "load", "case": "webhook", "concurrent": reviews, "rounds": rounds, "nodes": len(nodes),
                "reviews_per_s": round(len(latencies) / sum(walls), 1) if walls else 0.0, "latency_ms": percentiles(latencies),
                "rss_peak_mib": rss, "answered": sum(answered.values()), "lost": len(set(sent) - set(answered)),
                "duplicated": sum(n - 1 for n in answered.values() if n > 1), "wrong": len(wrong), "wrong_examples": wrong[:3],
                "wall_s": round(time.perf_counter() - started, 1),
            }
        finally:
            if operator is not None:
                _stop_process(operator.process)
            _stop_process(server.process)


# ----------------------------------------------------------------------------- API server


def apiserver_case(watchers: int = 10, objects: int = 1000, show: bool = True) -> dict[str, Any]:
    """`watchers` watches on pods and as many on groups while two writers create, update and delete."""
    started = time.perf_counter()
    groups = max(1, objects // 5)
    topology, nodes = generate_cluster([("rack", 2), ("host", 4)], 8)
    with tempfile.TemporaryDirectory(prefix="tandem-load-") as scratch:
        work = Path(scratch)
        (work / "cluster.yaml").write_text(yaml.safe_dump_all([topology, {"apiVersion": "v1", "kind": "List", "items": nodes}]))
        server = start_apiserver(work, "--cluster", str(work / "cluster.yaml"))
        streams: dict[str, list[Watcher]] = {"pods": [], "inferencegroups": []}
        try:
            version = Client(server.url).call("GET", "/api/v1/pods?limit=1")[1]["metadata"]["resourceVersion"]
            for kind, path in (("pods", f"/api/v1/namespaces/{NS}/pods"), ("inferencegroups", f"{IG}/namespaces/{NS}/inferencegroups")):
                streams[kind] = [Watcher(server.url, path, version).start() for _ in range(watchers)]
            for w in streams["pods"] + streams["inferencegroups"]:
                if not w.opened.wait(10):
                    raise AssertionError("a watch did not open")
            # (kind, name) -> [(operation, resourceVersion or None for a delete, request start)]
            writes: dict[str, dict[str, list[tuple[str, int | None, float]]]] = {"pods": defaultdict(list), "inferencegroups": defaultdict(list)}
            failures: list[str] = []
            with progress_bar(show) as progress:
                task = progress.add_task(f"apiserver: writes under {2 * watchers} watches", total=3 * (objects + groups))

                def writer(kind: str, count: int) -> None:
                    client = Client(server.url)
                    base = f"/api/v1/namespaces/{NS}/pods" if kind == "pods" else f"{IG}/namespaces/{NS}/inferencegroups"
                    names = [f"{kind[:3]}-{i:05d}" for i in range(count)]
                    make = _load_pod if kind == "pods" else _load_group
                    for operation in ("create", "update", "delete"):
                        for name in names:
                            start = time.monotonic()
                            if operation == "create":
                                code, body = client.call("POST", base, make(name))
                            elif operation == "update":
                                code, body = client.call("PATCH", f"{base}/{name}", {"metadata": {"labels": {"load": "updated"}}},
                                                         "application/merge-patch+json")
                            else:
                                code, body = client.call("DELETE", f"{base}/{name}")
                            if code >= 300:
                                failures.append(f"{operation} {kind}/{name}: {code} {str(body)[:200]}")
                            rv = int(body["metadata"]["resourceVersion"]) if operation != "delete" and code < 300 else None
                            writes[kind][name].append((operation, rv, start))
                            progress.advance(task)
                    client.close()

                write_start = time.monotonic()
                threads = [threading.Thread(target=writer, args=("pods", objects)), threading.Thread(target=writer, args=("inferencegroups", groups))]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                write_wall = time.monotonic() - write_start
                total_writes = 3 * (objects + groups)
                # every delete's event has come once the watches went quiet
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    if all(sum(1 for e in w.events if e.type == "DELETED") >= (objects if k == "pods" else groups)
                           for k, ws in streams.items() for w in ws):
                        break
                    time.sleep(0.05)
                time.sleep(0.5)
            rss = {"apiserver": peak_rss_mib(server.process.pid), "bench": peak_rss_mib()}
            for ws in streams.values():
                for w in ws:
                    w.stop()
            lost = duplicated = out_of_order = differ = errors = reopened = 0
            delivery: list[float] = []
            delivered = 0
            for kind, ws in streams.items():
                reference = [(e.type, e.version, e.name) for e in ws[0].events]
                for w in ws:
                    errors += len(w.errors)
                    reopened += w.reopened
                    delivered += len(w.events)
                    order, again = in_order_once(w.events)
                    out_of_order += order
                    duplicated += again
                    if [(e.type, e.version, e.name) for e in w.events] != reference:
                        differ += 1
                    by_version = {e.version: e for e in w.events}
                    deleted = defaultdict(list)
                    added = Counter()
                    for e in w.events:
                        if e.type == "DELETED":
                            deleted[e.name].append(e)
                        elif e.type == "ADDED":
                            added[e.name] += 1
                    for name, ops in writes[kind].items():
                        duplicated += max(0, added[name] - 1) + max(0, len(deleted[name]) - 1)
                        for operation, rv, start in ops:
                            if operation == "delete":
                                got = deleted[name][0] if deleted[name] else None
                            else:
                                got = by_version.get(rv) if rv is not None else None
                            if got is None:
                                lost += 1
                            else:
                                delivery.append(got.at - start)
            return {
                "bench": "load", "case": "apiserver", "watchers": {"pods": watchers, "inferencegroups": watchers},
                "objects": {"pods": objects, "inferencegroups": groups}, "writes": total_writes,
                "writes_per_s": round(total_writes / write_wall, 1), "events_delivered": delivered,
                "events_per_s": round(delivered / write_wall, 1), "delivery_latency_ms": percentiles(delivery),
                "rss_peak_mib": rss, "write_failures": len(failures), "write_failure_examples": failures[:3],
                "lost": lost, "duplicated": duplicated, "out_of_order": out_of_order, "streams_differing": differ,
                "watch_errors": errors, "watch_reopened": reopened, "wall_s": round(time.perf_counter() - started, 1),
            }
        finally:
            for ws in streams.values():
                for w in ws:
                    w.stop()
            _stop_process(server.process)


def _load_pod(name: str) -> dict[str, Any]:
    """A pod the simulated scheduler leaves alone (gated): only the writer changes it, and the
    scheduler's one SchedulingGated condition."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": {"load": "created"}},
            "spec": {"schedulingGates": [{"name": "load.tandem.dev/hold"}], "containers": [{"name": "c", "image": "busybox"}]}}


def _load_group(name: str) -> dict[str, Any]:
    group = small_group(name)
    group["metadata"]["labels"] = {"load": "created"}
    return group


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", choices=("operator", "webhook", "apiserver", "all"), default="all")
    parser.add_argument("--quick", action="store_true", help="a small version: 100 groups in 4 bursts, 20 reviews, 3 watchers, 200 objects")
    parser.add_argument("--groups", type=int, default=None, help="operator: groups (default 1000)")
    parser.add_argument("--bursts", type=int, default=None, help="operator: bursts (default 10)")
    parser.add_argument("--reviews", type=int, default=None, help="webhook: concurrent reviews (default 100)")
    parser.add_argument("--rounds", type=int, default=None, help="webhook: rounds of them (default 3)")
    parser.add_argument("--watchers", type=int, default=None, help="apiserver: watches on pods, and as many on groups (default 10)")
    parser.add_argument("--objects", type=int, default=None, help="apiserver: pods written (groups: a fifth) (default 1000)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: the processes started are stopped
    quick = args.quick
    pick = lambda value, full, small: value if value is not None else (small if quick else full)  # noqa: E731
    failed = False
    cases = ("operator", "webhook", "apiserver") if args.case == "all" else (args.case,)
    for case in cases:
        if case == "operator":
            row = operator_case(pick(args.groups, 1000, 100), pick(args.bursts, 10, 4))
            bad = row["lost"] + row["extra"] + row["created_twice"] + row["events_duplicated"] + row["events_out_of_order"] + sum(row["left_behind"].values())
        elif case == "webhook":
            row = webhook_case(pick(args.reviews, 100, 20), pick(args.rounds, 3, 1))
            bad = row["lost"] + row["duplicated"] + row["wrong"]
        else:
            row = apiserver_case(pick(args.watchers, 10, 3), pick(args.objects, 1000, 200))
            bad = row["lost"] + row["duplicated"] + row["out_of_order"] + row["streams_differing"] + row["write_failures"]
        row["cpus"] = os.cpu_count()
        print(json.dumps(row), flush=True)
        failed |= bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
