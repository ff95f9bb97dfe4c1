"""The generated CRDs (`tandem crds`): structural, in step with the models and the examples, fresh in deploy/crds.

The schemas are checked two ways: against Kubernetes' structural-schema rules (a checker of
the rules that matter here, below), and by validating objects with `jsonschema` after
turning the OpenAPI v3 subset into JSON Schema (`_json_schema`): every example validates,
and objects tandem's loader refuses are refused by the schema too.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import pytest
import yaml

from backends.schemas import LATEST_KUBE, builtin_validator
from tandem.api import crds as crds_module
from tandem.api.crds import DESCRIPTIONS, REGENERATE, crds, file_name, render
from tandem.api.group_status import AutoscalerMemory, AutoscalingStatus, Condition, CoordinationMemory, InferenceGroupStatus
from tandem.api.group_status import RecommendationMemory, RoleStatus, UnitStatus
from tandem.api.loading import load_texts
from tandem.api.topology_status import ClusterTopologyStatus, LevelStatus
from tandem.errors import InputError

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "crds"
EXAMPLES = REPO / "examples"
API_VERSION = "tandem.dev/v1alpha1"
TYPES = {"object", "array", "string", "integer", "number", "boolean"}
# JSONSchemaProps fields a v1 CRD may not use, or may not use here.
FORBIDDEN = {"$ref", "definitions", "$defs", "id", "$schema", "patternProperties", "dependencies", "additionalItems",
             "uniqueItems", "oneOf", "allOf", "not", "title", "const", "nullable"}
JUNCTOR_FORBIDDEN = {"description", "type", "default", "additionalProperties", "nullable"}


@pytest.fixture(scope="module")
def generated() -> dict[str, dict[str, Any]]:
    return {crd["spec"]["names"]["kind"]: crd for crd in crds()}


def openapi(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


# ----------------------------------------------------------------------------- structural rules


def structural_problems(node: dict[str, Any], path: str = "") -> Iterator[str]:
    """Kubernetes' structural-schema rules (and v1 CRD restrictions) that a generator could break."""
    for key in sorted(set(node) & FORBIDDEN):
        yield f"{path or '<root>'}: {key} is not allowed"
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    if "type" in node and node["type"] not in TYPES:
        yield f"{path}: unknown type {node['type']!r}"
    if "type" not in node and not (int_or_string or preserve):
        yield f"{path or '<root>'}: no type"
    if int_or_string and ("type" in node or node.get("anyOf") != [{"type": "integer"}, {"type": "string"}]):
        yield f"{path}: int-or-string must be exactly anyOf [integer, string] without a type"
    for branch in node.get("anyOf", []):
        if not int_or_string and set(branch) & JUNCTOR_FORBIDDEN:
            yield f"{path}: {sorted(set(branch) & JUNCTOR_FORBIDDEN)} inside anyOf"
    if "properties" in node and "additionalProperties" in node:
        yield f"{path}: properties and additionalProperties together"
    if "additionalProperties" in node and not isinstance(node["additionalProperties"], dict):
        yield f"{path}: additionalProperties must be a schema"
    if preserve and path not in {"spec.roles[*].template", "spec.roles[*].workerTemplate"}:
        yield f"{path}: preserves unknown fields (only pod templates may)"
    for bound in ("exclusiveMinimum", "exclusiveMaximum"):
        if bound in node and not isinstance(node[bound], bool):
            yield f"{path}: {bound} must be OpenAPI 3.0's boolean"
    if node.get("format") in {"int32", "int64"} and node.get("type") != "integer":
        yield f"{path}: integer format on a {node.get('type')}"
    for required in node.get("required", []):
        if required not in node.get("properties", {}):
            yield f"{path}: required {required!r} is not a property"
    if node.get("x-kubernetes-list-type") == "map":
        items = node.get("items", {})
        for key in node.get("x-kubernetes-list-map-keys", []):
            if key not in items.get("required", []) and "default" not in items.get("properties", {}).get(key, {}):
                yield f"{path}: list-map key {key!r} is neither required nor defaulted"
            if items.get("properties", {}).get(key, {}).get("type") not in {"string", "integer"}:
                yield f"{path}: list-map key {key!r} is not a scalar"
    if "default" in node and list(_validator(node).iter_errors(node["default"])):
        yield f"{path}: default {node['default']!r} does not validate"
    for name, sub in node.get("properties", {}).items():
        where = f"{path}.{name}" if path else name
        if path == "" and name == "metadata":
            if sub != {"type": "object"}:
                yield "metadata: only `type: object` (the API server owns metadata)"
            continue
        if not sub.get("description"):
            yield f"{where}: no description"
        yield from structural_problems(sub, where)
    if isinstance(node.get("additionalProperties"), dict):
        yield from structural_problems(node["additionalProperties"], f"{path}.*")
    if "items" in node:
        yield from structural_problems(node["items"], f"{path}[*]")


