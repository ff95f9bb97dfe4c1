"""Delegated groups as a cluster runs them (issue 27): `tandem apiserver` with the stand-in of
each scheduler (it runs once the scheduler's kinds are served), `tandem operator --backends X`,
and the real kubectl for everything a user does.

Per backend: a group naming it is not accepted while the API server lacks its kinds (the
condition names them); `kubectl apply` of the upstream CRDs from ../shared/schemas makes the
backend live without restarting anything; the scheduler places the pods tandem made for it
(its scheduler name, no tandem gate, no node chosen by tandem), with the gang objects owned by
the group; a unit beyond the cluster's room waits with the scheduler's own words in `kubectl
describe ig`; deleting the group takes its gang objects with it.

The Workload API is no CRD: it is built into kube-apiserver, and enabling it (alpha feature
gates, `--runtime-config`) is a restart of the API server. So for `workload-api` the
"not served" phase runs on a server started without `--workload-api`; then that server is
stopped and one started with `--workload-api` (nothing survives the restart of this
in-memory server: the operator, the CRDs, the topology and the group are made again), and the
rest runs there, kube-scheduler's stand-in placing the pods of each gang whole.
"""
from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

from backends.schemas import SCHEMAS, SKIP_REASON, schema_problems
from e2e.processes import KUBECTL, NO_KUBECTL, ApiServer, OperatorProcess, start_apiserver, start_operator, wait_for
from tandem.topology.generate import generate_cluster

pytestmark = [pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL), pytest.mark.skipif(not SCHEMAS.is_dir(), reason=SKIP_REASON)]
NS, NAME = "serving", "llama"
SETTLE_S = 60.0
SHAPE = [("block", 1), ("rack", 2), ("host", 7)]  # 14 nodes of 8 GPUs: three units of four pods, not four; two units and both surges
CRDS = {
    "volcano": ["volcano/scheduling.volcano.sh_podgroups.yaml"],
    "kai": ["kai/scheduling.run.ai_podgroups.yaml", "kai/scheduling.run.ai_queues.yaml"],
    "koordinator": ["koordinator/scheduling.sigs.k8s.io_podgroups.yaml"],
    "kueue": ["kueue/kueue.x-k8s.io_workloads.yaml", "kueue/kueue.x-k8s.io_localqueues.yaml", "kueue/kueue.x-k8s.io_clusterqueues.yaml"],
}
GANGS = {"volcano": "podgroups.scheduling.volcano.sh", "kai": "podgroups.scheduling.run.ai",
         "koordinator": "podgroups.scheduling.sigs.k8s.io", "kueue": "workloads.kueue.x-k8s.io", "workload-api": "podgroups.scheduling.k8s.io"}
# Every kind of gang object the operator writes for the backend (the first: the one the scheduler reports on).
GANG_KINDS = {**{backend: (kind,) for backend, kind in GANGS.items()},
              "workload-api": ("podgroups.scheduling.k8s.io", "compositepodgroups.scheduling.k8s.io", "workloads.scheduling.k8s.io")}
SCHEDULER_NAMES = {"volcano": "volcano", "kai": "kai-scheduler", "koordinator": "koord-scheduler", "kueue": "default-scheduler",
                   "workload-api": "default-scheduler"}
BUILT_IN = "workload-api"  # served by the API server itself (`tandem apiserver --workload-api`), no CRDs


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Callable[..., ApiServer], Path]]:
    """A function starting `tandem apiserver` on the cluster (extra arguments as given), and
    the work folder; every server started is stopped (cleanly) at the end."""
    topology, nodes = generate_cluster(SHAPE, 8)
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    (tmp_path / "topology.yaml").write_text(yaml.safe_dump(topology))
    started: list[ApiServer] = []

    def start(*extra: str) -> ApiServer:
        work = tmp_path / f"server-{len(started)}"
        work.mkdir()
        started.append(start_apiserver(work, "--cluster", str(tmp_path / "nodes.yaml"), "--no-crds", "--ready-after", "0.2", *extra))
        return started[-1]

    try:
        yield start, tmp_path
    finally:
        for server in started:
            assert server.stop() == 0, "SIGTERM ends the server cleanly"


