"""Pods are checked as a Kubernetes API server checks them: a bad enum or type is a 422
naming the field, an unknown field is pruned with a warning (or refused, strictly)."""

from __future__ import annotations

from apiserver.helpers import NS, pod

PODS = f"/api/v1/namespaces/{NS}/pods"


def test_a_bad_enum_or_type_fails_the_create_naming_the_field(client):
    bad = pod("p")
    bad["spec"]["containers"][0]["imagePullPolicy"] = "always"
    bad["spec"]["restartPolicy"] = "Sometimes"
    bad["spec"]["hostNetwork"] = "yes"
    refused = client.post(PODS, bad)
    assert refused.code == 422 and refused.body["reason"] == "Invalid"
    causes = {c["field"]: (c["reason"], c["message"]) for c in refused.body["details"]["causes"]}
    assert causes == {
        "spec.containers[0].imagePullPolicy": ("FieldValueNotSupported", 'unsupported value "always": supported values: "Always", "Never", "IfNotPresent"'),
        "spec.hostNetwork": ("FieldValueTypeInvalid", "must be a boolean, got a string"),
        "spec.restartPolicy": ("FieldValueNotSupported", 'unsupported value "Sometimes": supported values: "Always", "OnFailure", "Never"'),
    }
    assert client.get(f"{PODS}/p").code == 404, "nothing stored"


def test_an_unknown_field_is_pruned_with_a_warning_or_refused_strictly(client):
    typo = pod("p")
    typo["spec"]["containers"][0]["resource"] = {"requests": {"nvidia.com/gpu": "8"}}
    strict = client.post(PODS + "?fieldValidation=Strict", typo)
    assert strict.code == 400
    assert strict.body["message"] == 'Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.containers[0].resource"'
    created = client.post(PODS, typo)
    assert created.code == 201 and created.warnings == ['unknown field "spec.containers[0].resource"']
    assert "resource" not in created.body["spec"]["containers"][0], "pruned, as a real server drops what it does not know"
    assert client.post(PODS, pod("q", gpus=8)).code == 201 and client.post(PODS, pod("q2", gated=True, node="n-000")).warnings == []
