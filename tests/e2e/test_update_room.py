"""Issue 25, item 2, through the real kubectl: a rolling update whose block is full says so
(`kubectl get events` shows Unschedulable, `kubectl get ig -o yaml` shows the unit Stalled
with the domain and the shortfall within the step timeout), and with `maxUnavailable: 1`
it completes by replacing in place."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from e2e.processes import KUBECTL, NO_KUBECTL, ApiServer, start_apiserver, start_operator, wait_for
from tandem.api.naming import GROUP_LABEL
from tandem.topology.generate import generate_cluster

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)
NS, NAME = "serving", "full"
STEP_TIMEOUT_S = 8


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[ApiServer, Path]]:
    topology, nodes = generate_cluster([("block", 1), ("rack", 1), ("host", 4)], 8)  # one block of 32 GPUs
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    (tmp_path / "topology.yaml").write_text(yaml.safe_dump(topology))
    server = start_apiserver(tmp_path, "--cluster", str(tmp_path / "nodes.yaml"), "--no-crds", "--ready-after", "0.2")
    server.kubectl("apply", "-k", "deploy/crds")
    server.kubectl("apply", "-f", str(tmp_path / "topology.yaml"))
    operator = start_operator(server, tmp_path, "solo", "--resync", "30")
    try:
        yield server, tmp_path
    finally:
        operator.process.terminate()
        operator.process.wait(timeout=15)
        assert server.stop() == 0
    assert server.stderr.read_text() == "", "nothing went wrong on the server's side"


def manifest(unavailable: int) -> dict[str, Any]:
    """Two prefill and two decode replicas of 8 GPUs each: the block's 32 GPUs exactly."""
    def role(name: str) -> dict[str, Any]:
        return {"name": name, "replicas": 2, "minReplicas": 1,
                "template": {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0",
                                                      "resources": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}}}
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "metadata": {"name": NAME, "namespace": NS},
            "spec": {"topologyName": "default", "replicas": 1, "topology": {"pack": {"required": "block"}},
                     "roles": [role("prefill"), role("decode")],
                     "coordination": {"rollout": {"stepTimeoutSeconds": STEP_TIMEOUT_S},
                                      "rollingUpdate": {"maxSurge": 1, "maxUnavailable": unavailable}}}}


def _apply_and_settle(server: ApiServer, unavailable: int) -> None:
    server.kubectl("create", "namespace", NS)
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(manifest(unavailable)))
    wait_for(lambda: len(_ready_pods(server)) == 4, 60, "the group's 4 pods Ready")


def _pods(server: ApiServer) -> list[dict[str, Any]]:
    return server.get(f"/api/v1/namespaces/{NS}/pods?labelSelector={GROUP_LABEL}%3D{NAME}")["items"]


def _ready_pods(server: ApiServer) -> list[dict[str, Any]]:
    return [p for p in _pods(server) if any(c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or [])]


def _new_image(server: ApiServer) -> None:
    patch = [{"op": "replace", "path": f"/spec/roles/{i}/template/spec/containers/0/image", "value": "vllm/vllm-openai:v0.11.1"} for i in range(2)]
    server.kubectl("patch", "ig", NAME, "-n", NS, "--type=json", "-p", yaml.safe_dump(patch, default_flow_style=True))


def _unit0(server: ApiServer) -> dict[str, Any]:
    group = yaml.safe_load(server.kubectl("get", "ig", NAME, "-n", NS, "-o", "yaml").stdout)
    return ((group.get("status") or {}).get("units") or [{}])[0]


def test_a_rolling_update_into_a_full_block_is_reported_and_stalls_within_the_step_timeout(world):
    server, _ = world
    _apply_and_settle(server, unavailable=0)
    _new_image(server)
    stalled = wait_for(lambda: (u := _unit0(server)).get("state") == "Stalled" and u, STEP_TIMEOUT_S + 20,
                       "the unit Stalled by the step timeout", every=0.5)
    assert "no room in block block-0 for another" in stalled["reason"], stalled["reason"]
    group = yaml.safe_load(server.kubectl("get", "ig", NAME, "-n", NS, "-o", "yaml").stdout)
    condition = next(c for c in group["status"]["conditions"] if c["type"] == "Stalled")
    assert condition["status"] == "True" and "block-0" in condition["message"], condition
    events = server.kubectl("get", "events", "-n", NS, "--field-selector", "reason=Unschedulable", "-o", "yaml").stdout
    messages = [e["message"] for e in yaml.safe_load(events)["items"]]
    assert any("unit 0:" in m and "no room in block block-0" in m for m in messages), messages
    assert len(_ready_pods(server)) == 4, "the old revision keeps serving"


def test_a_rolling_update_into_a_full_block_replaces_in_place_with_max_unavailable(world):
    server, _ = world
    _apply_and_settle(server, unavailable=1)
    _new_image(server)

    def done() -> bool:
        pods = _ready_pods(server)
        return len(pods) == 4 == len(_pods(server)) and all(p["spec"]["containers"][0]["image"] == "vllm/vllm-openai:v0.11.1" for p in pods)

    wait_for(done, 90, "every pod on the new image, Ready", every=0.5)
    assert _unit0(server).get("state") == "Complete"
    stalls = server.kubectl("get", "events", "-n", NS, "--field-selector", "reason=Stalled", "-o", "name").stdout
    assert stalls.strip() == "", "no step timed out"
