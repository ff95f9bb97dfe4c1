"""`tandem apiserver` and `tandem operator` as separate processes, driven by the real kubectl.

The user's story of issue 12: install the CRDs, apply a ClusterTopology and the llama-70b
example, see every pod bound, started and Ready and `kubectl get ig` say Available; scale
with `kubectl scale ig`; change the template and watch the roles roll in lockstep; delete
the group and see everything it made go. Then the same rollout with two operators under
leader election, the leader killed with SIGKILL half-way: the standby finishes it.

A watch on every pod checks, at each change, that no node is ever promised more than it
has, that no pod is created twice, that no unit drops below functional during a rolling
update, and that the roles' new revisions stay on the lockstep grid.
"""

from __future__ import annotations

import math
import signal
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tandem.api.naming import GATE, GROUP_LABEL, REPLICA_LABEL, REVISION_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.api.quantity import parse_quantity
from tandem.topology.generate import generate_cluster
from e2e.processes import KUBECTL, NO_KUBECTL, ApiServer, PodWatch, start_apiserver, start_operator, wait_for

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)
NS, NAME = "serving", "llama-70b"
SETTLE_S = 60.0
SHAPE = [("block", 3), ("rack", 2), ("host", 6)]  # 36 nodes of 8 GPUs: a block per 8-node unit, and room for its surge


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[ApiServer, Path, PodWatch]]:
    topology, nodes = generate_cluster(SHAPE, 8)
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    (tmp_path / "topology.yaml").write_text(yaml.safe_dump(topology))
    server = start_apiserver(tmp_path, "--cluster", str(tmp_path / "nodes.yaml"), "--no-crds", "--ready-after", "0.2")
    watch = PodWatch(server.url).start()
    try:
        yield server, tmp_path, watch
    finally:
        watch.stop()
        assert server.stop() == 0, "SIGTERM ends the server cleanly"
    assert server.stderr.read_text() == "", "nothing went wrong on the server's side"


def test_a_group_goes_from_kubectl_apply_to_ready_scales_rolls_and_goes(world):
    server, work, watch = world
    crds = server.kubectl("apply", "-k", "deploy/crds").stdout
    assert "customresourcedefinition.apiextensions.k8s.io/inferencegroups.tandem.dev created" in crds
    operator = start_operator(server, work, "solo", "--resync", "30")
    assert server.kubectl("apply", "-f", str(work / "topology.yaml")).stdout.strip() == "clustertopology.tandem.dev/default created"
    assert server.kubectl("apply", "-f", "examples/llama-70b.yaml").stdout.strip() == "inferencegroup.tandem.dev/llama-70b created"
    group = _settled(server, units=2)
    rows = _table(server.kubectl("get", "ig", "-n", NS).stdout)
    assert rows[0] == ["NAME", "STATUS", "UNITS", "FUNCTIONAL", "AVAILABLE", "AGE"] and rows[1][:5] == [NAME, "Ready", "2", "2", "True"]
    pods = _pods(server)
    assert len(pods) == 16 and all(_ready(p) for p in pods)
    assert len({p["spec"]["nodeName"] for p in pods}) == 16, "one 8-GPU pod per node"
    assert {p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in pods} == {p["spec"]["nodeName"] for p in pods}
    for unit in ("0", "1"):
        blocks = {_node_label(server, p["spec"]["nodeName"], "network.tandem.dev/block") for p in pods if p["metadata"]["labels"][UNIT_LABEL] == unit}
        assert len(blocks) == 1, f"unit {unit} is packed into one block"
    assert server.kubectl("get", "service", f"{NAME}", "-n", NS, "-o", "jsonpath={.spec.clusterIP}").stdout == "None", "headless"
    peers = server.kubectl("get", "configmaps", "-n", NS, "-l", f"{GROUP_LABEL}={NAME}", "-o", "name").stdout.split()
    assert len(peers) == 2, "one peers ConfigMap per unit"

    assert server.kubectl("scale", "ig", NAME, "-n", NS, "--replicas=3").stdout.strip() == f"inferencegroup.tandem.dev/{NAME} scaled"
    _settled(server, units=3)
    assert len(_pods(server)) == 24

    start = len(watch.events)
    before = _settled(server, units=3)["status"]["revision"]
    _new_image(server, "vllm/vllm-openai:v0.11.1")
    after = _settled(server, units=3)
    assert after["status"]["revision"] != before
    assert {c["image"] for p in _pods(server) for c in p["spec"]["containers"]} == {"vllm/vllm-openai:v0.11.1"}
    _check_rolling_update(group, watch.events, start, units=3)
    _check_placements(server, watch.events)

    assert server.kubectl("delete", "ig", NAME, "-n", NS).stdout.strip() == f'inferencegroup.tandem.dev "{NAME}" deleted'
    for kind in ("pods", "services", "configmaps"):
        left = server.kubectl("get", kind, "-n", NS, "-l", f"{GROUP_LABEL}={NAME}", "-o", "name").stdout
        assert left == "", f"{kind} left behind: {left}"
    operator.process.send_signal(signal.SIGTERM)
    assert operator.process.wait(timeout=15) == 0
    assert '"level": "error"' not in operator.log()


