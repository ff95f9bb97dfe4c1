"""The topology controller as a cluster runs it: `tandem apiserver`, `tandem topology-controller`
(and later `tandem operator`) as processes, the upstream schedulers' CRDs from ../shared/schemas
applied with the real kubectl, and kubectl for everything a user does.

With only the topology controller running, a ClusterTopology gets its status (`kubectl get
ctopo` columns) and each backend's topology objects appear, valid against the upstream CRDs;
a node added in a new rack, a node removed and a node relabelled are followed within seconds.
Then the topology controller stops and the group operator, started alone, places a group on
the same ClusterTopology; deleting that topology is refused with the group named, by
whichever of the two webhooks runs. KAI's and Kueue's `Topology` share a kind name and
are kept side by side (`topologies.kai.scheduler`, `topologies.kueue.x-k8s.io`).
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from backends.schemas import SCHEMAS, SKIP_REASON, schema_problems
from e2e.processes import KUBECTL, NO_KUBECTL, ApiServer, OperatorProcess, free_port, start_apiserver, start_operator, start_topology_controller, wait_for
from tandem.topology.generate import generate_cluster

pytestmark = [pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL), pytest.mark.skipif(not SCHEMAS.is_dir(), reason=SKIP_REASON)]
FOLLOW_S = 10.0  # "within seconds": a change is followed well inside this, or the test fails
NS = "topo"
MANAGED = "app.kubernetes.io/managed-by=tandem,tandem.dev/topology=default"
UPSTREAM = {
    "volcano": ["volcano/topology.volcano.sh_hypernodes.yaml"],
    "kai": ["kai/kai.scheduler_topologies.yaml"],
    "koordinator": ["koordinator/scheduling.koordinator.sh_clusternetworktopologies.yaml"],
    "kueue": ["kueue/kueue.x-k8s.io_topologies.yaml", "kueue/kueue.x-k8s.io_resourceflavors.yaml"],
}
RESOURCES = {"volcano": "hypernodes.topology.volcano.sh", "kai": "topologies.kai.scheduler",
             "koordinator": "clusternetworktopologies.scheduling.koordinator.sh", "kueue": "topologies.kueue.x-k8s.io"}
RACK, BLOCK = "network.tandem.dev/rack", "network.tandem.dev/block"
BACKENDS = ("volcano", "kai", "kueue", "koordinator")


def node(name: str, block: str, rack: str) -> dict[str, Any]:
    """A node like `tandem cluster generate` makes: 8 GPUs, its block, rack and hostname labels."""
    _, [template] = generate_cluster([("block", 1), ("rack", 1), ("host", 1)], 8)
    template["metadata"] = {"name": name, "labels": {BLOCK: block, RACK: rack, "kubernetes.io/hostname": name}}
    return template


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ApiServer, Path, dict[str, Any], list[OperatorProcess]]]:
    """A server with tandem's CRDs and 4 nodes of 8 GPUs: one block of two racks of two hosts;
    and a list of the processes a test starts, killed at the end if the test did not stop them."""
    topology, nodes = generate_cluster([("block", 1), ("rack", 2), ("host", 2)], 8)
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    server = start_apiserver(tmp_path, "--cluster", str(tmp_path / "nodes.yaml"))
    started: list[OperatorProcess] = []
    try:
        server.kubectl("apply", "-k", "deploy/crds")
        yield server, tmp_path, topology, started
    finally:
        for process in started:
            if process.process.poll() is None:
                process.process.kill()
                process.process.wait(timeout=10)
        assert server.stop() == 0


def install_upstream(server: ApiServer, *backends: str) -> None:
    for backend in backends:
        for path in UPSTREAM[backend]:
            server.kubectl("apply", "-f", str(SCHEMAS / path))


def stop(process: OperatorProcess) -> None:
    process.process.send_signal(signal.SIGTERM)
    assert process.process.wait(timeout=15) == 0, process.log()
    assert '"level": "error"' not in process.log(), process.log()


def columns(server: ApiServer) -> dict[str, str]:
    """`kubectl get ctopo default` as a person reads it: header -> value (a column starts where
    its header does; an empty one, a count of 0 the status leaves out, reads "0")."""
    header, row = server.kubectl("get", "ctopo", "default").stdout.splitlines()[:2]
    starts = [i for i, char in enumerate(header) if char != " " and (i == 0 or header[i - 1] == " ")]
    ends = starts[1:] + [len(row) + 1]
    return {header[a:b].strip(): row[a:b].strip() or "0" for a, b in zip(starts, ends)}


def managed(server: ApiServer, backend: str) -> list[dict[str, Any]]:
    return json.loads(server.kubectl("get", RESOURCES[backend], "-l", MANAGED, "-o", "json").stdout)["items"]


def selects(member: dict[str, Any], name: str, labels: dict[str, str]) -> bool:
    """Whether a HyperNode member of type Node selects this node, as Volcano reads its selector."""
    import re

    selector = member["selector"]
    if "exactMatch" in selector:
        return selector["exactMatch"]["name"] == name
    if "regexMatch" in selector:
        return re.fullmatch(selector["regexMatch"]["pattern"], name) is not None
    wanted = selector.get("labelMatch", {}).get("matchLabels") or {}
    return bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())


def racks(server: ApiServer) -> list[set[str]]:
    """The nodes each managed tier-1 HyperNode (the one whose members are nodes) selects, sorted."""
    nodes = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in server.get("/api/v1/nodes")["items"]}
    out = []
    for hypernode in managed(server, "volcano"):
        if hypernode["spec"]["tier"] == 1:
            members = [m for m in hypernode["spec"]["members"] if m["type"] == "Node"]
            out.append({name for name, labels in nodes.items() if any(selects(m, name, labels) for m in members)})
    return sorted(out, key=sorted)


def valid(objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        assert not schema_problems(obj), (obj["kind"], obj["metadata"]["name"], schema_problems(obj)[:3])


def group(name: str = "llama") -> dict[str, Any]:
    """Prefill and decode, one replica each of one 8-GPU pod, packed in a rack of ClusterTopology `default`."""
    template = {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}
    roles = [{"name": role, "replicas": 1, "podsPerReplica": 1, "template": template} for role in ("prefill", "decode")]
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": 1, "topologyName": "default", "topology": {"pack": {"required": "rack"}}, "roles": roles}}


def refused_deletion(server: ApiServer) -> str:
    """`kubectl delete ctopo default`, which must be refused: kubectl's error text."""
    answer = server.kubectl("delete", "ctopo", "default", "--wait=false", check=False)
    assert answer.returncode != 0, f"the deletion went through: {answer.stdout}"
    assert server.kubectl("get", "ctopo", "default", "-o", "jsonpath={.metadata.deletionTimestamp}").stdout == "", "not even marked for deletion"
    return answer.stderr


