"""Merge, strategic merge and JSON patches: the functions, then over HTTP."""

from __future__ import annotations

import pytest

from apiserver.helpers import IG, NS, group, pod
from tandem.api.merge import merge_patch
from tandem.apiserver.patches import json_patch, strategic_merge
from tandem.errors import Invalid

PODS = f"/api/v1/namespaces/{NS}/pods"


def test_merge_patch_merges_maps_deletes_nulls_and_replaces_lists():
    target = {"a": {"b": 1, "c": 2}, "l": [1, 2], "k": "v"}
    assert merge_patch(target, {"a": {"b": None, "d": 3}, "l": [3], "k": None}) == {"a": {"c": 2, "d": 3}, "l": [3]}
    assert target == {"a": {"b": 1, "c": 2}, "l": [1, 2], "k": "v"}, "the target is not changed"


def test_strategic_merge_merges_lists_by_their_kubernetes_keys():
    spec = {"containers": [{"name": "a", "image": "x", "env": [{"name": "E", "value": "1"}]}, {"name": "b", "image": "y"}],
            "tolerations": [{"key": "t"}]}
    patch = {"containers": [{"name": "a", "env": [{"name": "F", "value": "2"}]}, {"name": "c", "image": "z"}], "tolerations": [{"key": "u"}]}
    out = strategic_merge(spec, patch)
    assert out["containers"] == [
        {"name": "a", "image": "x", "env": [{"name": "E", "value": "1"}, {"name": "F", "value": "2"}]},
        {"name": "b", "image": "y"},
        {"name": "c", "image": "z"},
    ]
    assert out["tolerations"] == [{"key": "u"}], "a list without a merge key is replaced"


def test_strategic_merge_directives_kubectl_sends():
    target = {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}], "finalizers": ["x", "y"], "labels": {"k": "v", "j": "w"},
              "strategy": {"type": "A", "rollingUpdate": {"max": 1}}}
    out = strategic_merge(target, {
        "containers": [{"name": "b", "$patch": "delete"}],
        "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}],
        "$deleteFromPrimitiveList/finalizers": ["x"],
        "finalizers": ["z"],
        "labels": {"$patch": "replace", "n": "1"},
        "strategy": {"$retainKeys": ["type"], "type": "B"},
    })
    assert out == {"containers": [{"name": "c"}, {"name": "a"}], "finalizers": ["y", "z"], "labels": {"n": "1"}, "strategy": {"type": "B"}}
    assert strategic_merge({"ports": [{"port": 80, "name": "http"}]}, {"ports": [{"port": 80, "protocol": "TCP"}]}) == {
        "ports": [{"port": 80, "name": "http", "protocol": "TCP"}]
    }


def test_json_patch_operations_and_a_failed_test():
    doc = {"a": [1, 2], "b": {"c": 1}}
    out = json_patch(doc, [
        {"op": "add", "path": "/a/-", "value": 3},
        {"op": "replace", "path": "/b/c", "value": 2},
        {"op": "copy", "from": "/b", "path": "/d"},
        {"op": "move", "from": "/a/0", "path": "/e"},
        {"op": "remove", "path": "/b"},
        {"op": "add", "path": "/f~1g", "value": True},
        {"op": "test", "path": "/e", "value": 1},
    ])
    assert out == {"a": [2, 3], "d": {"c": 2}, "e": 1, "f/g": True} and doc == {"a": [1, 2], "b": {"c": 1}}
    with pytest.raises(Invalid):
        json_patch(doc, [{"op": "test", "path": "/a/0", "value": 9}])
    with pytest.raises(Invalid):
        json_patch(doc, [{"op": "remove", "path": "/nope"}])


def test_strategic_patch_of_a_pod_over_http_and_its_refusal_for_custom_resources(client):
    client.post(PODS, pod("p", labels={"a": "1"}))
    out = client.patch(f"{PODS}/p", {"metadata": {"labels": {"b": "2"}, "finalizers": ["f"]}}, kind="strategic-merge-patch")
    assert out.code == 200 and out.body["metadata"]["labels"] == {"a": "1", "b": "2"} and out.body["metadata"]["finalizers"] == ["f"]
    out = client.patch(f"{PODS}/p", {"metadata": {"$deleteFromPrimitiveList/finalizers": ["f"]}}, kind="strategic-merge-patch")
    assert out.code == 200 and out.body["metadata"].get("finalizers") == []
    client.post(f"{IG}/namespaces/{NS}/inferencegroups", group())
    refused = client.patch(f"{IG}/namespaces/{NS}/inferencegroups/g", {"spec": {"replicas": 2}}, kind="strategic-merge-patch")
    assert refused.code == 415 and refused.body["reason"] == "UnsupportedMediaType"
    unknown = client.call("PATCH", f"{PODS}/p", {}, content_type="text/plain")
    assert unknown.code == 415


def test_json_patch_over_http_and_server_side_apply_approximation(client):
    client.post(f"{IG}/namespaces/{NS}/inferencegroups", group())
    path = f"{IG}/namespaces/{NS}/inferencegroups/g"
    out = client.patch(path, [{"op": "replace", "path": "/spec/replicas", "value": 3}], kind="json-patch")
    assert out.code == 200 and out.body["spec"]["replicas"] == 3 and out.body["metadata"]["generation"] == 2
    applied = client.call("PATCH", f"{IG}/namespaces/{NS}/inferencegroups/h?fieldManager=me", group("h"), content_type="application/apply-patch+yaml")
    assert applied.code == 201 and applied.body["metadata"]["name"] == "h"


def test_strategic_merge_of_webhooks_merges_by_name():
    """kubectl sends a changed webhook as `{name, changed fields}`: it is merged into the webhook of
    that name (patchMergeKey `name`), not put in place of the list (issue 25, item 10)."""
    current = {"webhooks": [
        {"name": "a.tandem.dev", "clientConfig": {"service": {"name": "s"}, "caBundle": "Q0E="}, "sideEffects": "None", "timeoutSeconds": 5},
        {"name": "b.tandem.dev", "sideEffects": "None"},
    ]}
    out = strategic_merge(current, {"$setElementOrder/webhooks": [{"name": "a.tandem.dev"}, {"name": "b.tandem.dev"}],
                                    "webhooks": [{"name": "a.tandem.dev", "timeoutSeconds": 7}]})
    assert out["webhooks"] == [
        {"name": "a.tandem.dev", "clientConfig": {"service": {"name": "s"}, "caBundle": "Q0E="}, "sideEffects": "None", "timeoutSeconds": 7},
        {"name": "b.tandem.dev", "sideEffects": "None"},
    ]


def test_a_webhook_configuration_patched_by_kubectl_apply_keeps_what_the_patch_does_not_name(client):
    path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    webhook = {"name": "validate.tandem.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None", "timeoutSeconds": 5,
               "clientConfig": {"url": "https://127.0.0.1:9/validate"},
               "rules": [{"apiGroups": ["tandem.dev"], "apiVersions": ["v1alpha1"], "operations": ["CREATE"], "resources": ["inferencegroups"]}]}
    assert client.post(path, {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                              "metadata": {"name": "tandem-operator"}, "webhooks": [webhook]}).code == 201
    out = client.patch(f"{path}/tandem-operator", {"webhooks": [{"name": "validate.tandem.dev", "timeoutSeconds": 7}]}, kind="strategic-merge-patch")
    assert out.code == 200, out.body
    assert out.body["webhooks"][0]["timeoutSeconds"] == 7 and out.body["webhooks"][0]["clientConfig"] == {"url": "https://127.0.0.1:9/validate"}
