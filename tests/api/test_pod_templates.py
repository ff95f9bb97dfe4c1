"""Pod templates against Kubernetes' PodTemplateSpec schema: unknown fields, enums and types
refused at their field paths, in `tandem validate`'s loader and the controller's (and so the
webhook's) validity check alike; what Kubernetes accepts (quantities and int-or-string as
numbers or strings, null for unset) accepted."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.builders import group, role
from tandem.api.loading import load_texts
from tandem.api.pod_templates import group_template_problems, template_problems
from tandem.controller import group_problems
from tandem.errors import InputError

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "src/tandem/api/schemas/pod_template_spec.json"
PATH = "spec.roles[0].template"


def lines(template: Any) -> list[str]:
    return [str(p) for p in template_problems(template, PATH)]


def engine(**fields: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "engine", "image": "vllm", **fields}]}}


def test_a_misspelt_field_is_refused_at_its_path():
    template = engine(resource={"requests": {"nvidia.com/gpu": 8}})
    assert lines(template) == [f"{PATH}.spec.containers[0].resource: unknown field"]
    template["spec"]["nodeSelecter"] = {"pool": "gpu"}
    template["metadata"] = {"label": {"a": "b"}}
    assert lines(template) == [
        f"{PATH}.metadata.label: unknown field",
        f"{PATH}.spec.containers[0].resource: unknown field",
        f"{PATH}.spec.nodeSelecter: unknown field",
    ]


@pytest.mark.parametrize(
    "where, value, said",
    [
        (("containers", 0, "imagePullPolicy"), "always", 'spec.containers[0].imagePullPolicy: unsupported value "always": supported values: "Always", "Never", "IfNotPresent"'),
        (("restartPolicy",), "Sometimes", 'spec.restartPolicy: unsupported value "Sometimes": supported values: "Always", "OnFailure", "Never"'),
        (("containers", 0, "ports"), [{"containerPort": 8000, "protocol": "HTTP"}],
         'spec.containers[0].ports[0].protocol: unsupported value "HTTP": supported values: "TCP", "UDP", "SCTP"'),
        (("tolerations",), [{"key": "gpu", "operator": "Exist"}],
         'spec.tolerations[0].operator: unsupported value "Exist": supported values: "Exists", "Equal", "Lt", "Gt"'),
    ],
)
def test_a_bad_enum_is_refused_with_the_allowed_values(where, value, said):
    template = engine()
    node = template["spec"]
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value
    assert lines(template) == [f"{PATH}.{said}"]


def test_wrong_types_are_refused_in_yaml_words():
    template = engine(ports=[{"containerPort": "8000"}], args="--tp 8")
    template["spec"]["hostNetwork"] = "yes"
    assert lines(template) == [
        f"{PATH}.spec.containers[0].args: must be a list, got a string",
        f"{PATH}.spec.containers[0].ports[0].containerPort: must be an integer, got a string",
        f"{PATH}.spec.hostNetwork: must be a boolean, got a string",
    ]
    assert lines({"spec": {}}) == [f"{PATH}.spec.containers: required field is missing"]
    assert lines("engine") == [f"{PATH}: must be a mapping (an object), got a string"]


def test_what_kubernetes_accepts_is_accepted():
    template = engine(
        resources={"requests": {"nvidia.com/gpu": 8, "cpu": "500m", "memory": 1.5e9}, "limits": {"nvidia.com/gpu": "8"}},
        readinessProbe={"httpGet": {"port": "http", "path": "/health"}},
        livenessProbe={"tcpSocket": {"port": 8000}},
        ports=[{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
        imagePullPolicy="IfNotPresent",
        env=[{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        securityContext=None,
    )
    template["metadata"] = {"labels": {"app": "x"}, "annotations": {"a": "b"}, "creationTimestamp": None}
    template["spec"].update({"nodeSelector": {"pool": "gpu"}, "tolerations": [{"operator": "Exists"}], "restartPolicy": None,
                             "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}]})
    assert lines(template) == []


def test_the_loader_refuses_a_group_with_a_bad_template_naming_file_and_path():
    bad = group("g", [role("prefill", 1, gpus=8), role("decode", 1, gpus=8)])
    bad["spec"]["roles"][1]["template"]["spec"]["containers"][0]["resource"] = {"requests": {"nvidia.com/gpu": 8}}
    bad["spec"]["roles"][1]["workerTemplate"] = {"spec": {"containers": [{"name": "w", "imagePullPolicy": "always"}]}}
    bad["spec"]["roles"][1]["podsPerReplica"] = 2
    with pytest.raises(InputError) as caught:
        load_texts([("g.yaml", json.dumps(bad))])
    assert [str(p) for p in caught.value.problems] == [
        "g.yaml: spec.roles[1].template.spec.containers[0].resource: unknown field",
        'g.yaml: spec.roles[1].workerTemplate.spec.containers[0].imagePullPolicy: unsupported value "always": '
        'supported values: "Always", "Never", "IfNotPresent"',
    ]


def test_a_field_both_checks_refuse_is_said_once():
    bad = group("g", [role("prefill", 1, gpus=8)])
    del bad["spec"]["roles"][0]["template"]["spec"]["containers"][0]["name"]
    typed, problems = group_problems(bad, {})
    assert typed is None
    assert [str(p) for p in problems] == ["spec.roles[0].template.spec.containers[0].name: required field is missing"]


def test_the_controller_and_so_the_webhook_make_the_same_check():
    bad = group("g", [role("prefill", 1, gpus=8, restartPolicy="Sometimes")])
    _, problems = group_problems(bad, {})
    assert 'spec.roles[0].template.spec.restartPolicy: unsupported value "Sometimes"' in "\n".join(map(str, problems))
    assert group_template_problems({"spec": {"roles": "x"}}) == [] and group_template_problems([]) == []


# --------------------------------------------------------------------------- property


_NAMES = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)
_container = st.fixed_dictionaries(
    {"name": _NAMES, "image": _NAMES},
    optional={
        "resources": st.fixed_dictionaries({}, optional={"requests": st.dictionaries(st.sampled_from(["cpu", "nvidia.com/gpu", "memory"]), st.integers(0, 64)),
                                                          "limits": st.dictionaries(st.sampled_from(["cpu", "nvidia.com/gpu"]), st.integers(0, 64).map(str))}),
        "ports": st.lists(st.fixed_dictionaries({"containerPort": st.integers(1, 65535)}, optional={"name": _NAMES, "protocol": st.sampled_from(["TCP", "UDP"])}), max_size=2),
        "env": st.lists(st.fixed_dictionaries({"name": _NAMES}, optional={"value": _NAMES}), max_size=2),
        "imagePullPolicy": st.sampled_from(["Always", "IfNotPresent", "Never"]),
        "readinessProbe": st.fixed_dictionaries({"httpGet": st.fixed_dictionaries({"port": st.one_of(st.integers(1, 65535), _NAMES)}, optional={"path": _NAMES})},
                                                optional={"periodSeconds": st.integers(1, 60)}),
        "securityContext": st.fixed_dictionaries({}, optional={"runAsNonRoot": st.booleans(), "capabilities": st.fixed_dictionaries({"drop": st.just(["ALL"])})}),
    },
)
_templates = st.fixed_dictionaries(
    {"spec": st.fixed_dictionaries(
        {"containers": st.lists(_container, min_size=1, max_size=2)},
        optional={"restartPolicy": st.sampled_from(["Always", "Never"]), "hostNetwork": st.booleans(),
                  "tolerations": st.lists(st.fixed_dictionaries({"key": _NAMES, "operator": st.just("Exists")}, optional={"effect": st.just("NoSchedule")}), max_size=2),
                  "terminationGracePeriodSeconds": st.integers(0, 600)})},
    optional={"metadata": st.fixed_dictionaries({}, optional={"labels": st.dictionaries(_NAMES, _NAMES, max_size=2)})},
)
_FREE_KEYS = ("labels", "annotations", "requests", "limits", "nodeSelector")  # maps whose keys are the user's


def _field_paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every field of a schema object in `node` (not the keys of free-form maps)."""
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            out.append((*path, key))
            if key not in _FREE_KEYS:
                out += _field_paths(value, (*path, key))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            out += _field_paths(item, (*path, i))
    return out


