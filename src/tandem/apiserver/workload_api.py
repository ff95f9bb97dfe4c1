"""The Kubernetes Workload API served as kube-apiserver 1.37 serves it with its alpha gates on
(`tandem apiserver --workload-api`): `scheduling.k8s.io/v1alpha3` Workloads, CompositePodGroups
and PodGroups, namespaced, the last two with a status subresource (KEP-4671; types in
kubernetes/api scheduling/v1alpha3).

It is built into kube-apiserver, not a CRD: a cluster enables it with
`--feature-gates=GenericWorkload=true,CompositePodGroup=true` and
`--runtime-config=scheduling.k8s.io/v1alpha3=true` (kube-scheduler with `GenericWorkload`
and `GangScheduling`), and the server must be restarted for it; here too it is fixed for the
server's life. The kinds are keyed `Kind.scheduling.k8s.io` in the store (Volcano, KAI and
Koordinator call theirs `PodGroup`, Kueue its `Workload`), as the operator names them
(`backends.delegated_kinds`).

A written object is checked as the real server decodes and validates a built-in kind:
against Kubernetes' own schema of the three kinds (`data/scheduling.k8s.io_v1alpha3.json`,
made by `tools/workload_api_schema.py` from kubernetes-validate, the source `tests/backends`
checks rendered objects with): an unknown field is pruned with a warning (refused under
`fieldValidation=Strict`), a wrong type, a missing required field, a value not allowed is a
422 naming the field. Status is dropped on create. Not imitated: the hand-written validation
beyond the schema (exactly one of `basic`/`gang`, positive counts, immutable fields),
defaulting, the table columns (Name and Age shown).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator

from tandem.api.pod_templates import validator_findings
from tandem.apiserver.kinds import Registry, Resource
from tandem.apiserver.pod_checks import refuse_or_prune

GROUP, VERSION = "scheduling.k8s.io", "v1alpha3"
SCHEMA_FILE = "data/scheduling.k8s.io_v1alpha3.json"
_DEFINITION = "io.k8s.api.scheduling.v1alpha3."
# How each finding of the schema is refused (an unknown field is pruned or refused by `refuse_or_prune`).
REASONS = {"enum": "FieldValueNotSupported", "type": "FieldValueTypeInvalid", "required": "FieldValueRequired", "other": "FieldValueInvalid"}

RESOURCES = (
    Resource(GROUP, VERSION, "workloads", "Workload", True, "workload", qualified_key=True, definition=_DEFINITION + "Workload"),
    Resource(GROUP, VERSION, "compositepodgroups", "CompositePodGroup", True, "compositepodgroup", status=True, qualified_key=True,
             definition=_DEFINITION + "CompositePodGroup"),
    Resource(GROUP, VERSION, "podgroups", "PodGroup", True, "podgroup", status=True, qualified_key=True, definition=_DEFINITION + "PodGroup"),
)


def serve(registry: Registry) -> None:
    """Serve the Workload API (before anything is stored: a CRD of a kind of the same name
    served later is keyed qualified too, `Registry.replace_crd`)."""
    for resource in RESOURCES:
        registry.add(resource)


@cache
def _validator(definition: str) -> Draft202012Validator:
    """One kind's schema, read once per process (immutable package data)."""
    document = json.loads(resources.files("tandem.apiserver").joinpath(SCHEMA_FILE).read_text())
    return Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": document["$defs"]})


def check(resource: Resource, obj: dict[str, Any], mode: str) -> list[str]:
    """Prune `obj` (in place) or refuse it (InvalidObject, BadRequest) by its kind's schema;
    the warnings to answer. `metadata` is the server's own business, checked elsewhere."""
    body = {key: value for key, value in obj.items() if key != "metadata"}
    found = validator_findings(_validator(resource.definition), body)
    warnings = refuse_or_prune(resource, obj, body, "", found, mode, REASONS)
    for key in [k for k in obj if k != "metadata" and k not in body]:
        del obj[key]  # a top-level field pruned from `body`
    return warnings
