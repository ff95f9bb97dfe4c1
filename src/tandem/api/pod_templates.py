"""A group's pod templates checked against Kubernetes' own PodTemplateSpec schema.

tandem reads only a few fields of a template (`api/kube.py` ignores the rest, as it must
for `kubectl get -o yaml` output), so a misspelt field (`resource:` for `resources:`)
would otherwise pass and make a pod with no GPUs, and a bad enum (`imagePullPolicy:
always`) would pass and make every pod create fail later, the error only in a log. Each
template (`spec.roles[i].template`, `workerTemplate`) is checked against the schema in
`schemas/pod_template_spec.json` (Kubernetes' schema, its provenance in its `$comment`;
`tools/pod_template_schema.py` makes it): unknown fields, types and allowed values, one
`Problem` per finding, field path first, as the rest of validation says them. The local
API server checks a Pod's spec with the same schema (`findings(spec, POD_SPEC)`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator, ValidationError

from tandem.errors import Problem, key_path

TEMPLATE_FIELDS = ("template", "workerTemplate")
POD_SPEC = "io.k8s.api.core.v1.PodSpec"
_TYPE_WORDS = {
    "object": "a mapping (an object)",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
}


@dataclass(frozen=True)
class Finding:
    """One departure from the schema: where (steps from the checked object), what, and of
    which kind (`unknown`, `enum`, `type`, `required`, `other`): the local API server tells
    an unknown field (pruned, or refused under strict field validation) from the rest."""

    steps: tuple[str | int, ...]
    message: str
    kind: str

    def path(self, prefix: str) -> str:
        return prefix + "".join(f"[{step}]" if isinstance(step, int) else key_path(step) for step in self.steps)


@cache
def _validator(definition: str | None = None) -> Draft202012Validator:
    """The schema (or one of its definitions), read once per process (immutable package data)."""
    text = resources.files("tandem.api").joinpath("schemas/pod_template_spec.json").read_text()
    document = json.loads(text)
    if definition is not None:
        document = {"$ref": f"#/$defs/{definition}", "$defs": document["$defs"]}
    return Draft202012Validator(document)


def template_problems(template: Any, path: str) -> list[Problem]:
    """Every way `template` departs from PodTemplateSpec, at paths under `path`, sorted."""
    found = {Problem(f.path(path), f.message) for f in findings(template)}
    return sorted(found, key=lambda p: (p.path, p.message))


def findings(instance: Any, definition: str | None = None) -> list[Finding]:
    """Every way `instance` departs from PodTemplateSpec (or `definition`, e.g. `POD_SPEC`)."""
    return validator_findings(_validator(definition), instance)


def validator_findings(validator: Draft202012Validator, instance: Any) -> list[Finding]:
    """Every way `instance` departs from `validator`'s schema (one of Kubernetes' own, shaped as
    `schemas/pod_template_spec.json` is: the local API server checks the Workload API with it)."""
    out: list[Finding] = []
    for error in validator.iter_errors(instance):
        out += _findings(error)
    return sorted(set(out), key=lambda f: (f.path(""), f.message))


def group_template_problems(raw: Any) -> list[Problem]:
    """The pod templates of an InferenceGroup as written (a payload or a loaded document)."""
    spec = raw.get("spec") if isinstance(raw, dict) else None
    roles = spec.get("roles") if isinstance(spec, dict) else None
    if not isinstance(roles, list):
        return []
    problems: list[Problem] = []
    for index, role in enumerate(roles):
        if not isinstance(role, dict):
            continue
        for field in TEMPLATE_FIELDS:
            if role.get(field) is not None:
                problems += template_problems(role[field], f"spec.roles[{index}].{field}")
    return problems


def merged(model: list[Problem], templates: list[Problem]) -> list[Problem]:
    """The model's problems and the templates', one per path: where both speak of one field
    (a required container name, a list given as a string) the schema's words are kept."""
    said = {p.path for p in templates}
    return [p for p in model if p.path not in said] + templates


def _findings(error: ValidationError) -> list[Finding]:
    steps = tuple(error.absolute_path)
    instance, schema = error.instance, error.schema
    if error.validator == "additionalProperties" and isinstance(instance, dict) and isinstance(schema, dict):
        known = schema.get("properties") or {}
        return [Finding((*steps, str(key)), "unknown field", "unknown") for key in instance if key not in known]
    if error.validator == "enum":
        allowed = ", ".join(json.dumps(v) for v in error.validator_value if v is not None)
        return [Finding(steps, f"unsupported value {json.dumps(instance)}: supported values: {allowed}", "enum")]
    if error.validator == "type":
        wanted = [t for t in _listed(error.validator_value) if t != "null"]
        words = " or ".join(_TYPE_WORDS.get(t, t) for t in wanted)
        return [Finding(steps, f"must be {words}, got {_type_name(instance)}", "type")]
    if error.validator == "required":
        missing = [name for name in error.validator_value if isinstance(instance, dict) and name not in instance]
        return [Finding((*steps, name), "required field is missing", "required") for name in missing]
    return [Finding(steps, error.message, "other")]


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    names = {list: "a list", dict: "a mapping", str: "a string", int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)
