"""Create, get, list, update, delete over HTTP: versions, conflicts, selectors, Status errors."""

from __future__ import annotations

from apiserver.helpers import IG, NS, group, pod

PODS = f"/api/v1/namespaces/{NS}/pods"
GROUPS = f"{IG}/namespaces/{NS}/inferencegroups"


def test_create_get_list_and_delete_an_object(client):
    created = client.post(GROUPS, group())
    assert created.code == 201
    meta = created.body["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["generation"] == 1 and meta["creationTimestamp"].endswith("Z")
    got = client.get(f"{GROUPS}/g").body
    assert got["apiVersion"] == "tandem.dev/v1alpha1" and got["kind"] == "InferenceGroup" and got["metadata"] == meta
    listed = client.get(GROUPS).body
    assert listed["kind"] == "InferenceGroupList" and [i["metadata"]["name"] for i in listed["items"]] == ["g"]
    assert int(listed["metadata"]["resourceVersion"]) >= int(meta["resourceVersion"])
    assert client.get(f"{IG}/inferencegroups").body["items"][0]["metadata"]["namespace"] == NS  # across namespaces
    deleted = client.delete(f"{GROUPS}/g")
    assert deleted.code == 200 and deleted.body["status"] == "Success" and deleted.body["details"]["name"] == "g"
    missing = client.get(f"{GROUPS}/g")
    assert missing.code == 404
    assert missing.body == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "NotFound", "code": 404,
        "message": 'inferencegroups.tandem.dev "g" not found', "details": {"kind": "inferencegroups", "group": "tandem.dev", "name": "g"},
    }


def test_built_in_lists_carry_no_kind_on_items_and_deletes_answer_the_object(client):
    client.post(PODS, pod("p"))
    listed = client.get(PODS).body
    assert listed["kind"] == "PodList" and "kind" not in listed["items"][0]
    assert listed["items"][0]["status"] == {"phase": "Pending"}
    deleted = client.delete(f"{PODS}/p")
    assert deleted.code == 200 and deleted.body["kind"] == "Pod" and deleted.body["metadata"]["name"] == "p"


def test_a_stale_resource_version_conflicts_on_update_and_patch(client):
    first = client.post(GROUPS, group()).body
    stale = first["metadata"]["resourceVersion"]
    updated = client.put(f"{GROUPS}/g", {**first, "spec": {**first["spec"], "replicas": 2}})
    assert updated.code == 200 and updated.body["metadata"]["generation"] == 2
    again = client.put(f"{GROUPS}/g", {**first, "spec": {**first["spec"], "replicas": 3}})
    assert again.code == 409 and again.body["reason"] == "Conflict"
    assert again.body["message"].startswith('Operation cannot be fulfilled on inferencegroups.tandem.dev "g"')
    patched = client.patch(f"{GROUPS}/g", {"metadata": {"resourceVersion": stale}, "spec": {"replicas": 4}})
    assert patched.code == 409
    assert client.get(f"{GROUPS}/g").body["spec"]["replicas"] == 2


def test_a_write_that_changes_nothing_keeps_the_resource_version(client):
    created = client.post(GROUPS, group()).body
    same = client.patch(f"{GROUPS}/g", {"spec": {"replicas": 1}}).body
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_create_errors_already_exists_invalid_names_and_mismatched_namespaces(client):
    assert client.post(GROUPS, group()).code == 201
    exists = client.post(GROUPS, group())
    assert exists.code == 409 and exists.body["reason"] == "AlreadyExists"
    bad = client.post(PODS, pod("Not_A_Name"))
    assert bad.code == 422 and bad.body["details"]["causes"][0]["field"] == "metadata.name"
    elsewhere = client.post(PODS, pod("p", namespace="other"))
    assert elsewhere.code == 400 and "does not match the namespace" in elsewhere.body["message"]
    wrong_kind = client.post(PODS, group())
    assert wrong_kind.code == 400


def test_objects_in_a_missing_namespace_create_it_and_generate_name_names_them(client):
    reply = client.post("/api/v1/namespaces/fresh/configmaps", {"metadata": {"generateName": "cfg-"}, "data": {"a": "b"}})
    assert reply.code == 201
    name = reply.body["metadata"]["name"]
    assert name.startswith("cfg-") and len(name) == len("cfg-") + 5
    namespace = client.get("/api/v1/namespaces/fresh").body
    assert namespace["status"] == {"phase": "Active"}
    assert "default" in [n["metadata"]["name"] for n in client.get("/api/v1/namespaces").body["items"]]


def test_label_and_field_selectors_filter_lists(client):
    for name, labels in (("a", {"tandem.dev/group": "g", "role": "prefill"}), ("b", {"tandem.dev/group": "g", "role": "decode"}), ("c", {})):
        client.post(PODS, pod(name, labels=labels))
    names = lambda reply: [i["metadata"]["name"] for i in reply.body["items"]]  # noqa: E731
    assert names(client.get(f"{PODS}?labelSelector=tandem.dev/group%3Dg")) == ["a", "b"]
    assert names(client.get(f"{PODS}?labelSelector=role%20in%20(decode),tandem.dev/group")) == ["b"]
    assert names(client.get(f"{PODS}?labelSelector=!role")) == ["c"]
    assert names(client.get(f"{PODS}?fieldSelector=metadata.name%3Db")) == ["b"]
    assert names(client.get(f"{PODS}?fieldSelector=metadata.name!%3Db,status.phase%3DPending")) == ["a", "c"]
    bad = client.get(f"{PODS}?labelSelector=a%3D%3D%3Db")
    assert bad.code == 400 and bad.body["reason"] == "BadRequest"


