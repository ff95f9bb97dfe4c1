"""`tandem apiserver` as a process, driven by the real kubectl: what a user trying tandem does.

One server for the module (started with `--no-crds`, so applying the CRDs is what
registers them), its own kubeconfig and kubectl cache directory; kubectl's exit status
and output are checked as a user reads them. No operator runs: pods appear only when
kubectl creates them, and the simulated kubelet binds and starts them.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from tandem.topology.generate import generate_cluster

REPO = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl") or ("/usr/bin/kubectl" if os.access("/usr/bin/kubectl", os.X_OK) else None)
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: the end-to-end tests drive the real kubectl")
NS = "e2e"
READY_LINE_TIMEOUT_S = 20.0

GROUP = {
    "apiVersion": "tandem.dev/v1alpha1",
    "kind": "InferenceGroup",
    "metadata": {"name": "small", "namespace": NS},
    "spec": {
        "replicas": 1,
        "topology": {"pack": {"required": "rack"}},
        "roles": [
            {"name": role, "replicas": 1, "template": {"spec": {"containers": [
                {"name": "engine", "image": "vllm/vllm-openai:v0.11.0", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]}}}
            for role in ("prefill", "decode")
        ],
    },
}


class Server:
    def __init__(self, process: subprocess.Popen, kubeconfig: Path, home: Path, line: str):
        self.process, self.kubeconfig, self.home, self.line = process, kubeconfig, home, line

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "HOME": str(self.home), "CLOUDSDK_CONFIG": str(self.home / "gcloud")}
        result = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, input=stdin, timeout=60, cwd=REPO)  # type: ignore[list-item]
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        return result


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    work = tmp_path_factory.mktemp("e2e")
    topology, nodes = generate_cluster([("rack", 2), ("host", 2)], 8)
    (work / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    (work / "topology.yaml").write_text(yaml.safe_dump(topology))
    (work / "group.yaml").write_text(yaml.safe_dump(GROUP))
    kubeconfig, home = work / "kubeconfig", work / "home"
    home.mkdir()
    errors = (work / "stderr").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "tandem.cli.main", "apiserver", "--cluster", str(work / "nodes.yaml"), "--kubeconfig", str(kubeconfig),
         "--port", "0", "--ready-after", "0.3", "--no-crds"],
        stdout=subprocess.PIPE, stderr=errors, text=True, cwd=REPO,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()  # type: ignore[union-attr]
    try:
        line = lines.get(timeout=READY_LINE_TIMEOUT_S)
    except queue.Empty:
        process.kill()
        raise AssertionError(f"tandem apiserver printed no ready line: {(work / 'stderr').read_text()}") from None
    yield Server(process, kubeconfig, home, line.strip())
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0, "SIGTERM ends the server cleanly"
    errors.close()
    assert lines.empty(), "one line, and only one, on stdout"
    assert (work / "stderr").read_text() == "", "nothing went wrong on the server's side"


def _crds_applied(server: Server) -> None:
    """For a test run on its own: apply tandem's CRDs unless an earlier test did."""
    if server.kubectl("get", "crd", "inferencegroups.tandem.dev", check=False).returncode:
        server.kubectl("apply", "-k", "deploy/crds")


