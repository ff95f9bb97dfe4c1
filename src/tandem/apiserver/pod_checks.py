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
    return refuse_or_prune(resource, obj, spec, "spec", findings(spec, POD_SPEC), mode, _REASONS)


def refuse_or_prune(
    resource: Resource, obj: dict[str, Any], checked: Any, prefix: str, found: list[Finding], mode: str, reasons: dict[str, str],
) -> list[str]:
    """What the server does with the schema's `found` in `checked` (`obj`, or its part at
    `prefix`): unknown fields refused under `Strict`, else pruned (in place; the warnings
    to answer under `Warn`); findings of the kinds in `reasons` refused, 422, each field named."""

    def where(finding: Finding) -> str:
        return finding.path(prefix).lstrip(".")

    unknown = [f for f in found if f.kind == "unknown"]
    if unknown and mode == "Strict":
        fields = ", ".join(f'unknown field "{where(f)}"' for f in unknown)
        raise BadRequest(f'{resource.kind} in version "{resource.version}" cannot be handled as a {resource.kind}: strict decoding error: {fields}')
    for finding in sorted(unknown, key=lambda f: len(f.steps), reverse=True):
        _prune(checked, finding)
    causes = [Cause(where(f), reasons[f.kind], f.message) for f in found if f.kind in reasons]
    if causes:
        raise InvalidObject(resource, (obj.get("metadata") or {}).get("name", ""), causes)
    return [f'unknown field "{where(f)}"' for f in unknown] if mode == "Warn" else []


def _prune(node: Any, finding: Finding) -> None:
    for step in finding.steps[:-1]:
        node = node[step]
    node.pop(finding.steps[-1], None)