def test_a_standby_operator_finishes_a_rollout_when_the_leader_is_killed(world):
    server, work, watch = world
    elect = ("--leader-elect", "--lease-duration", "3", "--resync", "30")
    server.kubectl("apply", "-k", "deploy/crds")
    operators = {name: start_operator(server, work, name, *elect) for name in ("a", "b")}
    server.kubectl("apply", "-f", str(work / "topology.yaml"))
    server.kubectl("apply", "-f", "examples/llama-70b.yaml")
    group = _settled(server, units=2)
    start = len(watch.events)
    _new_image(server, "vllm/vllm-openai:v0.11.1")
    wait_for(lambda: any(e[1]["metadata"]["labels"][REVISION_LABEL] != _revision(group) for e in watch.events[start:]), 30,
             "the rollout to start")
    leader = _leader(server)
    operators[leader].process.send_signal(signal.SIGKILL)
    operators[leader].process.wait(timeout=10)
    standby = next(name for name in operators if name != leader)
    _settled(server, units=2)
    assert _leader(server) == standby
    assert {c["image"] for p in _pods(server) for c in p["spec"]["containers"]} == {"vllm/vllm-openai:v0.11.1"}
    _check_rolling_update(group, watch.events, start, units=2)
    _check_placements(server, watch.events)
    operators[standby].process.send_signal(signal.SIGTERM)
    assert operators[standby].process.wait(timeout=15) == 0
    lease = server.get("/apis/coordination.k8s.io/v1/namespaces/tandem-system/leases/tandem-operator")
    assert not lease["spec"].get("holderIdentity"), "SIGTERM releases the lease"


def _settled(server: ApiServer, units: int) -> dict[str, Any]:
    """Wait until the group's status says every replica of the spec is up to date and Ready."""

    def done() -> dict[str, Any] | None:
        group = server.get(f"/apis/tandem.dev/v1alpha1/namespaces/{NS}/inferencegroups/{NAME}")
        status, spec = group.get("status") or {}, group["spec"]
        if status.get("observedGeneration") != group["metadata"]["generation"] or status.get("functionalUnits") != units:
            return None
        roles = {r["name"]: r for r in status.get("roles") or []}
        for role in spec["roles"]:
            want = role["replicas"] * spec["replicas"]
            seen = roles.get(role["name"]) or {}
            if not seen.get("replicas") == seen.get("readyReplicas") == seen.get("updatedReplicas") == want:
                return None
        pods = _pods(server)
        if len(pods) != sum(r["replicas"] * r["podsPerReplica"] for r in spec["roles"]) * units or not all(_ready(p) for p in pods):
            return None
        return group

    return wait_for(done, SETTLE_S, f"{NAME} to settle at {units} units", every=0.1)


def _new_image(server: ApiServer, image: str) -> None:
    patch = [{"op": "replace", "path": f"/spec/roles/{i}/template/spec/containers/0/image", "value": image} for i in range(2)]
    answer = server.kubectl("patch", "ig", NAME, "-n", NS, "--type=json", "-p", yaml.safe_dump(patch, default_flow_style=True))
    assert answer.stdout.strip() == f"inferencegroup.tandem.dev/{NAME} patched"


def _pods(server: ApiServer) -> list[dict[str, Any]]:
    return server.get(f"/api/v1/namespaces/{NS}/pods?labelSelector={GROUP_LABEL}%3D{NAME}")["items"]


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def _revision(group: dict[str, Any]) -> str:
    return group["status"]["revision"]