@pytest.mark.parametrize("kind", ["ClusterTopology", "InferenceGroup"])
def test_the_schemas_are_structural(generated: dict[str, dict[str, Any]], kind: str) -> None:
    problems = list(structural_problems(openapi(generated[kind])))
    assert not problems, "\n".join(problems)


def test_the_checker_finds_what_it_should() -> None:
    bad = {
        "type": "object",
        "properties": {
            "a": {"description": "x", "anyOf": [{"type": "string"}, {"type": "null"}]},
            "b": {"description": "x", "$ref": "#/$defs/B"},
            "c": {"type": "integer", "exclusiveMinimum": 0},
            "d": {"description": "x", "type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    text = "\n".join(structural_problems(bad))
    for phrase in ("a: no type", "$ref is not allowed", "c: no description", "exclusiveMinimum must be", "d: preserves unknown"):
        assert phrase in text, text


@pytest.mark.parametrize("kind", ["ClusterTopology", "InferenceGroup"])
def test_the_crd_objects_are_valid_apiextensions_v1(generated: dict[str, dict[str, Any]], kind: str) -> None:
    """The CRD object itself, against Kubernetes' own (strict) schema of CustomResourceDefinition."""
    validator = builtin_validator("apiextensions.k8s.io/v1", "CustomResourceDefinition", LATEST_KUBE)
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(generated[kind])]
    assert not errors, "\n".join(errors)


def test_names_scope_subresources_and_columns(generated: dict[str, dict[str, Any]]) -> None:
    group, topology = generated["InferenceGroup"], generated["ClusterTopology"]
    assert group["metadata"]["name"] == "inferencegroups.tandem.dev"
    assert group["spec"]["names"] == {
        "kind": "InferenceGroup", "listKind": "InferenceGroupList", "plural": "inferencegroups",
        "singular": "inferencegroup", "shortNames": ["ig"], "categories": ["tandem"],
    }
    assert topology["spec"]["names"]["shortNames"] == ["ctopo"] and topology["spec"]["names"]["plural"] == "clustertopologies"
    assert (group["spec"]["scope"], topology["spec"]["scope"]) == ("Namespaced", "Cluster")
    (version,) = group["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {
        "status": {},
        "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"},
    }
    (topology_version,) = topology["spec"]["versions"]
    assert topology_version["subresources"] == {"status": {}}, "the topology controller writes the status, through /status only"
    assert [(c["name"], c["type"], c["jsonPath"]) for c in topology_version["additionalPrinterColumns"]] == [
        ("Levels", "string", ".status.levelNames"),
        ("Domains", "string", ".status.domainCounts"),
        ("Nodes", "integer", ".status.nodes"),
        ("Unlabeled", "integer", ".status.unlabeledNodes"),
        ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
        ("Age", "date", ".metadata.creationTimestamp"),
    ]
    columns = {c["name"]: (c["type"], c["jsonPath"], c.get("priority", 0)) for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Status": ("string", ".status.state", 0),
        "Units": ("integer", ".spec.replicas", 0),
        "Functional": ("integer", ".status.functionalUnits", 0),
        "Available": ("string", '.status.conditions[?(@.type=="Available")].status', 0),
        "Age": ("date", ".metadata.creationTimestamp", 0),
        "Ready": ("string", ".status.ready", 1),  # -o wide: per role ready/desired, the revision, why
        "Revision": ("string", ".status.revision", 1),
        "Message": ("string", ".status.message", 1),
    }
    assert list(columns)[-3:] == ["Ready", "Revision", "Message"], "the wide columns after Age, the message last"
    # the scale subresource's paths point at integers and a string
    schema = openapi(group)["properties"]
    assert schema["spec"]["properties"]["replicas"]["type"] == "integer"
    assert schema["status"]["properties"]["replicas"]["type"] == "integer"
    assert schema["status"]["properties"]["selector"]["type"] == "string"


def test_field_local_rules_become_schema_keywords(generated: dict[str, dict[str, Any]]) -> None:
    spec = openapi(generated["InferenceGroup"])["properties"]["spec"]["properties"]
    role = spec["roles"]["items"]["properties"]
    assert role["name"]["pattern"] == "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" and role["name"]["maxLength"] == 63
    assert role["template"] == {"description": role["template"]["description"], "type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert spec["roles"]["x-kubernetes-list-type"] == "map" and spec["roles"]["x-kubernetes-list-map-keys"] == ["name"]
    assert (spec["roles"]["minItems"], spec["roles"]["maxItems"]) == (1, 32)
    assert (spec["replicas"]["minimum"], spec["replicas"]["maximum"], spec["replicas"]["format"]) == (0, 2**31 - 1, "int32")
    skew = spec["coordination"]["properties"]["scaling"]["properties"]["maxSkew"]
    assert skew["x-kubernetes-int-or-string"] is True and skew["default"] == 1
    assert spec["scheduler"]["properties"]["backend"]["enum"] == ["native", "volcano", "koordinator", "kai", "kueue", "workload-api"]
    assert "minReplicas" not in role.get("required", [])  # Optional: absent, never null
    level = openapi(generated["ClusterTopology"])["properties"]["spec"]["properties"]["levels"]["items"]["properties"]
    assert level["linkBandwidthGbps"] == {**level["linkBandwidthGbps"], "minimum": 0, "exclusiveMinimum": True, "type": "number"}
    status = openapi(generated["InferenceGroup"])["properties"]["status"]["properties"]
    assert status["conditions"]["items"]["properties"]["lastTransitionTime"]["format"] == "date-time"


# ----------------------------------------------------------------------------- validating objects


def _json_schema(node: Any) -> Any:
    """The CRD's OpenAPI v3 subset as JSON Schema 2020-12, as strict as `kubectl apply --validate=strict`:
    unknown fields are errors except under x-kubernetes-preserve-unknown-fields."""
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if not k.startswith("x-kubernetes-")}
    for bound, inclusive in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if out.pop(bound, False) is True:
            out[bound] = out.pop(inclusive)
    if out.pop("nullable", False):
        out["type"] = [out["type"], "null"]
    if "properties" in out:
        out["properties"] = {name: _json_schema(sub) for name, sub in out["properties"].items()}
        if not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _json_schema(out[key])
    return out


def _validator(node: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(_json_schema(node), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


@pytest.fixture(scope="module")
def validators(generated: dict[str, dict[str, Any]]) -> dict[str, jsonschema.Draft202012Validator]:
    out = {}
    for kind, crd in generated.items():
        schema = copy.deepcopy(openapi(crd))
        schema["properties"]["apiVersion"]["enum"] = [API_VERSION]
        schema["properties"]["kind"]["enum"] = [kind]
        schema["required"] = [*schema["required"], "apiVersion", "kind", "metadata"]
        out[kind] = _validator(schema)
    return out


def schema_errors(validators: dict[str, jsonschema.Draft202012Validator], obj: dict[str, Any]) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validators[obj["kind"]].iter_errors(obj)]


def _tandem_objects(value: Any) -> Iterator[dict[str, Any]]:
    """Every InferenceGroup and ClusterTopology in a document, also those inlined in a scenario."""
    if isinstance(value, dict):
        if value.get("apiVersion") == API_VERSION and value.get("kind") in {"InferenceGroup", "ClusterTopology"} and "metadata" in value:
            yield value  # (a reference to one, an HPA's scaleTargetRef, has no metadata)
        for sub in value.values():
            yield from _tandem_objects(sub)
    elif isinstance(value, list):
        for sub in value:
            yield from _tandem_objects(sub)


def _examples() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text(encoding="utf-8"))):
            for obj in _tandem_objects(doc):
                found.append((f"{path.relative_to(REPO)}#{index}:{obj['kind']}/{obj['metadata']['name']}", obj))
    return found


