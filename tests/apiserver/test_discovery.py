"""Discovery, version, health and the OpenAPI documents kubectl reads before it acts."""

from __future__ import annotations

from apiserver.helpers import Client


def _resources(client: Client, path: str) -> dict[str, dict]:
    reply = client.get(path)
    assert reply.code == 200 and reply.body["kind"] == "APIResourceList"
    return {r["name"]: r for r in reply.body["resources"]}


def test_version_health_and_core_api(client):
    version = client.get("/version").body
    assert (version["major"], version["minor"]) == ("1", "32") and version["gitVersion"].startswith("v1.32.")
    for path in ("/healthz", "/readyz", "/livez"):
        assert client.get(path).body == "ok"
    api = client.get("/api").body
    assert api["kind"] == "APIVersions" and api["versions"] == ["v1"]


def test_core_resources_name_their_verbs_scope_short_names_and_subresources(client):
    core = _resources(client, "/api/v1")
    assert {"pods", "nodes", "namespaces", "services", "configmaps", "events", "endpoints"} <= set(core)
    assert core["pods"]["namespaced"] and core["pods"]["kind"] == "Pod" and core["pods"]["shortNames"] == ["po"]
    assert set(core["pods"]["verbs"]) == {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
    assert not core["nodes"]["namespaced"] and not core["namespaces"]["namespaced"]
    assert core["pods/status"]["verbs"] == ["get", "patch", "update"] and core["pods/binding"]["verbs"] == ["create"]


def test_groups_list_the_built_in_ones_and_every_crds(client):
    groups = {g["name"]: g for g in client.get("/apis").body["groups"]}
    assert {"apiextensions.k8s.io", "coordination.k8s.io", "tandem.dev"} <= set(groups)
    assert groups["tandem.dev"]["preferredVersion"]["groupVersion"] == "tandem.dev/v1alpha1"
    assert client.get("/apis/tandem.dev").body["kind"] == "APIGroup"
    tandem = _resources(client, "/apis/tandem.dev/v1alpha1")
    assert tandem["inferencegroups"]["shortNames"] == ["ig"] and tandem["inferencegroups"]["categories"] == ["tandem"]
    assert not tandem["clustertopologies"]["namespaced"]
    scale = tandem["inferencegroups/scale"]
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    assert tandem["clustertopologies/status"]["kind"] == "ClusterTopology"  # the topology controller writes it
    assert _resources(client, "/apis/coordination.k8s.io/v1")["leases"]["namespaced"]
    assert client.get("/apis/nothing.example.com/v1").code == 404


def test_openapi_v3_says_every_kind_takes_field_validation_and_v2_is_empty(client):
    root = client.get("/openapi/v3").body["paths"]
    assert {"api/v1", "apis/tandem.dev/v1alpha1", "apis/apiextensions.k8s.io/v1"} <= set(root)
    document = client.get(root["apis/tandem.dev/v1alpha1"]["serverRelativeURL"]).body
    patch = document["paths"]["/apis/tandem.dev/v1alpha1/namespaces/{namespace}/inferencegroups/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "tandem.dev", "version": "v1alpha1", "kind": "InferenceGroup"}
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    assert "dev.tandem.v1alpha1.InferenceGroup" in document["components"]["schemas"]
    v2 = client.get("/openapi/v2", accept="application/com.github.proto-openapi.spec.v2@v1.0+protobuf", raw=True)
    assert v2.code == 200 and v2.body == b"\n\x032.0" and "protobuf" in v2.headers["content-type"]


def test_unknown_paths_are_404_statuses(client):
    for path in ("/api/v1/widgets", "/apis/tandem.dev/v1alpha1/namespaces/x/inferencegroups/a/b/c", "/nope"):
        reply = client.get(path)
        assert reply.code == 404 and reply.body["kind"] == "Status" and reply.body["reason"] == "NotFound"


def test_it_serves_every_kind_deploy_installs(client):
    """`kubectl apply -k deploy/` needs each of these mapped and stored (issue 25, item 10)."""
    served = {(group, r["kind"]) for group, version in [("", "v1"), ("apps", "v1"), ("rbac.authorization.k8s.io", "v1"), ("policy", "v1"),
                                                       ("networking.k8s.io", "v1"), ("scheduling.k8s.io", "v1")]
              for r in _resources(client, f"/api/{version}" if not group else f"/apis/{group}/{version}").values() if "/" not in r["name"]}
    assert {("", "ServiceAccount"), ("", "Secret"), ("apps", "Deployment"), ("rbac.authorization.k8s.io", "ClusterRole"),
            ("rbac.authorization.k8s.io", "ClusterRoleBinding"), ("rbac.authorization.k8s.io", "Role"), ("rbac.authorization.k8s.io", "RoleBinding"),
            ("policy", "PodDisruptionBudget"), ("networking.k8s.io", "NetworkPolicy"), ("scheduling.k8s.io", "PriorityClass")} <= served
    apps = _resources(client, "/apis/apps/v1")
    assert apps["deployments/scale"]["kind"] == "Scale" and apps["deployments"]["shortNames"] == ["deploy"]
    assert not _resources(client, "/apis/scheduling.k8s.io/v1")["priorityclasses"]["namespaced"]