@settings(max_examples=150, deadline=None)
@given(_templates, st.data())
def test_any_template_with_one_field_name_mutated_is_refused_at_that_field(template, data):
    assert lines(template) == [], "the generated template is valid"
    where = data.draw(st.sampled_from(_field_paths(template)))
    mutated = copy.deepcopy(template)
    parent = mutated
    for step in where[:-1]:
        parent = parent[step]
    key = where[-1]
    wrong = data.draw(st.sampled_from([key + "s", key[:-1] + "_", key.upper(), "x" + key]))
    parent[wrong] = parent.pop(key)
    path = PATH + "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in (*where[:-1], wrong))
    found = lines(mutated)
    assert f"{path}: unknown field" in found, found


# --------------------------------------------------------------------------- provenance


@pytest.mark.skipif(importlib.util.find_spec("kubernetes_validate") is None, reason="kubernetes-validate (dev) is the schema's source")
def test_the_shipped_schema_is_kubernetes_own_with_enums_added():
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import pod_template_schema
    finally:
        sys.path.pop(0)
    shipped = json.loads(SCHEMA.read_text())
    assert "kubernetes-validate" in shipped["$comment"] and "kubernetes/api" in shipped["$comment"] and "Apache-2.0" in shipped["$comment"]

    def without_enums(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: without_enums(v) for k, v in node.items() if k != "enum"}
        return [without_enums(v) for v in node] if isinstance(node, list) else node

    assert without_enums(shipped["$defs"]) == pod_template_schema.structure("1.37.0")
    assert SCHEMA.stat().st_size < 64 * 1024, "only the closure of PodTemplateSpec, without descriptions"
