"""`tandem apiserver --workload-api`: the Workload API (`scheduling.k8s.io/v1alpha3`) served as
kube-apiserver 1.37 serves it with its alpha gates on, in discovery, checked against
Kubernetes' own schema, and placed by kube-scheduler's gang stand-in."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings

from apiserver.helpers import NS, Client, Clock, pod, small_cluster
from backends.schemas import SCHEMAS, SKIP_REASON
from backends.variants import load, typed
from support.fuzz import examples
from support.strategies import worlds
from tandem.apiserver import workload_api
from tandem.apiserver.kubelets import Kubelet
from tandem.apiserver.server import ApiServer
from tandem.backends.base import BackendOptions
from tandem.backends.workload_api import WorkloadApiBackend
from tandem.errors import BadRequest

REPO = Path(__file__).resolve().parents[2]
GV = "/apis/scheduling.k8s.io/v1alpha3"
API_VERSION = "scheduling.k8s.io/v1alpha3"
PODGROUPS = f"{GV}/namespaces/{NS}/podgroups"
PODS = f"/api/v1/namespaces/{NS}/pods"


@pytest.fixture
def served() -> Iterator[tuple[Client, Any, Any]]:
    """A server with the Workload API, its kubelet stepped by hand (the clock too)."""
    clock = Clock()
    with ApiServer(objects=small_cluster(racks=1, hosts=2, gpus=8), kubelet=False, clock=clock, workload_api=True) as server:
        kubelet = Kubelet(server.state, monotonic=clock)

        def step() -> float | None:
            with server.state.lock:
                return kubelet.step()

        yield Client(server.url), step, server.state


def _pod_group(name: str, min_count: int = 2, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, **spec}}


def test_discovery_lists_the_workload_api_only_on_a_server_started_with_it(served):
    client, _, _ = served
    (group,) = [g for g in client.get("/apis").body["groups"] if g["name"] == "scheduling.k8s.io"]
    assert [v["version"] for v in group["versions"]] == ["v1", "v1alpha3"] and group["preferredVersion"]["version"] == "v1", \
        "PriorityClass's v1 stays the preferred version, as on a real server"
    listed = {r["name"]: r for r in client.get(GV).body["resources"]}
    assert sorted(listed) == ["compositepodgroups", "compositepodgroups/status", "podgroups", "podgroups/status", "workloads"]
    assert all(r["namespaced"] for r in listed.values())
    assert {listed[n]["kind"] for n in ("workloads", "compositepodgroups", "podgroups")} == {"Workload", "CompositePodGroup", "PodGroup"}
    assert "watch" in listed["podgroups"]["verbs"] and listed["podgroups/status"]["verbs"] == ["get", "patch", "update"]
    assert "apis/scheduling.k8s.io/v1alpha3" in client.get("/openapi/v3").body["paths"], "kubectl apply finds its patch operations"

    with ApiServer(objects=small_cluster(), kubelet=False) as plain:
        other = Client(plain.url)
        assert other.get(GV).code == 404
        assert other.get(f"{GV}/namespaces/{NS}/workloads").code == 404, "a list fails: the operator's discovery finds it not served"


def test_objects_are_created_listed_watched_and_their_status_written_through_the_subresource(served):
    client, _, _ = served
    created = client.post(PODGROUPS, {**_pod_group("g-0"), "status": {"conditions": []}})
    assert created.code == 201, created.body
    assert "status" not in created.body, "status is the scheduler's: dropped on create"
    version = created.body["metadata"]["resourceVersion"]
    listed = client.get(PODGROUPS).body
    assert listed["kind"] == "PodGroupList" and [i["metadata"]["name"] for i in listed["items"]] == ["g-0"]

    condition = {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
    current = client.get(f"{PODGROUPS}/g-0").body
    assert client.put(f"{PODGROUPS}/g-0", {**current, "status": {"conditions": [condition]}}).body.get("status") is None, \
        "the main resource ignores status"
    current = client.get(f"{PODGROUPS}/g-0").body
    written = client.put(f"{PODGROUPS}/g-0/status", {**current, "status": {"conditions": [condition]}})
    assert written.code == 200 and written.body["status"]["conditions"][0]["reason"] == "Scheduled"
    events = client.watch(f"{PODGROUPS}?watch=true&resourceVersion={version}&timeoutSeconds=1")
    assert [(e["type"], e["object"]["status"]["conditions"][0]["type"]) for e in events] == [("MODIFIED", "PodGroupInitiallyScheduled")]

    assert client.delete(f"{PODGROUPS}/g-0").code == 200
    events = client.watch(f"{PODGROUPS}?watch=true&resourceVersion={written.body['metadata']['resourceVersion']}&timeoutSeconds=1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("DELETED", "g-0")]


def test_a_bad_object_is_refused_naming_the_field_and_an_unknown_field_pruned_or_refused(served):
    client, _, _ = served
    wrong_type = client.post(PODGROUPS, _pod_group("g", min_count="two"))  # type: ignore[arg-type]
    assert wrong_type.code == 422
    assert [(c["field"], c["reason"]) for c in wrong_type.body["details"]["causes"]] == [("spec.schedulingPolicy.gang.minCount", "FieldValueTypeInvalid")]
    assert wrong_type.body["details"]["group"] == "scheduling.k8s.io" and wrong_type.body["details"]["kind"] == "PodGroup"
    no_spec = client.post(f"{GV}/namespaces/{NS}/workloads", {"apiVersion": API_VERSION, "kind": "Workload", "metadata": {"name": "w"}})
    assert no_spec.code == 422 and no_spec.body["details"]["causes"][0]["field"] == "spec"
    no_key = client.post(PODGROUPS, _pod_group("g", schedulingConstraints={"topology": [{}]}))
    assert [c["field"] for c in no_key.body["details"]["causes"]] == ["spec.schedulingConstraints.topology[0].key"]

    typo = _pod_group("g")
    typo["spec"]["schedulingPolicy"]["gang"]["minCuont"] = 3
    warned = client.post(PODGROUPS, typo)
    assert warned.code == 201 and warned.warnings == ['unknown field "spec.schedulingPolicy.gang.minCuont"']
    assert warned.body["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    strict = client.post(f"{PODGROUPS}?fieldValidation=Strict", {**_pod_group("h"), "extra": 1})
    assert strict.code == 400 and 'unknown field "extra"' in strict.body["message"]

    patched = client.patch(f"{PODGROUPS}/g", {"spec": {"schedulingPolicy": {"gang": {"minCount": "3"}}}})
    assert patched.code == 422, "an update is checked as a create is"
    assert client.get(f"{PODGROUPS}/g").body["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2


def test_kube_schedulers_stand_in_places_a_composite_gang_of_served_objects_whole(served):
    client, step, _ = served
    composites = f"{GV}/namespaces/{NS}/compositepodgroups"
    unit = {"apiVersion": API_VERSION, "kind": "CompositePodGroup", "metadata": {"name": "unit"},
            "spec": {"workloadRef": {"workloadName": "w", "templateName": "unit"}, "schedulingPolicy": {"gang": {"minGroupCount": 2}}}}
    assert client.post(composites, unit).code == 201
    for name in ("a", "b"):
        assert client.post(PODGROUPS, _pod_group(name, parentCompositePodGroupName="unit")).code == 201
    for name in ("a-0", "a-1", "b-0"):  # b is one pod short: the whole unit waits, though two nodes fit a's two pods
        body = pod(name, gpus=8)
        body["spec"]["schedulingGroup"] = {"podGroupName": name[0]}
        assert client.post(PODS, body).code == 201, "Kubernetes 1.37's PodSpec has schedulingGroup"
    step()
    assert {n: client.get(f"{PODS}/{n}").body["spec"].get("nodeName") for n in ("a-0", "a-1", "b-0")} == dict.fromkeys(("a-0", "a-1", "b-0")), \
        "kube-scheduler's first fit leaves gang pods to the gang cycle"
    waiting = client.get(f"{PODGROUPS}/a").body["status"]["conditions"][0]
    assert (waiting["type"], waiting["status"], waiting["reason"]) == ("PodGroupInitiallyScheduled", "False", "Unschedulable")

    assert client.patch(f"{PODGROUPS}/b", {"spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}}).code == 200
    assert client.post("/api/v1/nodes", small_cluster(racks=1, hosts=3, gpus=8)[3]).code == 201
    step()
    bound = {n: client.get(f"{PODS}/{n}").body["spec"].get("nodeName") for n in ("a-0", "a-1", "b-0")}
    assert None not in bound.values() and len(set(bound.values())) == 3


@pytest.mark.skipif(not SCHEMAS.exists(), reason=SKIP_REASON)
def test_volcanos_pod_group_crd_and_the_built_in_pod_group_are_kept_apart(served):
    client, _, _ = served
    crd = yaml.safe_load((SCHEMAS / "volcano/scheduling.volcano.sh_podgroups.yaml").read_text(encoding="utf-8"))
    assert client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).code == 201
    assert client.post(PODGROUPS, _pod_group("same")).code == 201
    volcano = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "same"}, "spec": {"minMember": 1}}
    assert client.post(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups", volcano).code == 201
    assert [i["spec"] for i in client.get(PODGROUPS).body["items"]] == [_pod_group("same")["spec"]]
    assert [i["spec"]["minMember"] for i in client.get(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups").body["items"]] == [1]


def test_the_check_refuses_through_the_kinds_schema_without_touching_metadata():
    resource = workload_api.RESOURCES[2]
    obj = {**_pod_group("g"), "metadata": {"name": "g", "namespace": NS, "notMeta": 1}, "junk": {"a": 1}}
    assert workload_api.check(resource, obj, "Ignore") == []
    assert "junk" not in obj and obj["metadata"]["notMeta"] == 1, "metadata is checked by the server's own rules, not pruned here"
    with pytest.raises(BadRequest):
        workload_api.check(resource, {**_pod_group("g"), "junk": 1}, "Strict")


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(worlds(max_groups=1))
def test_every_object_tandem_renders_for_the_workload_api_is_accepted_unchanged(world: list[dict]) -> None:
    """What the operator writes must pass this server's check as it passes kubernetes-validate's
    (tests/backends): the two read one schema."""
    inputs = load(world)
    backend = WorkloadApiBackend(BackendOptions(workload_api_version="v1alpha3"))
    by_kind = {r.kind: r for r in workload_api.RESOURCES}
    for raw in (obj for obj in world if obj["kind"] == "InferenceGroup"):
        group = typed(raw)
        assume(not backend.validate(group, inputs.topologies.get("default")))
        for obj in backend.group_objects(group, inputs.topologies.get("default")):
            if obj["apiVersion"] != API_VERSION:
                continue
            checked = copy.deepcopy(obj)
            assert workload_api.check(by_kind[obj["kind"]], checked, "Strict") == []
            assert checked == obj


@pytest.mark.skipif(importlib.util.find_spec("kubernetes_validate") is None, reason="kubernetes-validate (dev) is the schema's source")
def test_the_shipped_schema_is_kubernetes_own():
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import workload_api_schema
    finally:
        sys.path.pop(0)
    shipped = json.loads((REPO / "src/tandem/apiserver" / workload_api.SCHEMA_FILE).read_text())
    assert "kubernetes-validate" in shipped["$comment"] and "Apache-2.0" in shipped["$comment"]
    assert shipped["$defs"] == workload_api_schema.structure("1.37.0")
    assert {r.definition for r in workload_api.RESOURCES} <= set(shipped["$defs"])
