"""CustomResourceDefinitions: registration, schema (prune, default, validate), versions, removal."""

from __future__ import annotations

import copy

from apiserver.helpers import IG, NS, TABLE, group

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"

SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1},
                "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                "count": {"x-kubernetes-int-or-string": True},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "parts": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string", "pattern": "^[a-z]+$"}}}},
            },
        },
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}, "ready": {"type": "string"}}},
    },
}


def widget_crd(**changes) -> dict:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "shortNames": ["wd"], "categories": ["all"]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": SCHEMA},
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.replicas"}},
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                        {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
                        {"name": "Ready", "type": "string", "jsonPath": ".status.ready"},
                    ],
                },
                {"name": "v1beta1", "served": True, "storage": False, "schema": {"openAPIV3Schema": SCHEMA}},
            ],
        },
    }
    crd["spec"].update(changes)
    return crd


def widget(name: str = "w", **spec) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": 1, **spec}}


def test_an_applied_crd_is_established_and_served_at_every_served_version(client):
    assert client.get(WIDGETS).code == 404
    created = client.post(CRDS, widget_crd())
    assert created.code == 201
    conditions = {c["type"]: c["status"] for c in created.body["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert created.body["status"]["acceptedNames"]["listKind"] == "WidgetList"
    group = next(g for g in client.get("/apis").body["groups"] if g["name"] == "example.com")
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"] and group["preferredVersion"]["version"] == "v1"
    resources = {r["name"]: r for r in client.get("/apis/example.com/v1").body["resources"]}
    assert resources["widgets"]["shortNames"] == ["wd"] and {"widgets/status", "widgets/scale"} <= set(resources)
    assert "widgets/scale" not in {r["name"] for r in client.get("/apis/example.com/v1beta1").body["resources"]}
    assert client.post(WIDGETS, widget()).code == 201
    assert client.get(WIDGETS.replace("/v1/", "/v1beta1/") + "/w").body["apiVersion"] == "example.com/v1beta1"


def test_custom_objects_are_pruned_defaulted_and_validated_with_field_paths(client):
    client.post(CRDS, widget_crd())
    stored = client.post(WIDGETS, widget(count="50%", extra={"any": {"thing": 1}}, unknown=True)).body
    assert stored["spec"] == {"size": 1, "color": "red", "count": "50%", "extra": {"any": {"thing": 1}}}, "pruned, defaulted"
    strict = client.post(WIDGETS + "?fieldValidation=Strict", widget("s", unknown=True))
    assert strict.code == 400 and 'unknown field "spec.unknown"' in strict.body["message"]
    warned = client.post(WIDGETS + "?fieldValidation=Warn", widget("v", unknown=True))
    assert warned.code == 201 and 'unknown field \\"spec.unknown\\"' in warned.headers["warning"]
    bad = client.post(WIDGETS, {**widget("b"), "spec": {"size": 0, "color": "green", "count": 1.5, "parts": [{"name": "OK"}]}})
    assert bad.code == 422 and bad.body["reason"] == "Invalid"
    fields = [c["field"] for c in bad.body["details"]["causes"]]
    assert fields == ["spec.color", "spec.count", "spec.parts[0].name", "spec.size"]
    assert bad.body["message"].startswith('Widget.example.com "b" is invalid: [spec.color: Unsupported value: "green"')
    missing = client.post(WIDGETS, {**widget("m"), "spec": {}})
    assert missing.code == 422 and missing.body["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.size"}
    ]
    update = client.patch(f"{WIDGETS}/w", {"spec": {"size": "big"}})
    assert update.code == 422 and client.get(f"{WIDGETS}/w").body["spec"]["size"] == 1


def test_tandems_own_crds_validate_inference_groups(client):
    bad = group()
    bad["spec"]["roles"][0]["replicas"] = "two"
    del bad["spec"]["roles"][0]["template"]
    reply = client.post(f"{IG}/namespaces/{NS}/inferencegroups", bad)
    assert reply.code == 422
    # A wrong type keeps the CEL rules from running; the real server says so in a cause of its own.
    assert [c["field"] for c in reply.body["details"]["causes"]] == ["spec.roles[0].replicas", "spec.roles[0].template", "<nil>"]


def test_printer_columns_make_the_table(client):
    client.post(CRDS, widget_crd())
    client.post(WIDGETS, widget(size=3))
    client.patch(f"{WIDGETS}/w/status", {"status": {"ready": "yes"}})
    table = client.get(WIDGETS, accept=TABLE).body
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [(c["name"], c["type"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", "string", 0), ("Size", "integer", 0), ("Color", "string", 1), ("Ready", "string", 0)]
    assert table["rows"][0]["cells"] == ["w", 3, "red", "yes"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata" and table["rows"][0]["object"]["metadata"]["name"] == "w"


def test_updating_a_crd_reregisters_and_deleting_it_removes_its_objects(client):
    created = client.post(CRDS, widget_crd()).body
    client.post(WIDGETS, widget())
    changed = copy.deepcopy(created)
    changed["spec"]["names"]["shortNames"] = ["wdg"]
    assert client.put(f"{CRDS}/widgets.example.com", changed).code == 200
    resources = {r["name"]: r for r in client.get("/apis/example.com/v1").body["resources"]}
    assert resources["widgets"]["shortNames"] == ["wdg"]
    scope = copy.deepcopy(client.get(f"{CRDS}/widgets.example.com").body)
    scope["spec"]["scope"] = "Cluster"
    refused = client.put(f"{CRDS}/widgets.example.com", scope)
    assert refused.code == 422 and refused.body["details"]["causes"][0]["field"] == "spec.scope"
    assert client.delete(f"{CRDS}/widgets.example.com").code == 200
    assert client.get(WIDGETS).code == 404
    assert "example.com" not in [g["name"] for g in client.get("/apis").body["groups"]]
    client.post(CRDS, widget_crd())
    assert client.get(WIDGETS).body["items"] == [], "its objects went with it"


def test_invalid_and_clashing_crds_are_refused(client):
    broken = widget_crd(scope="Everywhere", versions=[])
    reply = client.post(CRDS, broken)
    assert reply.code == 422 and {c["field"] for c in reply.body["details"]["causes"]} == {"spec.scope", "spec.versions"}
    assert client.post(CRDS, widget_crd()).code == 201
    clash = widget_crd()  # the same kind again in the same group, under another plural
    clash["metadata"]["name"] = "gizmos.example.com"
    clash["spec"]["names"].update(plural="gizmos", singular="gizmo", shortNames=["gz"])
    reply = client.post(CRDS, clash)
    assert reply.code == 422 and "already served by another resource in group example.com" in reply.body["message"]
    assert client.delete(f"{CRDS}/widgets.example.com").code == 200
    misnamed = widget_crd()
    misnamed["metadata"]["name"] = "gadgets.example.com"
    assert client.post(CRDS, misnamed).code == 422
    bad_schema = widget_crd()
    bad_schema["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {"type": "object", "properties": {"spec": {"type": "nonsense"}}}
    assert client.post(CRDS, bad_schema).code == 422