def test_lists_page_with_limit_and_continue(client):
    for index in range(5):
        client.post(PODS, pod(f"p{index}"))
    first = client.get(f"{PODS}?limit=2").body
    assert len(first["items"]) == 2 and first["metadata"]["remainingItemCount"] == 3
    second = client.get(f"{PODS}?limit=2&continue={first['metadata']['continue']}").body
    third = client.get(f"{PODS}?limit=2&continue={second['metadata']['continue']}").body
    assert [i["metadata"]["name"] for i in first["items"] + second["items"] + third["items"]] == [f"p{i}" for i in range(5)]
    assert "continue" not in third["metadata"]
    again = client.get(f"{PODS}?limit=2&continue={first['metadata']['continue']}").body
    assert again["items"] == second["items"], "a token can be read again"
    assert client.get(f"{PODS}?limit=2&continue=forgotten").code == 410


def test_delete_preconditions_finalizers_and_cascades(client):
    owner = client.post(GROUPS, group()).body
    reference = {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "name": "g", "uid": owner["metadata"]["uid"]}
    dependent = pod("p")
    dependent["metadata"]["ownerReferences"] = [reference]
    client.post(PODS, dependent)
    wrong = client.delete(f"{GROUPS}/g", {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "nope"}})
    assert wrong.code == 409 and "Precondition failed" in wrong.body["message"]
    client.patch(f"{GROUPS}/g", {"metadata": {"finalizers": ["tandem.dev/hold"]}})
    held = client.delete(f"{GROUPS}/g", {"propagationPolicy": "Background"})
    assert held.code == 200 and held.body["metadata"]["deletionTimestamp"]
    assert client.get(f"{PODS}/p").code == 200
    client.patch(f"{GROUPS}/g", {"metadata": {"finalizers": None}})
    assert client.get(f"{GROUPS}/g").code == 404
    assert client.get(f"{PODS}/p").code == 404, "dependents go with their owner"


def test_an_object_created_for_an_owner_already_gone_is_collected(client):
    owner = client.post(GROUPS, group()).body
    reference = {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "name": "g", "uid": owner["metadata"]["uid"]}
    client.delete(f"{GROUPS}/g")
    late = pod("late")  # a controller's write that raced the deletion of its owner
    late["metadata"]["ownerReferences"] = [reference]
    assert client.post(PODS, late).code == 201
    assert client.get(f"{PODS}/late").code == 404, "collected, as the garbage collector would"
    client.post(GROUPS, group())  # the same name again, another uid
    assert client.post(PODS, late).code == 201 and client.get(f"{PODS}/late").code == 404, "an owner is its uid, not its name"
    kept = pod("kept")
    kept["metadata"]["ownerReferences"] = [{**reference, "uid": client.get(f"{GROUPS}/g").body["metadata"]["uid"]}]
    assert client.post(PODS, kept).code == 201 and client.get(f"{PODS}/kept").code == 200


def test_delete_collection_and_dry_run(client):
    for name in ("a", "b", "c"):
        client.post(PODS, pod(name, labels={"x": "1"} if name != "c" else {}))
    dry = client.post(f"{PODS}?dryRun=All", pod("d"))
    assert dry.code == 201 and client.get(f"{PODS}/d").code == 404
    gone = client.delete(f"{PODS}?labelSelector=x%3D1")
    assert gone.code == 200 and [i["metadata"]["name"] for i in gone.body["items"]] == ["a", "b"]
    assert [i["metadata"]["name"] for i in client.get(PODS).body["items"]] == ["c"]


def test_namespace_deletion_takes_its_objects(client):
    client.post(PODS, pod("p"))
    client.post(GROUPS, group())
    assert client.delete(f"/api/v1/namespaces/{NS}").code == 200
    assert client.get(PODS).body["items"] == [] and client.get(GROUPS).body["items"] == []


def test_pods_are_immutable_but_for_gates_and_binding_goes_through_the_subresource(client):
    client.post(PODS, pod("p", gated=True))
    changed = client.patch(f"{PODS}/p", {"spec": {"containers": [{"name": "engine", "image": "other"}]}})
    assert changed.code == 422 and changed.body["reason"] == "Invalid"
    gated = client.post(f"{PODS}/p/binding", {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n-000"}})
    assert gated.code == 409
    client.patch(f"{PODS}/p", [{"op": "remove", "path": "/spec/schedulingGates"}], kind="json-patch")
    bound = client.post(f"{PODS}/p/binding", {"target": {"kind": "Node", "name": "n-000"}})
    assert bound.code == 201 and client.get(f"{PODS}/p").body["spec"]["nodeName"] == "n-000"


def test_a_service_gets_a_cluster_ip_on_this_machine_and_a_headless_one_none(client):
    """Every address the server hands out is in 127.0.0.0/8: a client that connects stays here."""
    services = f"/api/v1/namespaces/{NS}/services"
    plain = client.post(services, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "plain"}, "spec": {"ports": [{"port": 80}]}}).body
    assert plain["spec"]["clusterIP"].startswith("127.30.") and plain["spec"]["clusterIPs"] == [plain["spec"]["clusterIP"]]
    headless = client.post(services, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "headless"}, "spec": {"clusterIP": "None"}}).body
    assert headless["spec"]["clusterIP"] == "None"