EXAMPLE_OBJECTS = _examples()


def test_the_examples_hold_both_kinds_and_inlined_groups() -> None:
    kinds = {obj["kind"] for _, obj in EXAMPLE_OBJECTS}
    assert kinds == {"InferenceGroup", "ClusterTopology"}
    assert any("scenarios" in name for name, _ in EXAMPLE_OBJECTS)
    assert len(EXAMPLE_OBJECTS) >= 8


@pytest.mark.parametrize("name, obj", EXAMPLE_OBJECTS, ids=[name for name, _ in EXAMPLE_OBJECTS])
def test_every_example_validates(validators: dict[str, jsonschema.Draft202012Validator], name: str, obj: dict[str, Any]) -> None:
    errors = schema_errors(validators, obj)
    assert not errors, "\n".join(errors)


def test_a_status_the_controller_writes_validates(validators: dict[str, jsonschema.Draft202012Validator]) -> None:
    """Every part of the typed status, dumped as the controller's merge patches dump it."""
    at = "2026-11-25T06:03:38.25Z"
    status = InferenceGroupStatus(
        observed_generation=3, revision="5c1e0a9b2f", replicas=2, functional_units=1, selector="tandem.dev/group=llm",
        conditions=[Condition(type="Available", status="True", reason="MinimumsReady", last_transition_time=at, observed_generation=3)],
        roles=[RoleStatus(name="prefill", replicas=4, scheduled_replicas=4, ready_replicas=3, updated_replicas=4)],
        units=[UnitStatus(index=0, state="Stalled", reason="step timed out", partial_since=at, releases=1, retry_after=at,
                          coordination=CoordinationMemory(mode="Rollout", start={"prefill": 0}, goal={"prefill": 4},
                                                          revision="5c1e0a9b2f", step={"prefill": 2}, step_started=at, stalls=1, retry_after=at))],
        autoscaling=AutoscalingStatus(last_decision_at=at, reason="FixedRatio", panic=True, desired={"prefill": 4},
                                      state=AutoscalerMemory(history=[RecommendationMemory(at=at, values={"prefill": 4})],
                                                             panic_until={"total": at}, last_change_at=at)),
    )
    group = {**EXAMPLE_GROUP, "status": status.model_dump(by_alias=True, exclude_none=True, mode="json")}
    assert schema_errors(validators, group) == []
    group["status"]["units"][0]["state"] = "Lost"
    assert [e.split(":")[0] for e in schema_errors(validators, group)] == ["status.units.0.state"]