def _leader(server: ApiServer) -> str:
    return server.get("/apis/coordination.k8s.io/v1/namespaces/tandem-system/leases/tandem-operator")["spec"]["holderIdentity"]


def _node_label(server: ApiServer, node: str, label: str) -> str:
    return server.get(f"/api/v1/nodes/{node}")["metadata"]["labels"][label]


def _table(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def _replay(events: list[tuple[str, dict[str, Any]]]) -> Iterator[dict[str, dict[str, Any]]]:
    """The pods alive after each event, by uid."""
    alive: dict[str, dict[str, Any]] = {}
    for kind, pod in events:
        if kind == "DELETED":
            alive.pop(pod["metadata"]["uid"], None)
        else:
            alive[pod["metadata"]["uid"]] = pod
        yield alive


def _check_placements(server: ApiServer, events: list[tuple[str, dict[str, Any]]]) -> None:
    """No node is ever promised more than it has; no (name, revision) is ever created twice."""
    nodes = {n["metadata"]["name"]: n["status"]["allocatable"] for n in server.get("/api/v1/nodes")["items"]}
    created = Counter((p["metadata"]["name"], p["metadata"]["labels"].get(REVISION_LABEL)) for kind, p in events if kind == "ADDED")
    twice = [key for key, count in created.items() if count > 1]
    assert not twice, f"created more than once: {twice}"
    for alive in _replay(events):
        used: dict[str, Counter] = defaultdict(Counter)
        for pod in alive.values():
            gates = {g["name"] for g in pod["spec"].get("schedulingGates") or []}
            node = pod["spec"].get("nodeName") or (None if GATE in gates else (pod["spec"].get("nodeSelector") or {}).get("kubernetes.io/hostname"))
            if node is None or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            for container in pod["spec"]["containers"]:
                for resource, value in ((container.get("resources") or {}).get("requests") or {}).items():
                    used[node][resource] += parse_quantity(value)
        for node, resources in used.items():
            for resource, value in resources.items():
                assert value <= parse_quantity(nodes[node][resource]), f"{node} over its {resource}: {value}"


def _check_rolling_update(group: dict[str, Any], events: list[tuple[str, dict[str, Any]]], start: int, units: int) -> None:
    """From the pods alone: every unit stays functional, each role within target + maxSurge,
    and the roles' new replicas on LWS's lockstep grid (one step in flight at most)."""
    old = _revision(group)
    spec = group["spec"]
    targets = {r["name"]: r["replicas"] for r in spec["roles"]}
    minimums = {r["name"]: r.get("minReplicas", r["replicas"]) for r in spec["roles"]}
    sizes = {r["name"]: r.get("podsPerReplica", 1) for r in spec["roles"]}
    surge = spec["coordination"]["rollingUpdate"]["maxSurge"]
    grid = max(targets.values())
    states = list(_replay(events))
    for alive in states[start:]:
        replicas: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for pod in alive.values():
            labels = pod["metadata"]["labels"]
            replicas[(labels[UNIT_LABEL], labels[ROLE_LABEL], labels[REPLICA_LABEL], labels[REVISION_LABEL])].append(pod)
        for unit in map(str, range(units)):
            for role, target in targets.items():
                mine = {key: pods for key, pods in replicas.items() if key[0] == unit and key[1] == role}
                assert len(mine) <= target + surge, f"unit {unit} {role}: {len(mine)} replicas over target + maxSurge"
                ready = sum(1 for pods in mine.values() if len(pods) == sizes[role] and all(_ready(p) for p in pods))
                assert ready >= minimums[role], f"unit {unit} lost {role}'s minimum during the update"
            new = {role: sum(1 for key in replicas if key[0] == unit and key[1] == role and key[3] != old) for role in targets}
            lowest = max(min(i for i in range(grid + 1) if math.ceil(i * targets[r] / grid) >= new[r]) for r in targets)
            highest = min(max(i for i in range(grid + 1) if math.ceil(i * targets[r] / grid) <= new[r]) for r in targets)
            assert lowest <= highest + 1, f"unit {unit} off the lockstep grid: {new}"
    final = {p["metadata"]["labels"][REVISION_LABEL] for p in states[-1].values()}
    assert old not in final and len(final) == 1, f"every pod on the new revision: {final}"
