"""A replica is kept whole (issue 25, item 1), through the real kubectl against `tandem
apiserver` and `tandem operator`: a two-pod decode replica with `pack.required: rack`
whose leader is deleted (as eviction, preemption or pod GC would) is re-created whole,
both pods new and in one rack; with `recovery: ReplaceMissingPod` a deleted worker comes
back alone beside its running leader."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from e2e.processes import KUBECTL, NO_KUBECTL, ApiServer, OperatorProcess, start_apiserver, start_operator, wait_for
from tandem.topology.generate import generate_cluster

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)
NS, NAME = "serving", "whole"
LEADER, WORKER = f"{NAME}-0-decode-0-0", f"{NAME}-0-decode-0-1"


def manifest(recovery: str | None) -> str:
    extra = f"\n      recovery: {recovery}" if recovery else ""
    return f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}}}
---
apiVersion: tandem.dev/v1alpha1
kind: InferenceGroup
metadata: {{name: {NAME}, namespace: {NS}}}
spec:
  topology: {{pack: {{required: block}}}}
  roles:
    - name: decode
      replicas: 1
      podsPerReplica: 2
      topology: {{pack: {{required: rack}}}}{extra}
      template:
        spec:
          containers:
            - name: engine
              image: vllm/vllm-openai:v0.11.0
              resources: {{requests: {{nvidia.com/gpu: "8"}}, limits: {{nvidia.com/gpu: "8"}}}}
"""


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[ApiServer, OperatorProcess]]:
    # One block of two racks of two 8-GPU hosts: a replica's rack keeps one host free once
    # a pod of it is gone, the other rack two, where a fresh two-pod replica goes.
    topology, nodes = generate_cluster([("block", 1), ("rack", 2), ("host", 2)], 8)
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    (tmp_path / "topology.yaml").write_text(yaml.safe_dump(topology))
    server = start_apiserver(tmp_path, "--cluster", str(tmp_path / "nodes.yaml"), "--no-crds", "--ready-after", "0.2")
    operator = None
    try:
        server.kubectl("apply", "-k", "deploy/crds")
        operator = start_operator(server, tmp_path, "solo", "--resync", "30")
        server.kubectl("apply", "-f", str(tmp_path / "topology.yaml"))
        yield server, operator
    finally:
        if operator is not None:
            operator.process.terminate()
            operator.process.wait(timeout=15)
        assert server.stop() == 0


def _pods(server: ApiServer) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in server.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=tandem.dev%2Fgroup%3D{NAME}")["items"]}


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def _racks(server: ApiServer, pods: dict[str, dict[str, Any]]) -> set[str]:
    return {server.get(f"/api/v1/nodes/{p['spec']['nodeName']}")["metadata"]["labels"]["network.tandem.dev/rack"] for p in pods.values()}


def _running(server: ApiServer) -> dict[str, dict[str, Any]]:
    """The replica's two pods, both bound and Ready (waits for them)."""

    def both() -> dict[str, dict[str, Any]] | None:
        pods = _pods(server)
        return pods if set(pods) == {LEADER, WORKER} and all(p["spec"].get("nodeName") and _ready(p) for p in pods.values()) else None

    return wait_for(both, 30, "the replica's two pods Ready")


def _uids(pods: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {name: p["metadata"]["uid"] for name, p in pods.items()}


def test_a_replica_whose_leader_is_deleted_is_re_created_whole_in_one_rack(world):
    server, operator = world
    server.kubectl("apply", "-f", "-", stdin=manifest(None))
    before = _uids(_running(server))
    assert server.kubectl("delete", "pod", LEADER, "-n", NS).stdout.strip() == f'pod "{LEADER}" deleted'

    def replaced() -> dict[str, dict[str, Any]] | None:
        pods = _running(server)
        return pods if all(_uids(pods)[name] != uid for name, uid in before.items()) else None

    pods = wait_for(replaced, 30, "both pods of the replica created anew (the worker restarted with its new leader)")
    assert len(_racks(server, pods)) == 1, f"the replica's pods share one rack: {_racks(server, pods)}"
    assert '"level": "error"' not in operator.log()


def test_with_replace_missing_pod_a_deleted_worker_comes_back_beside_its_leader(world):
    server, operator = world
    server.kubectl("apply", "-f", "-", stdin=manifest("ReplaceMissingPod"))
    before = _uids(_running(server))
    server.kubectl("delete", "pod", WORKER, "-n", NS)
    pods = wait_for(lambda: (p := _running(server)) and _uids(p)[WORKER] != before[WORKER] and p, 30, "the worker created anew")
    assert _uids(pods)[LEADER] == before[LEADER], "the leader runs on"
    assert len(_racks(server, pods)) == 1, "the new worker is in its leader's rack"
    shown = server.kubectl("get", "ig", NAME, "-n", NS, "-o", "jsonpath={.spec.roles[0].recovery}").stdout
    assert shown == "ReplaceMissingPod"
    # A lost leader re-creates the replica whole, whatever the option.
    server.kubectl("delete", "pod", LEADER, "-n", NS)
    middle = _uids(pods)
    wait_for(lambda: (p := _running(server)) and all(_uids(p)[n] != u for n, u in middle.items()), 30, "both pods created anew")
    assert '"level": "error"' not in operator.log()