def test_a_topology_status_the_controller_writes_validates(generated: dict[str, dict[str, Any]],
                                                            validators: dict[str, jsonschema.Draft202012Validator]) -> None:
    """Every part of the typed ClusterTopology status, dumped as a merge patch dumps it; no
    default anywhere under status (a server filling one in would make every pass see a change)."""
    at = "2026-11-27T06:03:38Z"
    status = ClusterTopologyStatus(
        observed_generation=2, nodes=5, placeable_nodes=4, unlabeled_nodes=1, unlabeled_examples=["n-4"],
        levels=[LevelStatus(name="rack", node_label="network.tandem.dev/rack", domains=2, nodes=4, unlabeled_nodes=1, unlabeled_examples=["n-4"])],
        level_names="rack", domain_counts="2", backends=["volcano"], used_by=["serving/llm"], used_by_count=1,
        conditions=[Condition(type="Ready", status="True", reason="UpToDate", last_transition_time=at, observed_generation=2)],
    )
    topology = {"apiVersion": API_VERSION, "kind": "ClusterTopology", "metadata": {"name": "default"},
                "spec": {"levels": [{"name": "rack", "nodeLabel": "network.tandem.dev/rack"}]},
                "status": status.model_dump(by_alias=True, exclude_none=True, mode="json")}
    assert schema_errors(validators, topology) == []
    topology["status"]["levels"][0]["domains"] = -1
    assert [e.split(":")[0] for e in schema_errors(validators, topology)] == ["status.levels.0.domains"]
    status_schema = openapi(generated["ClusterTopology"])["properties"]["status"]
    def keywords(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, sub in node.items():
                yield key
                yield from keywords(sub) if key != "properties" else (k for v in sub.values() for k in keywords(v))

    assert "default" not in set(keywords(status_schema)), "no defaults under status"
    properties = status_schema["properties"]
    assert (properties["levels"]["x-kubernetes-list-type"], properties["levels"]["x-kubernetes-list-map-keys"]) == ("map", ["name"])
    assert (properties["conditions"]["x-kubernetes-list-type"], properties["conditions"]["x-kubernetes-list-map-keys"]) == ("map", ["type"])
    levels = openapi(generated["ClusterTopology"])["properties"]["spec"]["properties"]["levels"]
    assert (levels["x-kubernetes-list-type"], levels["x-kubernetes-list-map-keys"], levels["maxItems"]) == ("map", ["name"], 16)


EXAMPLE_GROUP: dict[str, Any] = {
    "apiVersion": API_VERSION,
    "kind": "InferenceGroup",
    "metadata": {"name": "llm", "namespace": "serving"},
    "spec": {
        "replicas": 2,
        "topology": {"pack": {"required": "block"}},
        "roles": [
            {"name": "prefill", "replicas": 4, "minReplicas": 1, "template": {"spec": {"containers": [{"name": "e", "resources": {"requests": {"cpu": 0.5}}}]}}},
            {"name": "decode", "replicas": 2, "podsPerReplica": 2, "template": {"spec": {"containers": [{"name": "e"}]}},
             "workerTemplate": {"spec": {"containers": [{"name": "w"}]}}},
        ],
        "affinity": [{"from": "prefill", "to": "decode", "level": "rack"}],
        "coordination": {"scaling": {"maxSkew": "25%"}, "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "007%"}},
        "autoscaling": {"policy": "SLO", "roles": {"prefill": {"maxReplicas": 8}, "decode": {"minReplicas": 1, "maxReplicas": 4}},
                        "slo": {"ttftSeconds": 1, "itlSeconds": 0.05, "prefillTokensPerSecondPerReplica": 9000,
                                "decodeTokensPerSecondPerReplica": 3000}},
    },
}


def _set(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node: Any = out
    for part in parents:
        node = node[part]
    node[last] = value
    return out


def test_the_example_group_is_valid_for_both(validators: dict[str, jsonschema.Draft202012Validator]) -> None:
    assert schema_errors(validators, EXAMPLE_GROUP) == []
    load_texts([("g.json", json.dumps(EXAMPLE_GROUP))])


@pytest.mark.parametrize(
    "path, value",
    [
        ("spec.replicas", -1),
        ("spec.replicas", "3"),
        ("spec.replicas", 1.5),
        ("spec.replicas", 2**31),
        ("spec.priority", True),
        ("spec.scheduler", {"backend": "slurm"}),
        ("spec.scheduler", {"provisioningClassName": "Atomic_Scale_Up"}),
        ("spec.affinity.0.mode", "Maybe"),
        ("spec.roles", []),
        ("spec.roles.0.name", "Prefill"),
        ("spec.roles.0.name", "p" * 64),
        ("spec.roles.0.podsPerReplica", 0),
        ("spec.roles.0.replica", 3),
        ("spec.roles.0.template", "not a template"),
        ("spec.topology.pack.required", "rack_1"),
        ("spec.topology.pack.bogus", "rack"),
        ("spec.coordination.scaling.maxSkew", "150%"),
        ("spec.coordination.scaling.maxSkew", "25"),
        ("spec.coordination.rollingUpdate.maxSurge", -1),
        ("spec.coordination.rollingUpdate.maxSurge", 1.5),
        ("spec.autoscaling.policy", "Magic"),
        ("spec.autoscaling.slo.ttftSeconds", 0),
        ("spec.autoscaling.panic", {"thresholdPercent": 100}),
        ("spec.autoscaling.stabilization", {"scaleDownSeconds": 3601}),
        ("spec.autoscaling.roles.prefill", {"maxReplicas": 0}),
        ("spec.autoscaling.preferredBand", {"targets": {"prefill": {"metric": "gpuTemperature", "value": 1}}}),
    ],
)
def test_invalid_groups_are_rejected_by_the_schema_and_the_loader(
    validators: dict[str, jsonschema.Draft202012Validator], path: str, value: Any
) -> None:
    bad = _set(EXAMPLE_GROUP, path, value)
    assert schema_errors(validators, bad), f"the schema accepts {path}={value!r}"
    with pytest.raises(InputError):
        load_texts([("g.json", json.dumps(bad))])


@pytest.mark.parametrize(
    "path, value",
    [
        ("spec.levels", []),
        ("spec.levels.0.name", "Block"),
        ("spec.levels.0.nodeLabel", "-bad/label"),
        ("spec.levels.0.linkBandwidthGbps", 0),
        ("spec.levels.0.linkBandwidthGbps", "fast"),
        ("spec.levels.0.extra", 1),
    ],
)
def test_invalid_topologies_are_rejected_by_the_schema_and_the_loader(
    validators: dict[str, jsonschema.Draft202012Validator], path: str, value: Any
) -> None:
    topology = {"apiVersion": API_VERSION, "kind": "ClusterTopology", "metadata": {"name": "default"},
                "spec": {"levels": [{"name": "block", "nodeLabel": "network.example.com/block", "linkBandwidthGbps": 200}]}}
    assert schema_errors(validators, topology) == []
    bad = _set(topology, path, value)
    assert schema_errors(validators, bad), f"the schema accepts {path}={value!r}"
    with pytest.raises(InputError):
        load_texts([("t.json", json.dumps(bad))])


@pytest.mark.parametrize("value", [0, 3, "0%", "5%", "05%", "100%"])
def test_int_or_percent_values_both_accept(validators: dict[str, jsonschema.Draft202012Validator], value: Any) -> None:
    good = _set(EXAMPLE_GROUP, "spec.coordination.rollingUpdate.maxSkew", value)
    assert schema_errors(validators, good) == []
    load_texts([("g.json", json.dumps(good))])


# ----------------------------------------------------------------------------- the generator's own guards


def test_a_field_without_a_description_stops_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    table = dict(DESCRIPTIONS)
    del table["Role.podsPerReplica"]
    monkeypatch.setattr(crds_module, "DESCRIPTIONS", table)
    with pytest.raises(ValueError, match="spec.roles\\[\\*\\].podsPerReplica: no description: add 'Role.podsPerReplica'"):
        crds()


def test_a_stale_description_stops_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crds_module, "DESCRIPTIONS", {**DESCRIPTIONS, "Role.gone": "a field the model lost"})
    with pytest.raises(ValueError, match="Role.gone"):
        crds()


def test_an_unmapped_validator_stops_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    table = {k: v for k, v in crds_module._VALIDATORS.items() if k.__name__ != "_label_key"}
    monkeypatch.setattr(crds_module, "_VALIDATORS", table)
    with pytest.raises(ValueError, match="levels\\[\\*\\].nodeLabel: no schema keywords for validator tandem.api.resources._label_key"):
        crds()


# ----------------------------------------------------------------------------- files and the command


def test_deploy_crds_are_fresh() -> None:
    objects = crds()
    expected = {file_name(crd): render([crd]) for crd in objects}
    present = {path.name for path in DEPLOY.glob("*.yaml") if path.name != "kustomization.yaml"}
    stale = sorted(name for name in expected if name not in present or (DEPLOY / name).read_text(encoding="utf-8") != expected[name])
    extra = sorted(present - set(expected))
    assert not stale and not extra, f"deploy/crds is stale ({', '.join(stale + extra)}): run `{REGENERATE}`"


def test_the_command_prints_both_crds(run_cli) -> None:
    result = run_cli("crds")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == render(crds())
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["metadata"]["name"] for d in docs] == ["clustertopologies.tandem.dev", "inferencegroups.tandem.dev"]
    assert result.stdout.startswith("# Generated") and "&id" not in result.stdout


def test_the_command_writes_the_deploy_files(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "new" / "crds"
    result = run_cli("crds", "--out", out)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr.strip() == f"wrote tandem.dev_clustertopologies.yaml, tandem.dev_inferencegroups.yaml to {out}"
    for path in DEPLOY.glob("tandem.dev_*.yaml"):  # the generated files (kustomization.yaml is written by hand)
        assert (out / path.name).read_bytes() == path.read_bytes()


def test_the_command_cannot_write(run_cli, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    result = run_cli("crds", "--out", blocker)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"error: --out: cannot write '{blocker}': File exists"]


def test_output_is_byte_identical_across_runs_and_processes(run_cli) -> None:
    first, second = run_cli("crds").stdout, run_cli("crds").stdout
    assert first == second
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run([sys.executable, "-m", "tandem.cli.main", "crds"], capture_output=True, text=True, env=env, check=True)
    assert other.stdout == first


def test_the_status_schema_has_no_defaults_so_the_server_stores_exactly_what_the_controller_wrote(generated: dict[str, dict[str, Any]]) -> None:
    status = openapi(generated["InferenceGroup"])["properties"]["status"]

    def defaults(node: Any, path: str) -> list[str]:
        if isinstance(node, dict):
            return ([path] if "default" in node else []) + [d for k, v in node.items() for d in defaults(v, f"{path}.{k}")]
        if isinstance(node, list):
            return [d for i, v in enumerate(node) for d in defaults(v, f"{path}[{i}]")]
        return []

    assert defaults(status, "status") == []
