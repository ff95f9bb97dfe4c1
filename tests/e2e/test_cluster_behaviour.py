"""What `tandem apiserver` and its simulated cluster do as a real one would, seen through the
real kubectl: pods get Kubernetes' QoS class, deleting a Node takes its pods with it
(the pod garbage collector), a NoExecute taint or a node gone NotReady evicts its pods
after their toleration (the taint manager; the server runs with
`--default-toleration-seconds 3`), and a value CEL cannot hold is refused as invalid."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from e2e.processes import KUBECTL, NO_KUBECTL, ApiServer, start_apiserver, wait_for
from tandem.topology.generate import generate_cluster

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)
NS = "behaviour"
TOLERATION_S = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    work = tmp_path_factory.mktemp("behaviour")
    _, nodes = generate_cluster([("host", 3)], 8)
    (work / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    api = start_apiserver(work, "--cluster", str(work / "nodes.yaml"), "--default-toleration-seconds", str(TOLERATION_S))
    yield api
    assert api.stop() == 0
    assert api.stderr.read_text() == "", "nothing went wrong on the server's side"


def pod(name: str, node: str, resources: dict[str, Any] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "engine", "image": "vllm/vllm-openai:v0.11.0"}
    if resources is not None:
        container["resources"] = resources
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"nodeName": node, "containers": [container]}}


def _field(server: ApiServer, name: str, path: str) -> str:
    got = server.kubectl("get", "pod", name, "-n", NS, "-o", f"jsonpath={path}", check=False)
    return got.stdout if got.returncode == 0 else ""


def _nodes(server: ApiServer) -> list[str]:
    return sorted(server.kubectl("get", "nodes", "-o", "jsonpath={.items[*].metadata.name}").stdout.split())


def test_pods_get_the_qos_class_kubernetes_gives_them(server):
    node = _nodes(server)[0]
    pods = [
        pod("best-effort", node),
        pod("gpus-only", node, {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}),
        pod("burstable", node, {"requests": {"cpu": "1", "memory": "1Gi"}}),
        pod("guaranteed", node, {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1000m", "memory": "1Gi"}}),
        pod("limits-only", node, {"limits": {"cpu": "2", "memory": "2Gi"}}),  # requests default to the limits
    ]
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(pods))
    try:
        expected = {"best-effort": "BestEffort", "gpus-only": "BestEffort", "burstable": "Burstable",
                    "guaranteed": "Guaranteed", "limits-only": "Guaranteed"}
        for name, qos in expected.items():
            wait_for(lambda: _field(server, name, "{.status.qosClass}") != "", 20, f"pod {name} running")
            assert _field(server, name, "{.status.qosClass}") == qos, name
    finally:
        server.kubectl("delete", "pod", "--all", "-n", NS)


def test_deleting_a_node_deletes_the_pods_bound_to_it(server):
    doomed, kept = _nodes(server)[1:3]
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all([pod("on-doomed", doomed), pod("on-kept", kept)]))
    wait_for(lambda: _field(server, "on-doomed", "{.status.phase}") == "Running", 20, "the pod on the node to delete running")
    server.kubectl("delete", "node", doomed)
    wait_for(lambda: _field(server, "on-doomed", "{.metadata.name}") == "", 20, "the pod bound to the deleted node deleted")
    assert _field(server, "on-kept", "{.status.phase}") == "Running", "pods on other nodes are left alone"
    server.kubectl("delete", "pod", "--all", "-n", NS)


def test_an_integer_too_large_for_cel_is_refused_as_invalid_not_an_internal_error(server):
    """kubectl sends 99999999999999999999 as written: beyond 64 bits, where CEL's int ends."""
    manifest = f"""
apiVersion: tandem.dev/v1alpha1
kind: InferenceGroup
metadata: {{name: huge, namespace: {NS}}}
spec:
  roles:
    - name: prefill
      replicas: 99999999999999999999
      template: {{spec: {{containers: [{{name: engine, image: vllm/vllm-openai:v0.11.0}}]}}}}
"""
    refused = server.kubectl("apply", "-f", "-", stdin=manifest, check=False)
    assert refused.returncode != 0 and "InternalError" not in refused.stderr, refused.stderr
    assert 'The InferenceGroup "huge" is invalid' in refused.stderr, refused.stderr
    assert "should be less than or equal to 2147483647" in refused.stderr
    assert "holds an integer beyond the 64-bit range CEL rules evaluate" in refused.stderr


def test_a_no_execute_taint_evicts_the_pods_that_do_not_tolerate_it(server):
    node = _nodes(server)[0]
    tolerating = pod("tolerating", node)
    tolerating["spec"]["tolerations"] = [{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}]
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all([pod("intolerant", node), tolerating]))
    try:
        wait_for(lambda: _field(server, "intolerant", "{.status.phase}") == "Running", 20, "the pod to evict running")
        server.kubectl("taint", "node", node, "maintenance=now:NoExecute")
        wait_for(lambda: _field(server, "intolerant", "{.metadata.name}") == "", 10, "the pod not tolerating the taint evicted")
        time.sleep(1.0)
        assert _field(server, "tolerating", "{.status.phase}") == "Running", "a pod tolerating the taint for ever stays"
    finally:
        server.kubectl("taint", "node", node, "maintenance=now:NoExecute-", check=False)
        server.kubectl("delete", "pod", "--all", "-n", NS)


def test_a_node_gone_not_ready_evicts_its_pods_after_the_default_toleration(server):
    node = _nodes(server)[-1]
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(pod("stranded", node)))
    wait_for(lambda: _field(server, "stranded", "{.status.phase}") == "Running", 20, "the pod on the node to lose running")
    tolerations = json.loads(_field(server, "stranded", "{.spec.tolerations}") or "[]")
    assert {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": TOLERATION_S} in tolerations
    ready = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]}}
    try:
        server.kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", json.dumps(ready))
        lost_at = time.monotonic()
        wait_for(lambda: _field(server, "stranded", "{.metadata.name}") == "", TOLERATION_S + 10, "the pod on the NotReady node evicted")
        assert time.monotonic() - lost_at >= TOLERATION_S - 1.0, "not before its toleration ran out"
    finally:
        ready["status"]["conditions"][0].update(status="True", reason="KubeletReady")
        server.kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", json.dumps(ready))
        server.kubectl("delete", "pod", "--all", "-n", NS)
