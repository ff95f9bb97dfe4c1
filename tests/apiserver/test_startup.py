"""What the server starts with (cluster files, kubectl dumps included; namespaces; tandem's CRDs), and what it refuses."""

from __future__ import annotations

import socket

import pytest

from apiserver.helpers import Client
from tandem.apiserver.seed import cluster_objects
from tandem.apiserver.server import ApiServer
from tandem.errors import InputError

DUMP = """\
apiVersion: v1
kind: NodeList
items:
- metadata: {name: n-1, uid: from-another-cluster, resourceVersion: "999", labels: {kubernetes.io/hostname: n-1}}
  status: {allocatable: {cpu: "8", nvidia.com/gpu: "8", pods: "110"}, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: busy, namespace: elsewhere}
spec: {nodeName: n-1, containers: [{name: c, image: x, resources: {requests: {nvidia.com/gpu: "8"}}}]}
status: {phase: Running, podIP: 127.9.9.9}
---
apiVersion: tandem.dev/v1alpha1
kind: ClusterTopology
metadata: {name: default}
spec:
  levels: [{name: host, nodeLabel: kubernetes.io/hostname}]
"""


def test_a_kubectl_dump_is_loaded_as_written_with_server_fields_replaced():
    objects = cluster_objects([("dump.yaml", DUMP)])
    assert [o["kind"] for o in objects] == ["Node", "Pod", "ClusterTopology"]
    with ApiServer(objects=objects, kubelet=False) as server:
        client = Client(server.url)
        node = client.get("/api/v1/nodes/n-1").body
        assert node["metadata"]["uid"] != "from-another-cluster" and node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        busy = client.get("/api/v1/namespaces/elsewhere/pods/busy").body
        assert busy["status"] == {"phase": "Running", "podIP": "127.9.9.9"}, "a bound pod's status is kept"
        assert client.get("/apis/tandem.dev/v1alpha1/clustertopologies/default").code == 200
        namespaces = [n["metadata"]["name"] for n in client.get("/api/v1/namespaces").body["items"]]
        assert namespaces == ["default", "elsewhere", "kube-node-lease", "kube-public", "kube-system"]


SNAPSHOT = """\
apiVersion: v1
kind: List
items:
- apiVersion: tandem.dev/v1alpha1
  kind: InferenceGroup
  metadata: {name: g, namespace: serving, uid: old-group-uid}
  spec:
    roles: [{name: decode, replicas: 1, template: {spec: {containers: [{name: engine, image: vllm}]}}}]
  status: {observedGeneration: 1, state: Ready, replicas: 1}
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: g-0-peers
    namespace: serving
    ownerReferences: [{apiVersion: tandem.dev/v1alpha1, kind: InferenceGroup, name: g, uid: old-group-uid, controller: true}]
  data: {peers.json: "{}"}
"""


def test_a_snapshot_left_by_an_operator_keeps_its_status_other_kinds_and_owners():
    """A cluster as a previous operator left it: the group's status, its ConfigMap, and
    the ConfigMap's owner reference following the group's new uid (else the garbage
    collector would not know it as the group's)."""
    with ApiServer(objects=cluster_objects([("snapshot.yaml", SNAPSHOT)]), kubelet=False) as server:
        client = Client(server.url)
        group = client.get("/apis/tandem.dev/v1alpha1/namespaces/serving/inferencegroups/g").body
        assert group["status"]["state"] == "Ready" and group["metadata"]["uid"] != "old-group-uid"
        peers = client.get("/api/v1/namespaces/serving/configmaps/g-0-peers").body
        assert [r["uid"] for r in peers["metadata"]["ownerReferences"]] == [group["metadata"]["uid"]]


def test_tandem_kinds_need_tandems_crds_and_bad_files_name_what_is_wrong():
    with pytest.raises(InputError, match="ClusterTopology default: kind ClusterTopology is not served"):
        ApiServer(objects=cluster_objects([("dump.yaml", DUMP)]), crds=False, kubelet=False)
    with pytest.raises(InputError, match=r"bad\.yaml"):
        cluster_objects([("bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: 3}\n")])
    assert cluster_objects([]) == []


def test_the_cli_refuses_bad_cluster_files_and_busy_ports_in_one_line(run_cli, tmp_path):
    broken = tmp_path / "cluster.yaml"
    broken.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: lots}}\n")
    result = run_cli("apiserver", "--cluster", broken, "--kubeconfig", tmp_path / "kc")
    assert result.exit_code == 2 and result.stderr.startswith("error: ") and "cluster.yaml" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "kc").exists()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = run_cli("apiserver", "--port", busy.getsockname()[1], "--kubeconfig", tmp_path / "kc")
    assert result.exit_code == 2 and result.stderr.startswith("error: --port: cannot listen on 127.0.0.1:")
