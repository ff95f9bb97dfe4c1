"""The status explains itself, through the real kubectl (issue 25, items 3 and 5).

A group that cannot fit says why in `kubectl get ig -o wide` and `kubectl describe ig`,
without events or logs; a scale far beyond the cluster writes a handful of Warning
events, not one per unit; a Service already named like the group, not tandem's, makes
the group Degraded, with the reason, one Warning event and one warning log line.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tandem.topology.generate import generate_cluster
from e2e.processes import KUBECTL, NO_KUBECTL, ApiServer, start_apiserver, start_operator, wait_for

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)
NS = "serving"
SHAPE = [("block", 2), ("rack", 2), ("host", 12)]  # 48 nodes of 8 GPUs


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[ApiServer, Path]]:
    topology, nodes = generate_cluster(SHAPE, 8)
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    (tmp_path / "topology.yaml").write_text(yaml.safe_dump(topology))
    server = start_apiserver(tmp_path, "--cluster", str(tmp_path / "nodes.yaml"), "--no-crds", "--ready-after", "0.2")
    try:
        server.kubectl("apply", "-k", "deploy/crds")
        server.kubectl("apply", "-f", str(tmp_path / "topology.yaml"))
        yield server, tmp_path
    finally:
        assert server.stop() == 0


def _group(name: str, *, replicas: int, per_unit: int, required: str) -> str:
    """One role of 8-GPU single-pod replicas, `per_unit` of them per unit inside one `required` domain."""
    return yaml.safe_dump({
        "apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "metadata": {"name": name, "namespace": NS},
        "spec": {"topologyName": "default", "replicas": replicas, "topology": {"pack": {"required": required}},
                 "roles": [{"name": "prefill", "replicas": per_unit, "minReplicas": per_unit,
                            "template": {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0",
                                                                  "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}}]},
    })


def _status(server: ApiServer, name: str) -> dict[str, Any]:
    return server.get(f"/apis/tandem.dev/v1alpha1/namespaces/{NS}/inferencegroups/{name}").get("status") or {}


def _pods(server: ApiServer, name: str) -> list[dict[str, Any]]:
    return server.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=tandem.dev%2Fgroup%3D{name}")["items"]


def _warnings(server: ApiServer, name: str) -> list[dict[str, Any]]:
    events = json.loads(server.kubectl("get", "events", "-n", NS, "--field-selector", "type=Warning", "-o", "json").stdout)["items"]
    return [e for e in events if e["involvedObject"]["name"] == name]


def test_a_group_that_cannot_fit_shows_why_in_get_wide_and_describe(world):
    server, work = world
    operator = start_operator(server, work, "solo")
    # 14 pods of 8 GPUs inside one rack of 12 nodes: never fits, so no pod is made (controller/fit.py)
    server.kubectl("apply", "-f", "-", stdin=_group("too-big", replicas=1, per_unit=14, required="rack"))
    wait_for(lambda: _status(server, "too-big").get("observedGeneration"), 30, "its status")
    assert _pods(server, "too-big") == []
    wait_for(lambda: any(c["type"] == "Scheduled" and c["status"] == "False" and c.get("message")
                         for c in _status(server, "too-big").get("conditions") or []), 10, "a Scheduled condition that says why")
    table = server.kubectl("get", "ig", "-n", NS).stdout.splitlines()
    assert table[0].split() == ["NAME", "STATUS", "UNITS", "FUNCTIONAL", "AVAILABLE", "AGE"]
    assert table[1].split()[:5] == ["too-big", "Unschedulable", "1", "0", "False"]
    wide = server.kubectl("get", "ig", "-n", NS, "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "STATUS", "UNITS", "FUNCTIONAL", "AVAILABLE", "AGE", "READY", "REVISION", "MESSAGE"]
    row = wide[1]
    assert "prefill 0/14" in row and "in one rack; the largest rack offers 96" in row, row  # the shortfall, on the row
    described = server.kubectl("describe", "ig", "too-big", "-n", NS).stdout
    status = _status(server, "too-big")
    scheduled = next(c for c in status["conditions"] if c["type"] == "Scheduled")
    assert scheduled["reason"] == "NeverFits" and "in one rack" in scheduled["message"]
    assert scheduled["message"] in " ".join(described.split()), "describe shows the reason"
    assert status["units"][0]["state"] == "Unschedulable" and status["units"][0]["reason"]
    operator.process.terminate()
    assert operator.process.wait(timeout=15) == 0


def test_a_scale_far_beyond_the_cluster_writes_a_bounded_number_of_warning_events(world):
    server, work = world
    operator = start_operator(server, work, "solo")
    server.kubectl("apply", "-f", "-", stdin=_group("wide", replicas=1, per_unit=1, required="host"))
    wait_for(lambda: _status(server, "wide").get("functionalUnits") == 1, 30, "the first unit to be functional")
    server.kubectl("scale", "ig", "wide", "-n", NS, "--replicas=300")
    wait_for(lambda: sum(1 for p in _pods(server, "wide") if p["spec"].get("nodeName")) == 48 and len(_pods(server, "wide")) == 300, 90,
             "300 pods, 48 of them bound (48 nodes)")
    wait_for(lambda: _warnings(server, "wide"), 10, "a Warning event")
    time.sleep(2.0)  # more passes: their events too
    warnings = _warnings(server, "wide")
    assert 1 <= len(warnings) <= 10, f"{len(warnings)} Warning events"
    assert (_status(server, "wide").get("unitStates") or {}).get("Unschedulable") == 252
    assert all(len(e["message"]) <= 1024 for e in warnings)
    assert any(e["reason"] == "Unschedulable" and e["message"].startswith("units ") for e in warnings)
    lines = [line for line in operator.log().splitlines() if "Unschedulable" in line]
    assert len(lines) <= 10, f"{len(lines)} log lines about Unschedulable units"
    operator.process.terminate()
    assert operator.process.wait(timeout=15) == 0


def test_a_service_named_like_the_group_makes_it_degraded_with_one_warning(world):
    server, work = world
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump({  # someone else's Service, with the name the group will want
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "taken", "namespace": NS},
        "spec": {"selector": {"app": "legacy"}, "ports": [{"port": 80, "targetPort": 8080}]}}))
    operator = start_operator(server, work, "solo")
    server.kubectl("apply", "-f", "-", stdin=_group("taken", replicas=1, per_unit=1, required="host"))
    wait_for(lambda: _status(server, "taken").get("functionalUnits") == 1, 30, "its pods to run all the same")
    wait_for(lambda: any(c["type"] == "Degraded" and c["status"] == "True" for c in _status(server, "taken")["conditions"]), 10,
             "the group to say it is Degraded")
    degraded = next(c for c in _status(server, "taken")["conditions"] if c["type"] == "Degraded")
    assert degraded["status"] == "True" and degraded["reason"] == "ServiceNameTaken"
    assert "Service serving/taken exists and is not this group's" in degraded["message"]
    assert "Degraded" in server.kubectl("get", "ig", "taken", "-n", NS).stdout
    server.kubectl("annotate", "ig", "taken", "-n", NS, "poke=1")  # more passes: still one event, one log line
    wait_for(lambda: _status(server, "taken").get("functionalUnits") == 1, 30, "a pass after the change")
    warnings = _warnings(server, "taken")
    assert [(e["reason"], e.get("count", 1)) for e in warnings] == [("ServiceNameTaken", 1)]
    said = [record for record in map(json.loads, operator.log().splitlines())
            if "ServiceNameTaken" in record["message"] and record["level"] != "info"]  # info: the condition turning, once
    assert len(said) == 1 and said[0]["level"] == "warning", said
    assert not [line for line in operator.log().splitlines() if "AlreadyExists" in line], "no create of a name that is taken"
    server.kubectl("delete", "service", "taken", "-n", NS)
    wait_for(lambda: next(c for c in _status(server, "taken")["conditions"] if c["type"] == "Degraded")["status"] == "False", 30,
             "Degraded to clear once the name is free")
    labels = json.loads(server.kubectl("get", "service", "taken", "-n", NS, "-o", "json").stdout)["metadata"]["labels"]
    assert labels == {"tandem.dev/group": "taken"}
    operator.process.terminate()
    assert operator.process.wait(timeout=15) == 0
