"""`tandem operator --namespace serving` (deploy/overlays/namespaced), through the real kubectl.

It places and writes only the groups of its namespace: the same group applied in another
namespace gets no pod, no Service, no status. It still reads every namespace's pods: a pod
of another workload holding a node's GPUs is capacity the operator must not promise again
(on the code before issue 25 it was not seen, the group's pods were sent to that node and
stayed Pending there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
import yaml

from tandem.api.naming import GROUP_LABEL
from tandem.topology.generate import generate_cluster
from e2e.processes import KUBECTL, NO_KUBECTL, ApiServer, start_apiserver, start_operator, wait_for

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)
WATCHED, OTHER = "serving", "elsewhere"


def _group(namespace: str) -> dict:
    return {
        "apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "metadata": {"name": "small", "namespace": namespace},
        "spec": {"replicas": 1, "topology": {"pack": {"required": "host"}}, "roles": [
            {"name": role, "replicas": 1, "template": {"spec": {"containers": [
                {"name": "engine", "image": "vllm/vllm-openai:v0.11.0", "resources": {"requests": {"nvidia.com/gpu": "4"}}}]}}}
            for role in ("prefill", "decode")]},
    }


BLOCKER = {  # another workload's pod, holding all of n-000's GPUs
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "training", "namespace": OTHER},
    "spec": {"nodeSelector": {"kubernetes.io/hostname": "n-000"},
             "containers": [{"name": "train", "image": "trainer", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]},
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ApiServer]:
    topology, nodes = generate_cluster([("rack", 1), ("host", 2)], 8)
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([topology, {"apiVersion": "v1", "kind": "List", "items": nodes}]))
    server = start_apiserver(tmp_path, "--cluster", str(tmp_path / "cluster.yaml"))
    try:
        yield server
    finally:
        assert server.stop() == 0


def test_a_namespaced_operator_leaves_other_namespaces_alone_and_counts_their_pods(server: ApiServer, tmp_path: Path):
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(BLOCKER))
    server.kubectl("wait", "--for=condition=Ready", "pod/training", "-n", OTHER, "--timeout=20s")
    operator = start_operator(server, tmp_path, "namespaced", "--namespace", WATCHED)
    for namespace in (OTHER, WATCHED):
        server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(_group(namespace)))
    waited = server.kubectl("wait", "--for=condition=Available", "ig/small", "-n", WATCHED, "--timeout=30s", check=False)
    pods = yaml.safe_load(server.kubectl("get", "pods", "-n", WATCHED, "-l", f"{GROUP_LABEL}=small", "-o", "yaml").stdout)["items"]
    where = sorted((p["metadata"]["name"], p["spec"].get("nodeName"), p["status"].get("phase")) for p in pods)
    assert waited.returncode == 0, f"the group in {WATCHED} never became Available: {where}\n{operator.log()[-2000:]}"
    assert len(pods) == 2 and {node for _, node, _ in where} == {"n-001"}, f"placed beside the other workload's pod: {where}"

    untouched = server.kubectl("get", "pods,services,configmaps", "-n", OTHER, "-l", f"{GROUP_LABEL}=small", "-o", "name")
    assert untouched.stdout == "", "the namespaced operator made nothing outside its namespace"
    other = yaml.safe_load(server.kubectl("get", "ig", "small", "-n", OTHER, "-o", "yaml").stdout)
    assert not other.get("status"), "nor wrote a status there"
    assert server.kubectl("get", "pod", "training", "-n", OTHER, "-o", "jsonpath={.spec.nodeName}").stdout == "n-000"
    wait_for(lambda: "pass" in operator.log(), 10, "a pass logged")
    operator.process.terminate()
    assert operator.process.wait(timeout=10) == 0