def _group(backend: str) -> dict[str, Any]:
    engine = {"name": "engine", "image": "vllm/vllm-openai:v0.11.0", "resources": {"requests": {"nvidia.com/gpu": "8"}}}
    return {
        "apiVersion": "tandem.dev/v1alpha1",
        "kind": "InferenceGroup",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "topologyName": "default",
            "replicas": 1,
            "scheduler": {"backend": backend},
            "roles": [
                {"name": "prefill", "replicas": 2, "minReplicas": 2, "template": {"spec": {"containers": [engine]}}},
                {"name": "decode", "replicas": 1, "minReplicas": 1, "podsPerReplica": 2, "template": {"spec": {"containers": [engine]}}},
            ],
        },
    }


QUEUES = [
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "gpus"}, "spec": {"namespaceSelector": {}}},
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "default", "namespace": NS}, "spec": {"clusterQueue": "gpus"}},
]


def _unit_reason(server: ApiServer, words: str) -> str | None:
    return next((u["reason"] for u in (_stored(server).get("status") or {}).get("units", []) if words in u.get("reason", "")), None)


def _as_written(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as a client would write it again: without what the server stamps."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")}
    return {**obj, "metadata": meta}


def _stored(server: ApiServer) -> dict[str, Any]:
    return json.loads(server.kubectl("get", "ig", NAME, "-n", NS, "-o", "json").stdout)


def _condition(group: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (group.get("status") or {}).get("conditions", []) if c["type"] == kind), None)


def _pods(server: ApiServer) -> list[dict[str, Any]]:
    return json.loads(server.kubectl("get", "pods", "-n", NS, "-l", f"tandem.dev/group={NAME}", "-o", "json").stdout)["items"]


def _ready_group(server: ApiServer, units: int) -> dict[str, Any] | None:
    group = _stored(server)
    return group if _ready(group, units) else None


def _ready(group: dict[str, Any], units: int) -> bool:
    status = group.get("status") or {}
    return status.get("state") == "Ready" and status.get("functionalUnits") == units


def _gang_objects(server: ApiServer, backend: str) -> list[dict[str, Any]]:
    return [item for kind in GANG_KINDS[backend] for item in json.loads(server.kubectl("get", kind, "-n", NS, "-o", "json").stdout)["items"]]


def _start_cluster(server: ApiServer, work: Path, backend: str) -> OperatorProcess:
    """tandem's CRDs, the operator delegating to `backend`, the topology, the namespace and the group."""
    server.kubectl("apply", "-k", "deploy/crds")
    operator = start_operator(server, work, "solo", "--backends", backend, "--resync", "30")
    server.kubectl("apply", "-f", str(work.parent / "topology.yaml"))
    server.kubectl("create", "namespace", NS)
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(_group(backend)))
    return operator


def _stop(operator: OperatorProcess) -> None:
    operator.process.send_signal(signal.SIGTERM)
    assert operator.process.wait(timeout=15) == 0, operator.log()