def _table(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def test_it_announces_itself_in_one_line_and_kubectl_sees_its_nodes(server):
    assert server.line.startswith("tandem apiserver: serving on http://127.0.0.1:") and f"(kubeconfig {server.kubeconfig})" in server.line
    assert "Server Version: v1.32." in server.kubectl("version").stdout
    rows = _table(server.kubectl("get", "nodes").stdout)
    assert rows[0][:2] == ["NAME", "STATUS"] and [r[:2] for r in rows[1:]] == [[f"n-00{i}", "Ready"] for i in range(4)]
    assert "kubernetes.io/hostname=n-002" in server.kubectl("get", "node", "n-002", "--show-labels").stdout


def test_applying_the_crds_registers_tandems_kinds(server):
    assert server.kubectl("get", "ig", check=False).returncode != 0, "not served before its CRD"
    files = ["-f", "deploy/crds/tandem.dev_clustertopologies.yaml", "-f", "deploy/crds/tandem.dev_inferencegroups.yaml"]
    out = server.kubectl("apply", *files).stdout
    assert "customresourcedefinition.apiextensions.k8s.io/inferencegroups.tandem.dev created" in out
    assert "unchanged" in server.kubectl("apply", "-k", "deploy/crds").stdout
    whole = server.kubectl("apply", "-f", "deploy/crds/", check=False)  # a real cluster refuses the Kustomization alike
    assert 'no matches for kind "Kustomization"' in whole.stderr and "inferencegroups.tandem.dev unchanged" in whole.stdout
    assert "inferencegroups" in server.kubectl("api-resources", "--api-group=tandem.dev").stdout


def test_inference_group_lifecycle_with_kubectl(server):
    _crds_applied(server)
    work = Path(server.kubeconfig).parent
    assert server.kubectl("apply", "-f", str(work / "topology.yaml")).stdout.strip() == "clustertopology.tandem.dev/default created"
    header, row = _table(server.kubectl("get", "ctopo").stdout)
    assert header == ["NAME", "LEVELS", "DOMAINS", "NODES", "UNLABELED", "READY", "AGE"] and row[0] == "default"
    status = {"status": {"levelNames": "rack/host", "domainCounts": "2/4", "nodes": 4, "unlabeledNodes": 0,
                         "conditions": [{"type": "Ready", "status": "True", "reason": "UpToDate", "lastTransitionTime": "2026-11-27T00:00:00Z"}]}}
    server.kubectl("patch", "ctopo", "default", "--subresource=status", "--type=merge", "-p", json.dumps(status))
    assert _table(server.kubectl("get", "ctopo").stdout)[1][:6] == ["default", "rack/host", "2/4", "4", "0", "True"], "the topology controller's status"
    assert server.kubectl("apply", "-f", str(work / "group.yaml")).stdout.strip() == "inferencegroup.tandem.dev/small created"
    version = server.kubectl("get", "ig", "small", "-n", NS, "-o", "jsonpath={.metadata.resourceVersion}").stdout
    # Defaults inside list items make kubectl send the roles again (merge patches replace lists), as with
    # a real server; the server finds nothing changed and writes nothing.
    assert server.kubectl("apply", "-f", str(work / "group.yaml")).stdout.strip() in ("inferencegroup.tandem.dev/small configured",
                                                                                    "inferencegroup.tandem.dev/small unchanged")
    assert server.kubectl("get", "ig", "small", "-n", NS, "-o", "jsonpath={.metadata.resourceVersion}").stdout == version
    rows = _table(server.kubectl("get", "ig", "-n", NS).stdout)
    assert rows[0] == ["NAME", "STATUS", "UNITS", "FUNCTIONAL", "AVAILABLE", "AGE"] and rows[1][0] == "small"
    shown = yaml.safe_load(server.kubectl("get", "ig", "small", "-n", NS, "-o", "yaml").stdout)
    assert shown["kind"] == "InferenceGroup" and shown["spec"]["roles"][0]["podsPerReplica"] == 1, "the schema's defaults"
    assert shown["metadata"]["generation"] == 1
    assert server.kubectl("scale", "ig", "small", "-n", NS, "--replicas=2").stdout.strip() == "inferencegroup.tandem.dev/small scaled"
    assert server.kubectl("get", "ig", "small", "-n", NS, "-o", "jsonpath={.spec.replicas} {.metadata.generation}").stdout == "2 2"
    everywhere = _table(server.kubectl("get", "inferencegroups.tandem.dev", "-A").stdout)
    assert everywhere[0][:2] == ["NAMESPACE", "NAME"] and everywhere[1][:3] == [NS, "small", "2"]
    empty = server.kubectl("get", "pods", "-n", NS, "-l", "tandem.dev/group=small")
    assert empty.stdout == "" and "No resources found" in empty.stderr, "no operator runs here"
    assert server.kubectl("delete", "ig", "small", "-n", NS).stdout.strip() == 'inferencegroup.tandem.dev "small" deleted'
    gone = server.kubectl("get", "ig", "small", "-n", NS, check=False)
    assert gone.returncode == 1 and 'inferencegroups.tandem.dev "small" not found' in gone.stderr


def test_an_invalid_group_is_refused_naming_the_field(server):
    _crds_applied(server)
    bad = yaml.safe_dump({**GROUP, "metadata": {"name": "bad", "namespace": NS},
                          "spec": {**GROUP["spec"], "roles": [{"name": "prefill", "replicas": "two"}]}})
    refused = server.kubectl("apply", "-f", "-", stdin=bad, check=False)
    assert refused.returncode == 1
    assert "spec.roles[0].replicas: Invalid value" in refused.stderr and "spec.roles[0].template: Required value" in refused.stderr
    unknown = yaml.safe_dump({**GROUP, "metadata": {"name": "typo", "namespace": NS}, "spec": {**GROUP["spec"], "replica": 2}})
    strict = server.kubectl("apply", "-f", "-", stdin=unknown, check=False)
    assert strict.returncode == 1 and 'unknown field "spec.replica"' in strict.stderr


def test_a_pod_created_with_kubectl_is_bound_to_its_hostname_and_becomes_ready(server):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "engine-0", "namespace": NS, "labels": {"tandem.dev/group": "manual"}},
           "spec": {"nodeSelector": {"kubernetes.io/hostname": "n-003"},
                    "containers": [{"name": "engine", "image": "vllm", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}
    assert server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(pod)).stdout.strip() == "pod/engine-0 created"
    assert "condition met" in server.kubectl("wait", "--for=condition=Ready", "pod/engine-0", "-n", NS, "--timeout=20s").stdout
    rows = _table(server.kubectl("get", "pods", "-n", NS, "-l", "tandem.dev/group=manual", "-o", "wide").stdout)
    assert rows[0][:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    name, ready, status, restarts, _, ip, node = rows[1][:7]
    assert (name, ready, status, restarts, node) == ("engine-0", "1/1", "Running", "0", "n-003") and ip.startswith("127.10.")
    server.kubectl("label", "pod", "engine-0", "-n", NS, "team=serving")
    assert "team=serving" in server.kubectl("get", "pod", "engine-0", "-n", NS, "--show-labels").stdout
    full = {**pod, "metadata": {**pod["metadata"], "name": "no-room"}}
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(full))
    described = server.kubectl("describe", "pod", "no-room", "-n", NS).stdout
    assert "Status:" in described and "Pending" in described
    assert server.kubectl("delete", "pod", "engine-0", "no-room", "-n", NS).returncode == 0
    assert server.kubectl("get", "pods", "-n", NS).stdout == ""


PODGROUP_CRD = REPO / ".." / "shared" / "schemas" / "volcano" / "scheduling.volcano.sh_podgroups.yaml"


@pytest.mark.skipif(not PODGROUP_CRD.is_file(), reason=f"Volcano's PodGroup CRD is not at {PODGROUP_CRD} (../shared/schemas)")
def test_a_schedulers_kind_is_served_only_while_its_crd_is_applied(server):
    """What makes a delegated backend live in the operator (docs/kube.md, optional kinds)."""
    before = server.kubectl("get", "--raw", "/apis/scheduling.volcano.sh/v1beta1/podgroups", check=False)
    assert before.returncode != 0 and "NotFound" in before.stderr, "no CRD: the collection is a 404"
    assert "created" in server.kubectl("apply", "-f", str(PODGROUP_CRD)).stdout
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "pg", "namespace": NS},
             "spec": {"minMember": 2}}
    server.kubectl("apply", "-f", "-", stdin=json.dumps(group))
    listed = json.loads(server.kubectl("get", "--raw", f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups").stdout)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["pg"]
    server.kubectl("delete", "crd", "podgroups.scheduling.volcano.sh")
    assert server.kubectl("get", "--raw", "/apis/scheduling.volcano.sh/v1beta1/podgroups", check=False).returncode != 0
