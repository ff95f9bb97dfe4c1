"""A Pod written to the server is checked as a Kubernetes API server checks it: its spec
against Kubernetes' PodSpec schema (the one `tandem validate` and the webhook check pod
templates with, `api/pod_templates.py`).

In a cluster, a pod made from a template with a bad enum (`imagePullPolicy: always`) or a
wrong type fails its create (422, the field named), and a field Kubernetes does not know
is dropped (with a warning) or, under `fieldValidation=Strict`, refused (400): so here
too, so that what a group's bad template does is what a cluster does. Only those three:
the server does not re-implement the rest of Kubernetes' pod validation.
"""

from __future__ import annotations

from typing import Any

from tandem.api.pod_templates import POD_SPEC, Finding, findings
from tandem.apiserver.error_status import InvalidObject
from tandem.apiserver.kinds import Resource
from tandem.apiserver.schema import Cause
from tandem.errors import BadRequest

_REASONS = {"enum": "FieldValueNotSupported", "type": "FieldValueTypeInvalid"}


def check_pod(resource: Resource, obj: dict[str, Any], mode: str) -> list[str]:
    """Refuse (InvalidObject, BadRequest) or prune `obj` in place; the warnings to answer."""
    spec = obj.get("spec")
    found = findings(spec, POD_SPEC)
    unknown = [f for f in found if f.kind == "unknown"]
    if unknown and mode == "Strict":
        fields = ", ".join(f'unknown field "{f.path("spec")}"' for f in unknown)
        raise BadRequest(f'{resource.kind} in version "{resource.version}" cannot be handled as a {resource.kind}: strict decoding error: {fields}')
    for finding in sorted(unknown, key=lambda f: len(f.steps), reverse=True):
        _prune(spec, finding)
    causes = [Cause(f.path("spec"), _REASONS[f.kind], f.message) for f in found if f.kind in _REASONS]
    if causes:
        raise InvalidObject(resource, (obj.get("metadata") or {}).get("name", ""), causes)
    return [f'unknown field "{f.path("spec")}"' for f in unknown] if mode == "Warn" else []


def _prune(node: Any, finding: Finding) -> None:
    for step in finding.steps[:-1]:
        node = node[step]
    node.pop(finding.steps[-1], None)
