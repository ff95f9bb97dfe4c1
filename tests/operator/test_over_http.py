"""`tandem operator` as its own process over HTTP (the adapter against `kube.fakeapi`, a
small Kubernetes REST API over the memory store): two replicas with `--leader-elect`;
the leader is killed with SIGKILL mid-rollout; the standby finishes it; no pod is ever
created twice and no node is over-committed. (The same with `tandem apiserver` and the
real kubectl waits for the local API server, issue 12.)"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kube.fakeapi import FakeApi
from support.controller_world import design_group, kubelet, over_committed
from support.builders import cluster

TANDEM = Path(sys.executable).parent / "tandem"
pytestmark = pytest.mark.skipif(not TANDEM.exists(), reason=f"the tandem command is not installed beside {sys.executable}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def kubeconfig(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "{url}"}}}}]
users: [{{name: test, user: {{token: test-token}}}}]
contexts: [{{name: fake, context: {{cluster: fake, user: test}}}}]
current-context: fake
"""
    )
    return path


def start(config: Path, identity: str, log: Path) -> subprocess.Popen:
    args = [str(TANDEM), "operator", "--kubeconfig", str(config), "--leader-elect", "--lease-duration", "3",
            "--identity", identity, "--metrics-port", str(free_port()), "--health-port", str(free_port()), "--log-format", "json"]
    return subprocess.Popen(args, stdout=log.open("w"), stderr=subprocess.STDOUT)


def holder(api: FakeApi) -> str | None:
    try:
        return api.store.get("Lease", "tandem-system", "tandem-operator")["spec"].get("holderIdentity")
    except Exception:
        return None


def test_a_standby_operator_finishes_the_rollout_after_the_leader_is_killed(tmp_path):
    api = FakeApi(bookmark_every=0.2)
    processes = []
    try:
        for obj in cluster("block=2,rack=2,host=8"):
            api.write(api.store.create, obj)
        api.write(api.store.create, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tandem-system"}})
        config = kubeconfig(tmp_path, api.url)
        processes = [start(config, "a", tmp_path / "a.log"), start(config, "b", tmp_path / "b.log")]
        api.write(api.store.create, design_group(replicas=2))
        deadline = time.time() + 60
        while holder(api) is None or not api.store.list("Pod"):
            assert time.time() < deadline, "no leader created pods"
            time.sleep(0.1)
        leader = holder(api)
        victim = processes[0] if leader == "a" else processes[1]
        victim.send_signal(signal.SIGKILL)  # mid-rollout: only the first step exists
        victim.wait(10)
        assert len(api.store.list("Pod")) < 16
        while True:
            api.write(kubelet, api.store)
            assert not over_committed(api.store)
            group = api.store.get("InferenceGroup", "serving", "llama")
            if (group.get("status") or {}).get("functionalUnits") == 2 and len(api.store.list("Pod")) == 16 and all(
                p["spec"].get("nodeName") for p in api.store.list("Pod")
            ):
                break
            assert time.time() < deadline + 60, f"the standby did not finish the rollout (holder {holder(api)})"
            time.sleep(0.2)
        assert holder(api) != leader, "the standby took the lease over"
        created = [s.body["metadata"]["name"] for s in api.seen("POST", "/pods") if isinstance(s.body, dict)]
        assert len(created) == len(set(created)) == 16, "no pod created twice"
        survivor = processes[1] if victim is processes[0] else processes[0]
        survivor.send_signal(signal.SIGTERM)
        assert survivor.wait(15) == 0, "SIGTERM stops cleanly"
        assert holder(api) in (None, ""), "and releases the lease"
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
        api.close()
