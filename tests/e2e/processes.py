"""`tandem apiserver`, `tandem operator` and `tandem topology-controller` as separate processes, and the real kubectl.

What a user trying tandem on one machine runs, started the way they would start it; the
tests read the processes' output as a user would (the apiserver's one ready line, the
operator's log on stderr, kubectl's exit status and text). A small watcher follows every
pod the server holds, so invariants can be checked at each change, not only at the end.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl") or ("/usr/bin/kubectl" if os.access("/usr/bin/kubectl", os.X_OK) else None)
NO_KUBECTL = "kubectl is not installed: the end-to-end tests drive the real kubectl"
READY_LINE_TIMEOUT_S = 20.0


def tandem(*args: str) -> list[str]:
    return [sys.executable, "-m", "tandem.cli.main", *args]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class ApiServer:
    process: subprocess.Popen
    kubeconfig: Path
    home: Path
    url: str
    line: str
    stderr: Path

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "HOME": str(self.home), "CLOUDSDK_CONFIG": str(self.home / "gcloud")}
        result = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, input=stdin, timeout=timeout, cwd=REPO)  # type: ignore[list-item]
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        return result

    def get(self, path: str) -> dict[str, Any]:
        """One JSON read straight from the server (for polling; user actions go through kubectl)."""
        with urllib.request.urlopen(self.url + path, timeout=10) as answer:
            return json.load(answer)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._send("POST", path, body)

    def delete(self, path: str) -> dict[str, Any]:
        return self._send("DELETE", path, None)

    def _send(self, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.load(answer)

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=10)


def start_apiserver(work: Path, *args: str) -> ApiServer:
    """Start `tandem apiserver --port 0` with `args`; returns once it printed its ready line."""
    kubeconfig, home, stderr = work / "kubeconfig", work / "home", work / "apiserver.stderr"
    home.mkdir(exist_ok=True)
    process = subprocess.Popen(tandem("apiserver", "--kubeconfig", str(kubeconfig), "--port", "0", *args),
                               stdout=subprocess.PIPE, stderr=stderr.open("w"), text=True, cwd=REPO)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()  # type: ignore[union-attr]
    try:
        line = lines.get(timeout=READY_LINE_TIMEOUT_S).strip()
    except queue.Empty:
        process.kill()
        raise AssertionError(f"tandem apiserver printed no ready line: {stderr.read_text()}") from None
    url = line.split("serving on ", 1)[1].split(" ", 1)[0]
    return ApiServer(process, kubeconfig, home, url, line, stderr)


@dataclass
class OperatorProcess:
    process: subprocess.Popen
    identity: str
    health: str
    stderr: Path

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.health + "/readyz", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False

    def log(self) -> str:
        return self.stderr.read_text()


def start_operator(server: ApiServer, work: Path, identity: str, *args: str) -> OperatorProcess:
    """Start `tandem operator` against `server` (JSON logs); returns once its informers synced."""
    return start_process("operator", "operator", server, work, identity, *args)


def start_topology_controller(server: ApiServer, work: Path, identity: str, *args: str) -> OperatorProcess:
    """Start `tandem topology-controller` against `server` (JSON logs); returns once its informers synced."""
    return start_process("topology-controller", "topology controller", server, work, identity, *args)


def start_process(command: str, what: str, server: ApiServer, work: Path, identity: str, *args: str) -> OperatorProcess:
    """Start `tandem COMMAND` against `server` with its health port on a free port and its
    log (JSON) in `work`; returns once its informers synced, or fails with that log."""
    port = free_port()
    stderr = work / f"{command}-{identity}.stderr"
    process = subprocess.Popen(
        tandem(command, "--kubeconfig", str(server.kubeconfig), "--identity", identity, "--metrics-port", "0",
               "--health-port", str(port), "--log-format", "json", *args),
        stdout=subprocess.DEVNULL, stderr=stderr.open("w"), cwd=REPO,
    )
    started = OperatorProcess(process, identity, f"http://127.0.0.1:{port}", stderr)
    wait_for(lambda: started.ready() or process.poll() is not None, 20, f"{what} {identity} ready")
    assert process.poll() is None, f"{what} {identity} exited: {started.log()}"
    return started


def wait_for(condition: Callable[[], Any], timeout: float, what: str, every: float = 0.05) -> Any:
    """Poll until `condition()` is truthy; returns its value, or fails naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@dataclass
class PodWatch:
    """Every pod event the server sends, from a watch on all namespaces, in order."""

    url: str
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> "PodWatch":
        threading.Thread(target=self._follow, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _follow(self) -> None:
        version = ""
        while not self._stop.is_set():
            path = f"/api/v1/pods?watch=true&allowWatchBookmarks=true&timeoutSeconds=5&resourceVersion={version}"
            try:
                with urllib.request.urlopen(self.url + path, timeout=30) as stream:
                    for line in stream:
                        event = json.loads(line)
                        version = event["object"]["metadata"].get("resourceVersion", version)
                        if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                            self.events.append((event["type"], event["object"]))
            except OSError:
                time.sleep(0.1)


ROUTER_MODULE = "sglang_router.launch_router"
NO_ROUTER = "sglang-router is not installed (`make test` installs it): the serving e2e test runs the real router"
# The router loads a tokenizer for each worker's model from Hugging Face unless told
# otherwise: pointed at a closed loopback port, that fetch fails at once and stays on this
# machine. (A proxy would not do: its Kubernetes client refuses to start with one set.)
ROUTER_ENV = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "1"}


@dataclass
class RouterProcess:
    process: subprocess.Popen
    url: str
    log_path: Path

    def workers(self) -> dict[str, str]:
        """The router's workers: url -> worker type (prefill, decode), healthy ones only."""
        try:
            with urllib.request.urlopen(self.url + "/workers", timeout=5) as answer:
                listed = json.load(answer).get("workers", [])
        except OSError:
            return {}
        return {w["url"]: w.get("worker_type", "") for w in listed if w.get("is_healthy", True)}

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(timeout=10)


def start_router(work: Path, args: list[str], server: ApiServer | None = None) -> RouterProcess:
    """SGLang's model gateway with `args` (its workers given, or found by service discovery
    through its own Kubernetes client against `server`), listening and exporting metrics on
    free ports of 127.0.0.1; every address it binds or connects to is on 127.0.0.0/8."""
    listen, metrics = free_port(), free_port()
    log_path = work / "router.log"
    command = [sys.executable, "-m", ROUTER_MODULE, *args, "--host", "127.0.0.1", "--port", str(listen),
               "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics), "--log-level", "info"]
    env = {**os.environ, **ROUTER_ENV, "NO_COLOR": "1"}
    if server is not None:
        env.update(KUBECONFIG=str(server.kubeconfig), HOME=str(server.home))
    process = subprocess.Popen(command, stdout=log_path.open("w"), stderr=subprocess.STDOUT, env=env, cwd=REPO)
    router = RouterProcess(process, f"http://127.0.0.1:{listen}", log_path)

    def answers() -> bool:
        try:
            with urllib.request.urlopen(router.url + "/workers", timeout=2):
                return True
        except OSError:
            return process.poll() is not None

    wait_for(answers, 30, "the router to answer")
    assert process.poll() is None, f"the router exited: {router.log()}"
    return router
