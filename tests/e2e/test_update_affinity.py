"""Issue 25, item 1's update half, through the real kubectl with two `tandem operator`
processes under leader election: template changes and scaling while the leader is killed
with SIGKILL; every prefill replica ends in a rack with a decode replica of its unit
(`affinity: prefill → decode, Required, rack`), and the group settles on one revision
with the counts its spec asks for. Processes and timing make this run one path of many:
on the code before the fix it passed in the one run tried (the fault world broke 7 of 30
such seeded stories); the deterministic test that fails without the fix is
tests/faults/test_update_affinity.py."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from e2e.processes import KUBECTL, NO_KUBECTL, ApiServer, OperatorProcess, start_apiserver, start_operator, wait_for
from tandem.api.naming import GROUP_LABEL, REVISION_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.topology.generate import generate_cluster

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)
NS, NAME = "serving", "pd"
ELECT = ("--leader-elect", "--lease-duration", "3", "--resync", "30")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[ApiServer, Path, dict[str, OperatorProcess]]]:
    topology, nodes = generate_cluster([("block", 1), ("rack", 2), ("host", 4)], 8)
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    (tmp_path / "topology.yaml").write_text(yaml.safe_dump(topology))
    server = start_apiserver(tmp_path, "--cluster", str(tmp_path / "nodes.yaml"), "--no-crds", "--ready-after", "0.2")
    server.kubectl("apply", "-k", "deploy/crds")
    server.kubectl("apply", "-f", str(tmp_path / "topology.yaml"))
    operators = {name: start_operator(server, tmp_path, name, *ELECT) for name in ("a", "b")}
    try:
        yield server, tmp_path, operators
    finally:
        for operator in operators.values():
            if operator.process.poll() is None:
                operator.process.terminate()
                operator.process.wait(timeout=15)
        assert server.stop() == 0


def manifest(units: int, image: str) -> dict[str, Any]:
    def role(name: str, replicas: int, pods: int) -> dict[str, Any]:
        return {"name": name, "replicas": replicas, "minReplicas": 1, "podsPerReplica": pods,
                "template": {"spec": {"containers": [{"name": "engine", "image": image,
                                                      "resources": {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}}]}}}
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "metadata": {"name": NAME, "namespace": NS},
            "spec": {"topologyName": "default", "replicas": units, "topology": {"pack": {"required": "block"}},
                     "roles": [role("prefill", 3, 1), role("decode", 2, 2)],
                     "affinity": [{"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}],
                     "coordination": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}}


def _pods(server: ApiServer) -> list[dict[str, Any]]:
    return server.get(f"/api/v1/namespaces/{NS}/pods?labelSelector={GROUP_LABEL}%3D{NAME}")["items"]


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def _settled(server: ApiServer, units: int, image: str) -> list[dict[str, Any]]:
    def done() -> list[dict[str, Any]] | None:
        pods = _pods(server)
        if len(pods) != units * 7 or not all(_ready(p) and p["spec"]["containers"][0]["image"] == image for p in pods):
            return None
        return pods if len({p["metadata"]["labels"][REVISION_LABEL] for p in pods}) == 1 else None

    return wait_for(done, 120, f"{units} units of 7 pods, Ready, on {image}", every=0.2)


def _kill_leader(server: ApiServer, work: Path, operators: dict[str, OperatorProcess]) -> None:
    leader = server.get("/apis/coordination.k8s.io/v1/namespaces/tandem-system/leases/tandem-operator")["spec"].get("holderIdentity")
    if leader not in operators:
        return
    operators[leader].process.send_signal(signal.SIGKILL)
    operators[leader].process.wait(timeout=10)
    operators[leader] = start_operator(server, work, leader, *ELECT)


def test_updates_and_scaling_under_sigkill_keep_required_affinity_and_settle(world):
    server, work, operators = world
    server.kubectl("create", "namespace", NS)
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(manifest(2, "vllm:1")))
    _settled(server, 2, "vllm:1")
    steps = [(3, "vllm:2"), (1, "vllm:3"), (2, "vllm:4")]
    for units, image in steps:
        server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(manifest(units, image)))
        wait_for(lambda: any(p["spec"]["containers"][0]["image"] == image for p in _pods(server)), 30, f"pods of {image}")
        _kill_leader(server, work, operators)
    pods = _settled(server, 2, "vllm:4")
    racks = {n["metadata"]["name"]: n["metadata"]["labels"]["network.tandem.dev/rack"] for n in server.get("/api/v1/nodes")["items"]}
    for unit in ("0", "1"):
        mine = [p for p in pods if p["metadata"]["labels"][UNIT_LABEL] == unit]
        decode = {racks[p["spec"]["nodeName"]] for p in mine if p["metadata"]["labels"][ROLE_LABEL] == "decode"}
        prefill = [racks[p["spec"]["nodeName"]] for p in mine if p["metadata"]["labels"][ROLE_LABEL] == "prefill"]
        assert all(rack in decode for rack in prefill), f"unit {unit}: prefill in {prefill}, decode in {sorted(decode)}"
    # the status follows the pods by a pass (or a leader's start after the last SIGKILL)
    def complete() -> bool:
        units = yaml.safe_load(server.kubectl("get", "ig", NAME, "-n", NS, "-o", "yaml").stdout)["status"]["units"]
        return all(u["state"] == "Complete" for u in units)

    wait_for(complete, 30, "every unit Complete in the status")