@pytest.mark.parametrize("backend", sorted(GANGS))
def test_a_delegated_group_waits_for_its_schedulers_kinds_is_placed_by_it_and_says_why_a_unit_waits(world, backend):
    start, _ = world
    server = start()
    operator = _start_cluster(server, server.kubeconfig.parent, backend)

    accepted = wait_for(lambda: _condition(_stored(server), "Accepted"), SETTLE_S, "the Accepted condition")
    assert (accepted["status"], accepted["reason"]) == ("False", "BackendNotServed")
    assert GANGS[backend] in accepted["message"]
    assert _pods(server) == [], "nothing is made for a scheduler that is not there"

    if backend == BUILT_IN:  # enabling a built-in alpha API is an API server restart (module docstring)
        assert "enable that API group" in accepted["message"]
        _stop(operator)
        assert server.stop() == 0
        server = start("--workload-api")
        operator = _start_cluster(server, server.kubeconfig.parent, backend)
    else:
        server.kubectl("apply", "--server-side", *(arg for path in CRDS[backend] for arg in ("-f", str(SCHEMAS / path))))  # all at once
    if backend == "kueue":  # Kueue admits only through a LocalQueue: it says so until there is one
        words = wait_for(lambda: _unit_reason(server, "LocalQueue default doesn't exist"), SETTLE_S, "Kueue to name the missing LocalQueue")
        assert words.startswith("kueue Workload llama-0") and "quota not reserved (Inadmissible)" in words
        server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(QUEUES))
    group = wait_for(lambda: _ready_group(server, 1), SETTLE_S, f"{backend} to place the group")
    pods = _pods(server)
    assert len(pods) == 4 and all(p["spec"].get("nodeName") for p in pods)
    for pod in pods:
        assert pod["spec"].get("schedulerName", "default-scheduler") == SCHEDULER_NAMES[backend]
        assert pod["metadata"]["labels"]["tandem.dev/backend"] == backend
        assert "kubernetes.io/hostname" not in (pod["spec"].get("nodeSelector") or {}), "the scheduler chose the node, not tandem"
        if backend == BUILT_IN:
            assert pod["spec"]["schedulingGroup"]["podGroupName"], "each pod names its PodGroup"
    gangs = _gang_objects(server, backend)
    if backend == BUILT_IN:
        assert {g["kind"] for g in gangs} == {"Workload", "CompositePodGroup", "PodGroup"}, "a unit: a tree of CompositePodGroups over PodGroups"
    assert gangs and all(ref["uid"] == group["metadata"]["uid"] for g in gangs for ref in g["metadata"]["ownerReferences"])
    assert [p for g in gangs for p in schema_problems(_as_written(g))] == [], "valid against the upstream CRD"

    server.kubectl("scale", "ig", NAME, "-n", NS, "--replicas=4")
    waiting = wait_for(lambda: next((u for u in (_stored(server).get("status") or {}).get("units", []) if u["state"] == "Unschedulable"), None),
                       SETTLE_S, f"{backend} to refuse the unit that does not fit")
    assert backend in waiting["reason"], "the scheduler's own words, naming it"
    if backend == BUILT_IN:  # kube-scheduler's gang cycle judged it (its plain first fit writes no PodGroup status)
        said = {c["status"] for g in _gang_objects(server, backend) if g["kind"] == "PodGroup"
                for c in (g.get("status") or {}).get("conditions", []) if c["type"] == "PodGroupInitiallyScheduled"}
        assert said == {"True", "False"}, "the PodGroups placed say so, and those of the unit that waits too"
    described = server.kubectl("describe", "ig", NAME, "-n", NS).stdout
    assert "Unschedulable" in described and backend in described
    wait_for(lambda: (_stored(server).get("status") or {}).get("functionalUnits") == 3, SETTLE_S, "the three units that fit to be functional")

    # a template change is a rolling update: every replica replaced, for the same scheduler, the units kept functional
    server.kubectl("scale", "ig", NAME, "-n", NS, "--replicas=2")
    wait_for(lambda: _ready_group(server, 2), SETTLE_S, "two units, Ready")
    before = {p["metadata"]["labels"]["tandem.dev/revision"] for p in _pods(server)}
    patch = [{"op": "add", "path": "/spec/roles/0/template/metadata", "value": {"annotations": {"rollout": "2"}}}]
    server.kubectl("patch", "ig", NAME, "-n", NS, "--type=json", "-p", json.dumps(patch))
    lowest = [2]

    def rolled() -> bool:
        group = _stored(server)
        lowest[0] = min(lowest[0], (group.get("status") or {}).get("functionalUnits", 0))
        pods = _pods(server)
        revisions = {p["metadata"]["labels"]["tandem.dev/revision"] for p in pods}
        return _ready(group, 2) and len(pods) == 8 and not revisions & before and all(p["spec"].get("nodeName") for p in pods)

    try:
        wait_for(rolled, SETTLE_S, "the rolling update to replace every replica")
    except AssertionError:
        status = _stored(server).get("status") or {}
        pods = [(p["metadata"]["name"], p["metadata"]["labels"]["tandem.dev/revision"], p["spec"].get("nodeName"), p["metadata"].get("deletionTimestamp")) for p in _pods(server)]
        raise AssertionError(f"not rolled: {status.get('state')} {[(u['index'], u['state'], u.get('reason')) for u in status.get('units', [])]} {pods} before={before}")
    assert lowest[0] == 2, "no unit dropped below its minimums during the update (maxUnavailable 0, surge)"
    assert {p["spec"].get("schedulerName", "default-scheduler") for p in _pods(server)} == {SCHEDULER_NAMES[backend]}

    server.kubectl("delete", "ig", NAME, "-n", NS)
    wait_for(lambda: not _gang_objects(server, backend), SETTLE_S, "the gang objects to go with the group")
    wait_for(lambda: not _pods(server), SETTLE_S, "the pods to go with the group")
    assert not json.loads(server.kubectl("get", "configmaps,services", "-n", NS, "-l", f"tandem.dev/group={NAME}", "-o", "json").stdout)["items"]
    _stop(operator)
