"""Issue 25, item 8: a short cluster asks its node autoscaler for nodes, through the real kubectl.

`tandem apiserver --provisioner` serves cluster-autoscaler's ProvisioningRequest CRD and
answers requests with new nodes (a few seconds later, so kubectl sees the request first).
A group whose minimum (three 8-GPU pods in one rack) cannot fit the one node there is:

- with `tandem operator --provisioning-class ...`: one ProvisioningRequest for the unit,
  with a pod set per role and part (leader, workers) and the PodTemplates it names, owned
  by the group; the nodes come, the unit is placed on them, the request and its templates
  are deleted;
- without the option (the default): nothing is created, the unit waits; and the operator
  needs no ProvisioningRequest API at all (a cluster without cluster-autoscaler's CRD);
- a request the autoscaler cannot satisfy (a pod larger than any node) fails: a Warning
  event says so, and the unit's status says when the next attempt comes;
- with `--provisioning` and no default class: a group that names none gets nothing, and
  gets its request once `spec.scheduler.provisioningClassName` is set.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tandem.api.naming import GROUP_LABEL, UNIT_LABEL
from tandem.topology.generate import generate_cluster
from e2e.processes import KUBECTL, NO_KUBECTL, ApiServer, OperatorProcess, start_apiserver, start_operator, wait_for

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)
NS, NAME = "serving", "short"
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
GPU8 = {"requests": {"nvidia.com/gpu": "8", "cpu": "4", "memory": "16Gi"}}
GROUP = {
    "apiVersion": "tandem.dev/v1alpha1",
    "kind": "InferenceGroup",
    "metadata": {"name": NAME, "namespace": NS},
    "spec": {
        "replicas": 1,
        "topology": {"pack": {"required": "rack"}},
        "roles": [
            {"name": "prefill", "replicas": 1, "template": {"spec": {"containers": [{"name": "engine", "image": "vllm", "resources": GPU8}]}}},
            {
                "name": "decode",
                "replicas": 1,
                "podsPerReplica": 2,
                "template": {"spec": {"containers": [{"name": "engine", "image": "vllm", "resources": GPU8}]}},
                "workerTemplate": {"spec": {"containers": [{"name": "worker", "image": "vllm-worker", "resources": GPU8}]}},
            },
        ],
    },
}


@pytest.fixture
def world(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[ApiServer, Path]]:
    topology, nodes = generate_cluster([("rack", 1), ("host", getattr(request, "param", {}).get("hosts", 1))], 8)  # one 8-GPU node: the unit needs three
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([topology, {"apiVersion": "v1", "kind": "List", "items": nodes}]))
    (tmp_path / "group.yaml").write_text(yaml.safe_dump(GROUP))
    provisioner = ["--provisioner", "--provision-after", "3"] if getattr(request, "param", {}).get("provisioner", True) else []
    server = start_apiserver(tmp_path, "--cluster", str(tmp_path / "cluster.yaml"), *provisioner)
    try:
        yield server, tmp_path
    finally:
        assert server.stop() == 0, "SIGTERM ends the server cleanly"
    assert server.stderr.read_text() == "", "nothing went wrong on the server's side"


def test_a_unit_that_does_not_fit_asks_for_nodes_and_is_placed_on_them(world):
    server, work = world
    operator = start_operator(server, work, "solo", "--provisioning-class", ATOMIC)
    assert server.kubectl("apply", "-f", str(work / "group.yaml")).stdout.strip() == f"inferencegroup.tandem.dev/{NAME} created"

    requests = wait_for(lambda: _items(server, "provisioningrequests"), 20, "a ProvisioningRequest")
    assert len(requests) == 1, "one request for the one unit"
    request = requests[0]
    name = f"{NAME}-0-provision-1"
    assert request["metadata"]["name"] == name
    assert request["metadata"]["labels"][UNIT_LABEL] == "0" and request["metadata"]["labels"][GROUP_LABEL] == NAME
    assert request["metadata"]["ownerReferences"][0]["kind"] == "InferenceGroup"
    assert request["spec"]["provisioningClassName"] == ATOMIC
    assert request["spec"]["podSets"] == [
        {"podTemplateRef": {"name": f"{name}.prefill"}, "count": 1},
        {"podTemplateRef": {"name": f"{name}.decode"}, "count": 1},
        {"podTemplateRef": {"name": f"{name}.decode.workers"}, "count": 1},
    ], "the unit's minimum: a prefill pod, a decode leader and its worker"
    listed = server.kubectl("get", "provreq", "-n", NS).stdout.split()
    assert name in listed, "kubectl lists it by its short name"
    templates = {t["metadata"]["name"]: t for t in _items(server, "podtemplates")}
    assert set(templates) == {f"{name}.prefill", f"{name}.decode", f"{name}.decode.workers"}
    assert templates[f"{name}.decode.workers"]["template"]["spec"]["containers"][0]["image"] == "vllm-worker"
    assert "schedulingGates" not in templates[f"{name}.prefill"]["template"]["spec"], "the autoscaler must see a pod it can schedule"
    events = server.kubectl("get", "events", "-n", NS, "-o", "json").stdout
    assert "ProvisioningRequestCreated" in events
    reason = server.kubectl("get", "ig", NAME, "-n", NS, "-o", "jsonpath={.status.units[0].reason}").stdout
    assert f"ProvisioningRequest {name}" in reason, f"the unit's status says what it waits on: {reason!r}"

    pods = wait_for(lambda: _placed(server, 3), 30, "the unit's three pods bound")
    nodes = {n["metadata"]["name"]: n for n in json.loads(server.kubectl("get", "nodes", "-o", "json").stdout)["items"]}
    assert len(nodes) == 4, "three nodes added for three 8-GPU pods"
    assert {p["spec"]["nodeName"] for p in pods} <= {n for n in nodes if n.startswith("provisioned-")}
    assert len({nodes[p["spec"]["nodeName"]]["metadata"]["labels"]["network.tandem.dev/rack"] for p in pods}) == 1, "pack: one rack"
    wait_for(lambda: not _items(server, "provisioningrequests") and not _items(server, "podtemplates"), 20, "the request and its templates deleted")
    assert "No resources found" in server.kubectl("get", "provisioningrequests", "-n", NS).stderr
    _stop(operator)


def test_nothing_is_asked_for_without_the_option(world):
    server, work = world
    operator = start_operator(server, work, "solo")
    server.kubectl("apply", "-f", str(work / "group.yaml"))
    # one node of 8 GPUs could never hold the unit's three pods of 8: not created, said NeverFits
    wait_for(lambda: "NeverFits" in server.kubectl("get", "events", "-n", NS).stdout, 20, "the unit reported NeverFits")
    time.sleep(1.0)  # passes enough to have made a request, had one been made
    assert "No resources found" in server.kubectl("get", "provisioningrequests", "-n", NS).stderr
    assert "No resources found" in server.kubectl("get", "podtemplates", "-n", NS).stderr
    assert len(server.kubectl("get", "nodes", "-o", "name").stdout.split()) == 1
    _stop(operator)


@pytest.mark.parametrize("world", [{"provisioner": False, "hosts": 3}], indirect=True)
def test_the_operator_needs_no_provisioning_api_without_the_option(world):
    server, work = world
    assert "doesn't have a resource type" in server.kubectl("get", "provisioningrequests", check=False).stderr, "no CRD here"
    operator = start_operator(server, work, "solo")  # ready: it watches nothing it cannot list
    server.kubectl("apply", "-f", str(work / "group.yaml"))
    wait_for(lambda: _placed(server, 3), 30, "the unit's three pods bound on the three nodes there are")
    _stop(operator)


def test_a_group_opts_in_with_its_own_class(world):
    server, work = world
    operator = start_operator(server, work, "solo", "--provisioning")  # on, but no class of the operator's
    server.kubectl("apply", "-f", str(work / "group.yaml"))
    # one node of 8 GPUs could never hold the unit's three pods of 8: not created, said NeverFits
    wait_for(lambda: "NeverFits" in server.kubectl("get", "events", "-n", NS).stdout, 20, "the unit reported NeverFits")
    time.sleep(1.0)
    assert _items(server, "provisioningrequests") == [], "a group naming no class asks for nothing"
    patch = json.dumps({"spec": {"scheduler": {"provisioningClassName": ATOMIC}}})
    server.kubectl("patch", "ig", NAME, "-n", NS, "--type", "merge", "-p", patch)
    requests = wait_for(lambda: _items(server, "provisioningrequests"), 20, "a ProvisioningRequest")
    assert [r["spec"]["provisioningClassName"] for r in requests] == [ATOMIC]
    wait_for(lambda: _placed(server, 3), 30, "the unit's three pods bound")
    _stop(operator)


def test_a_failed_request_is_reported_and_will_be_retried(world):
    server, work = world
    huge = {**GROUP, "spec": {**GROUP["spec"], "roles": [GROUP["spec"]["roles"][0]]}}
    huge["spec"]["roles"] = [{**huge["spec"]["roles"][0], "template": {"spec": {"containers": [
        {"name": "engine", "image": "vllm", "resources": {"requests": {"nvidia.com/gpu": "16"}}}]}}}]
    (work / "huge.yaml").write_text(yaml.safe_dump(huge))
    operator = start_operator(server, work, "solo", "--provisioning-class", ATOMIC)
    server.kubectl("apply", "-f", str(work / "huge.yaml"))
    event = wait_for(lambda: [e for e in _items(server, "events") if e["reason"] == "ProvisioningFailed"], 30, "a ProvisioningFailed event")[0]
    assert event["type"] == "Warning" and "more than a node holds" in event["message"] and "retrying after 60s" in event["message"]
    reason = server.kubectl("get", "ig", NAME, "-n", NS, "-o", "jsonpath={.status.units[0].reason}").stdout
    assert f"ProvisioningRequest {NAME}-0-provision-1 Failed" in reason and "next attempt at" in reason, reason
    time.sleep(1.0)
    assert sum(e.get("count", 1) for e in _items(server, "events") if e["reason"] == "ProvisioningFailed") == 1, "reported once"
    assert len(server.kubectl("get", "nodes", "-o", "name").stdout.split()) == 1
    _stop(operator)


def _items(server: ApiServer, kind: str) -> list[dict[str, Any]]:
    return json.loads(server.kubectl("get", kind, "-n", NS, "-o", "json").stdout)["items"]


def _placed(server: ApiServer, count: int) -> list[dict[str, Any]] | None:
    pods = [p for p in _items(server, "pods") if p["spec"].get("nodeName")]
    return pods if len(pods) == count else None


def _stop(operator: OperatorProcess) -> None:
    operator.process.send_signal(signal.SIGTERM)
    assert operator.process.wait(timeout=15) == 0
    assert '"level": "error"' not in operator.log(), operator.log()
