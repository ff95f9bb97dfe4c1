"""Server-side printing: Tables for kubectl get, printer columns, JSONPath, ages."""

from __future__ import annotations

from apiserver.helpers import IG, NS, TABLE, group, pod
from tandem.apiserver.tables import evaluate, human_duration, wants_table


def test_inference_groups_print_their_crds_columns(client):
    client.post(f"{IG}/namespaces/{NS}/inferencegroups", group(replicas=3))
    stamp = "2026-01-01T00:00:00Z"
    conditions = [{"type": t, "status": s, "reason": "Test", "lastTransitionTime": stamp} for t, s in (("Scheduled", "True"), ("Available", "False"))]
    status = {"functionalUnits": 2, "conditions": conditions, "state": "Unschedulable", "ready": "prefill 2/6",
              "revision": "abc", "message": "unit 2: no rack has room"}
    reply = client.patch(f"{IG}/namespaces/{NS}/inferencegroups/g/status", {"status": status})
    assert reply.code == 200, reply.body
    table = client.get(f"{IG}/namespaces/{NS}/inferencegroups", accept=TABLE).body
    columns = ["Name", "Status", "Units", "Functional", "Available", "Age", "Ready", "Revision", "Message"]
    assert [c["name"] for c in table["columnDefinitions"]] == columns
    assert [c["priority"] for c in table["columnDefinitions"]][-3:] == [1, 1, 1], "-o wide"
    name, state, units, functional, available, age, ready, revision, message = table["rows"][0]["cells"]
    assert (name, state, units, functional, available) == ("g", "Unschedulable", 3, 2, "False") and age.endswith("s")
    assert (ready, revision, message) == ("prefill 2/6", "abc", "unit 2: no rack has room")
    one = client.get(f"{IG}/namespaces/{NS}/inferencegroups/g", accept=TABLE).body
    assert one["kind"] == "Table" and len(one["rows"]) == 1


def test_built_in_kinds_print_what_kubectl_users_expect(client):
    client.post(f"/api/v1/namespaces/{NS}/pods", pod("p", gated=True))
    pods = client.get(f"/api/v1/namespaces/{NS}/pods", accept=TABLE).body
    assert [c["name"] for c in pods["columnDefinitions"]] == ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node"]
    assert [c["priority"] for c in pods["columnDefinitions"]][-2:] == [1, 1]
    assert pods["rows"][0]["cells"][:4] == ["p", "0/1", "SchedulingGated", 0]
    nodes = client.get("/api/v1/nodes", accept=TABLE).body
    assert [row["cells"][:2] for row in nodes["rows"]] == [[f"n-00{i}", "Ready"] for i in range(4)]
    full = client.get("/api/v1/nodes?includeObject=Object", accept=TABLE).body
    assert full["rows"][0]["object"]["kind"] == "Node"


def test_tables_are_answered_only_when_asked_for():
    assert wants_table(TABLE) and wants_table("application/json;as=Table;g=meta.k8s.io;v=v1")
    assert not wants_table("application/json") and not wants_table("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")


def test_jsonpath_forms_printer_columns_use():
    obj = {"spec": {"replicas": 2, "levels": [{"name": "a"}, {"name": "b"}], "m": {"x.y": 1}},
           "status": {"conditions": [{"type": "Available", "status": "True"}, {"type": "Ready", "status": "False"}]}}
    assert evaluate(".spec.replicas", obj) == [2]
    assert evaluate(".spec.levels[0].name", obj) == ["a"] and evaluate(".spec.levels[-1:].name", obj) == ["b"]
    assert evaluate(".spec.levels[*].name", obj) == ["a", "b"] and evaluate("{.spec.levels[1].name}", obj) == ["b"]
    assert evaluate('.status.conditions[?(@.type=="Available")].status', obj) == ["True"]
    assert evaluate(".status.conditions[?(@.type!='Available')].type", obj) == ["Ready"]
    assert evaluate(".spec['m']['x.y']", obj) == [1]
    assert evaluate(".status.nothing", obj) == [] and evaluate(".spec.levels[7]", obj) == []


def test_ages_read_as_kubectl_prints_them():
    assert [human_duration(s) for s in (0, 59, 119, 120, 185, 600, 7200, 14700, 30 * 3600, 3 * 86400 + 3600, 400 * 86400)] == [
        "0s", "59s", "119s", "2m", "3m5s", "10m", "120m", "4h5m", "30h", "3d1h", "400d"]
