"""The simulated scheduler and kubelets: bind where the selector says, start, turn Ready."""

from __future__ import annotations

import time

import pytest

from apiserver.helpers import NS, Client, Clock, pod, small_cluster
from tandem.apiserver.kubelets import Kubelet
from tandem.apiserver.server import ApiServer

PODS = f"/api/v1/namespaces/{NS}/pods"


@pytest.fixture
def world():
    with ApiServer(objects=small_cluster(gpus=8), kubelet=False) as server:
        clock = Clock()
        kubelet = Kubelet(server.state, ready_after=5.0, bind_latency=1.0, monotonic=clock)

        def step() -> float | None:
            with server.state.lock:
                return kubelet.step()

        yield Client(server.url), clock, step


def _pod(client: Client, name: str) -> dict:
    return client.get(f"{PODS}/{name}").body


def _condition(obj: dict, kind: str) -> dict:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def test_a_pod_whose_gates_are_gone_is_bound_to_its_hostname_started_then_ready(world):
    client, clock, step = world
    client.post(PODS, pod("p", gated=True, node="n-002", gpus=8))
    step()
    gated = _pod(client, "p")
    assert "nodeName" not in gated["spec"] and _condition(gated, "PodScheduled")["reason"] == "SchedulingGated"
    client.patch(f"{PODS}/p", {"spec": {"schedulingGates": None}})
    assert step() == pytest.approx(1.0), "the bind latency is due next"
    clock.now += 1.0
    assert step() == pytest.approx(5.0)
    running = _pod(client, "p")
    assert running["spec"]["nodeName"] == "n-002" and running["status"]["phase"] == "Running"
    assert running["status"]["podIP"] == "127.10.0.2" and _condition(running, "Ready")["status"] == "False"
    assert running["status"]["hostIP"].startswith("127.20."), "every address handed out stays on this machine"
    assert running["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    clock.now += 5.0
    assert step() is None
    ready = _pod(client, "p")
    assert _condition(ready, "Ready")["status"] == "True" and ready["status"]["containerStatuses"][0]["ready"] is True


def test_pods_without_a_selector_go_first_fit_and_the_rest_wait_unschedulable(world):
    client, clock, step = world
    clock.now += 10
    for name in ("a", "b", "c", "d", "e"):
        client.post(PODS, pod(name, gpus=8))
    step()
    step()
    clock.now += 1.0
    step()
    nodes = {name: _pod(client, name)["spec"].get("nodeName") for name in "abcde"}
    assert nodes == {"a": "n-000", "b": "n-001", "c": "n-002", "d": "n-003", "e": None}
    waiting = _condition(_pod(client, "e"), "PodScheduled")
    assert waiting["reason"] == "Unschedulable" and "4 Insufficient nvidia.com/gpu" in waiting["message"]
    assert [_pod(client, n)["status"]["podIP"] for n in "abcd"] == ["127.10.0.2", "127.10.0.3", "127.10.0.4", "127.10.0.5"]
    client.delete(f"{PODS}/a")
    step()
    assert _pod(client, "e")["spec"]["nodeName"] == "n-000", "room freed is used"


def test_a_selector_naming_a_full_or_cordoned_node_leaves_the_pod_pending(world):
    client, clock, step = world
    client.patch("/api/v1/nodes/n-001", {"spec": {"unschedulable": True}})
    client.post(PODS, pod("p", node="n-001"))
    step()
    clock.now += 1.0
    step()
    assert "nodeName" not in _pod(client, "p")["spec"]
    assert "node(s) were unschedulable" in _condition(_pod(client, "p"), "PodScheduled")["message"]


def test_the_kubelet_thread_works_in_real_time():
    with ApiServer(objects=small_cluster(), ready_after=0.2) as server:
        client = Client(server.url)
        client.post(PODS, pod("p", node="n-001"))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            current = _pod(client, "p")
            if any(c["type"] == "Ready" and c["status"] == "True" for c in current.get("status", {}).get("conditions", [])):
                break
            time.sleep(0.05)
        assert current["spec"]["nodeName"] == "n-001"
        assert _condition(current, "Ready")["status"] == "True"


@pytest.fixture
def timed():
    """A server and a kubelet on one made-up clock (the server's and the kubelet's)."""
    clock = Clock()
    with ApiServer(objects=small_cluster(gpus=8), kubelet=False, clock=clock, default_toleration_seconds=5) as server:
        kubelet = Kubelet(server.state, monotonic=clock)

        def step() -> float | None:
            with server.state.lock:
                return kubelet.step()

        yield Client(server.url), clock, step


def _exists(client: Client, name: str) -> bool:
    return client.get(f"{PODS}/{name}").code == 200


def test_pods_get_the_default_not_ready_and_unreachable_tolerations(timed):
    client, _, _ = timed
    client.post(PODS, pod("p", node="n-000"))
    keys = {(t["key"], t["tolerationSeconds"]) for t in _pod(client, "p")["spec"]["tolerations"]}
    assert keys == {("node.kubernetes.io/not-ready", 5), ("node.kubernetes.io/unreachable", 5)}


def test_a_no_execute_taint_evicts_the_pods_not_tolerating_it_at_once_and_the_others_after_their_seconds(timed):
    client, clock, step = timed
    patient = pod("patient", node="n-000")
    patient["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]
    forever = pod("forever", node="n-000")
    forever["spec"]["tolerations"] = [{"key": "k", "operator": "Equal", "value": "v"}]
    for body in (pod("plain", node="n-000"), patient, forever, pod("elsewhere", node="n-001")):
        client.post(PODS, body)
    step()
    assert _pod(client, "plain")["spec"]["nodeName"] == "n-000"
    client.patch("/api/v1/nodes/n-000", {"spec": {"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]}})
    assert step() == pytest.approx(30.0), "the patient pod's eviction is due next"
    assert not _exists(client, "plain") and _exists(client, "patient") and _exists(client, "forever") and _exists(client, "elsewhere")
    clock.now += 29.0
    step()
    assert _exists(client, "patient")
    clock.now += 1.0
    assert step() is None
    assert not _exists(client, "patient") and _exists(client, "forever")


def test_a_node_not_ready_evicts_its_pods_after_their_toleration_and_ready_again_in_time_keeps_them(timed):
    client, clock, step = timed
    client.post(PODS, pod("kept", node="n-002"))
    client.post(PODS, pod("lost", node="n-003"))
    step()
    for name in ("n-002", "n-003"):
        client.patch(f"/api/v1/nodes/{name}/status", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    assert step() == pytest.approx(5.0)
    clock.now += 4.0
    client.patch("/api/v1/nodes/n-002/status", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    step()
    clock.now += 1.0
    step()
    assert _exists(client, "kept") and not _exists(client, "lost")
    clock.now += 100.0
    step()
    assert _exists(client, "kept"), "the taint went with the NotReady condition"


def test_an_unreachable_node_evicts_too(timed):
    client, clock, step = timed
    client.post(PODS, pod("p", node="n-001"))
    step()
    client.patch("/api/v1/nodes/n-001/status", {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
    step()
    clock.now += 5.0
    step()
    assert not _exists(client, "p")


def test_a_step_looks_only_at_the_pods_written_since_and_those_with_something_due(world, monkeypatch):
    """Settled and gated pods cost a step nothing: with thousands of them, every write
    waited for a step over all pods under the server's lock."""
    client, clock, step = world
    for i in range(6):
        client.post(PODS, pod(f"ready-{i}", node=f"n-00{i % 3}", gpus=1))
    for i in range(4):
        client.post(PODS, pod(f"gated-{i}", gated=True, node="n-001", gpus=1))
    clock.now += 10
    for _ in range(4):  # bound, started, Ready; the gated ones marked SchedulingGated
        step()
        clock.now += 10
    looked: list[str] = []
    original = Kubelet._needs_work

    def counting(self, p):  # type: ignore[no-untyped-def]
        looked.append(p["metadata"]["name"])
        return original(self, p)

    monkeypatch.setattr(Kubelet, "_needs_work", counting)
    assert step() is None
    assert looked == [], "nothing was written since: no pod is looked at"
    client.patch(f"{PODS}/gated-0", {"spec": {"schedulingGates": None}})
    assert step() == pytest.approx(1.0), "the bind latency is due next"
    assert looked == ["gated-0"]
    clock.now += 1.0
    step()
    assert _pod(client, "gated-0")["spec"]["nodeName"] == "n-001"
    assert _condition(_pod(client, "gated-1"), "PodScheduled")["reason"] == "SchedulingGated"