def test_the_topology_controller_alone_keeps_every_backend_in_step_then_the_operator_alone_uses_the_topology(cluster):
    server, work, topology, started = cluster
    install_upstream(server, *BACKENDS)
    port = free_port()
    controller = start_topology_controller(server, work, "topo-a", "--backends", ",".join(BACKENDS), "--leader-elect",
                                           "--webhook-port", str(port), "--manage-webhook-config")
    started.append(controller)
    assert server.kubectl("get", "pods", "-A", "-o", "name").stdout == "", "no operator anywhere: the topology controller runs alone"
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(topology))

    # The status and each backend's objects appear, valid against the upstream CRDs.
    wanted = {"LEVELS": "block/rack/host", "DOMAINS": "1/2/4", "NODES": "4", "UNLABELED": "0", "READY": "True"}
    wait_for(lambda: columns(server) == {**columns(server), **wanted}, FOLLOW_S, f"kubectl get ctopo to say {wanted}")
    for backend in BACKENDS:
        objects = wait_for(lambda: managed(server, backend), FOLLOW_S, f"{backend}'s topology objects")
        valid(objects)
        for obj in objects:
            assert obj["metadata"]["ownerReferences"][0]["kind"] == "ClusterTopology"
    assert racks(server) == [{"n-000", "n-001"}, {"n-002", "n-003"}], "a tier-1 HyperNode per rack, its nodes as members (hostname is no tier)"
    [kai], [kueue] = managed(server, "kai"), managed(server, "kueue")
    assert (kai["apiVersion"].partition("/")[0], kueue["apiVersion"].partition("/")[0]) == ("kai.scheduler", "kueue.x-k8s.io"), "one kind name, two objects"
    assert [level["nodeLabel"] for level in kueue["spec"]["levels"]] == [BLOCK, RACK, "kubernetes.io/hostname"]
    status = json.loads(server.kubectl("get", "ctopo", "default", "-o", "json").stdout)["status"]
    assert [(level["name"], level["domains"], level["nodes"]) for level in status["levels"]] == [("block", 1, 4), ("rack", 2, 4), ("host", 4, 4)]

    # A node in a new rack, a node removed, a node relabelled: followed within seconds.
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(node("n-new", "block-0", "rack-new")))
    wait_for(lambda: {"n-new"} in racks(server) and columns(server)["DOMAINS"] == "1/3/5", FOLLOW_S, "the new rack's HyperNode and status")
    server.kubectl("delete", "node", "n-001")
    wait_for(lambda: racks(server) == [{"n-000"}, {"n-002", "n-003"}, {"n-new"}] and columns(server)["NODES"] == "4", FOLLOW_S, "the removed node gone")
    server.kubectl("label", "node", "n-002", f"{RACK}=rack-new", "--overwrite")
    wait_for(lambda: racks(server) == [{"n-000"}, {"n-002", "n-new"}, {"n-003"}], FOLLOW_S, "the relabelled node in its new rack")
    server.kubectl("label", "node", "n-003", f"{RACK}-")
    wait_for(lambda: columns(server)["UNLABELED"] == "1" and racks(server) == [{"n-000"}, {"n-002", "n-new"}], FOLLOW_S,
             "a node without its rack label counted, and its emptied rack's HyperNode deleted")
    server.kubectl("label", "node", "n-003", f"{RACK}=rack-1")
    wait_for(lambda: columns(server)["UNLABELED"] == "0" and racks(server) == [{"n-000"}, {"n-002", "n-new"}, {"n-003"}], FOLLOW_S, "labelled again")
    valid([obj for backend in BACKENDS for obj in managed(server, backend)])

    # A group names the topology: the topology controller's own webhook refuses its deletion.
    server.kubectl("create", "namespace", NS)
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(group()))
    assert f"{NS}/llama" in refused_deletion(server)
    stop(controller)
    lease = server.get("/apis/coordination.k8s.io/v1/namespaces/tandem-system/leases/tandem-topology-controller")
    assert not lease["spec"].get("holderIdentity"), "SIGTERM releases its own Lease"
    server.kubectl("delete", "validatingwebhookconfiguration", "tandem-topology-controller")  # it fails closed while none runs

    # The group operator alone, on the same ClusterTopology: the group is placed in one rack.
    port = free_port()
    operator = start_operator(server, work, "op", "--webhook-port", str(port), "--manage-webhook-config")
    started.append(operator)
    wait_for(lambda: server.kubectl("get", "validatingwebhookconfiguration", "tandem-operator", check=False).returncode == 0, 20, "the operator's webhook")
    pods = wait_for(lambda: (lambda items: items if len(items) == 2 and all(p["spec"].get("nodeName") for p in items) else None)(
        server.get(f"/api/v1/namespaces/{NS}/pods")["items"]), 30, "both pods bound")
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in server.get("/api/v1/nodes")["items"]}
    assert len({labels[p["spec"]["nodeName"]][RACK] for p in pods}) == 1, "packed in one rack of the topology the controller kept"
    assert f"{NS}/llama" in refused_deletion(server), "the operator's webhook names the group too"
    stop(operator)
    assert managed(server, "volcano"), "the operator never touches the topology controller's objects"
