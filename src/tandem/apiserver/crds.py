"""A CustomResourceDefinition turned into the resources it serves, or refused with field paths.

What is read: group, names (plural, singular, kind, shortNames, categories), scope, and per
served version its schema (structural; `schema.py`) and its CEL rules (compiled here, once,
when the CRD is served; `cel.py`), status and scale subresources, and printer columns.
Versions share one stored kind (no conversion: objects are shown at the version asked for
with only `apiVersion` changed). A CRD whose plural, or whose kind, another resource of
its group already serves is refused; a kind another group serves is accepted, and the
store keys it `Kind.group` (`kinds.Registry.replace_crd`).
"""

from __future__ import annotations

import re
from typing import Any

from tandem.api.timestamps import rfc3339
from tandem.apiserver.cel import compile_rules
from tandem.apiserver.kinds import Column, Registry, Resource, ScalePaths
from tandem.apiserver.schema import Cause, Schema, check

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
COLUMN_TYPES = ("integer", "number", "string", "boolean", "date")


def resources_of(crd: dict[str, Any]) -> list[Resource]:
    """The resources a CRD serves, one per served version (check it with `problems` first)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, plural, kind = spec.get("group", ""), names.get("plural", ""), names.get("kind", "")
    out = []
    for index, version in enumerate(spec.get("versions") or []):
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        scale = subresources.get("scale")
        columns = version.get("additionalPrinterColumns")
        openapi = (version.get("schema") or {}).get("openAPIV3Schema")
        out.append(
            Resource(
                group=group,
                version=version.get("name", ""),
                plural=plural,
                kind=kind,
                namespaced=spec.get("scope") == "Namespaced",
                singular=names.get("singular") or kind.lower(),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status="status" in subresources,
                scale=ScalePaths(scale["specReplicasPath"], scale["statusReplicasPath"], scale.get("labelSelectorPath")) if scale else None,
                columns=tuple(
                    Column(c["name"], c["type"], c["jsonPath"], c.get("description", ""), int(c.get("priority") or 0), c.get("format", ""))
                    for c in columns
                )
                if columns
                else None,
                schema=Schema(openapi) if isinstance(openapi, dict) else None,
                rules=compile_rules(openapi, f"spec.versions[{index}].schema.openAPIV3Schema") if isinstance(openapi, dict) else None,
                crd=crd["metadata"]["name"],
                storage=bool(version.get("storage")),
            )
        )
    return out


def problems(crd: dict[str, Any], registry: Registry, old: dict[str, Any] | None = None) -> list[Cause]:
    """Everything wrong with `crd` (as an update of `old`, when given)."""
    causes: list[Cause] = []

    def bad(field: str, message: str, reason: str = "FieldValueInvalid") -> None:
        causes.append(Cause(field, reason, message))

    spec = crd.get("spec")
    if not isinstance(spec, dict):
        bad("spec", "Required value", "FieldValueRequired")
        return causes
    raw_names = spec.get("names")
    names: dict[str, Any] = raw_names if isinstance(raw_names, dict) else {}
    group, plural, kind = spec.get("group") or "", names.get("plural") or "", names.get("kind") or ""
    name = (crd.get("metadata") or {}).get("name", "")
    if not group:
        bad("spec.group", "Required value", "FieldValueRequired")
    elif "." not in group or any(not _DNS_LABEL.match(part) for part in group.split(".")):
        bad("spec.group", f'Invalid value: "{group}": should be a domain with at least one dot')
    if not plural:
        bad("spec.names.plural", "Required value", "FieldValueRequired")
    elif not _DNS_LABEL.match(plural):
        bad("spec.names.plural", f'Invalid value: "{plural}": a lowercase RFC 1123 label')
    if not kind:
        bad("spec.names.kind", "Required value", "FieldValueRequired")
    elif not _KIND.match(kind):
        bad("spec.names.kind", f'Invalid value: "{kind}": letters and digits, starting with a letter')
    if group and plural and name != f"{plural}.{group}":
        bad("metadata.name", f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group')
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        bad("spec.scope", f'Unsupported value: "{spec.get("scope")}": supported values: "Cluster", "Namespaced"', "FieldValueNotSupported")
    if old is not None and (old.get("spec") or {}).get("scope") != spec.get("scope"):
        bad("spec.scope", "Invalid value: field is immutable")
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        bad("spec.versions", "Required value: must have exactly one version marked as storage version", "FieldValueRequired")
        versions = []
    elif sum(1 for v in versions if isinstance(v, dict) and v.get("storage")) != 1:
        bad("spec.versions", "Invalid value: must have exactly one version marked as storage version")
    seen: set[str] = set()
    for index, version in enumerate(versions):
        where = f"spec.versions[{index}]"
        if not isinstance(version, dict):
            bad(where, "Invalid value: must be an object")
            continue
        vname = version.get("name") or ""
        if not _DNS_LABEL.match(vname):
            bad(f"{where}.name", f'Invalid value: "{vname}": a lowercase RFC 1123 label')
        elif vname in seen:
            bad(f"{where}.name", f'Duplicate value: "{vname}"', "FieldValueDuplicate")
        seen.add(vname)
        openapi = (version.get("schema") or {}).get("openAPIV3Schema")
        if openapi is None:
            bad(f"{where}.schema.openAPIV3Schema", "Required value: schemas are required", "FieldValueRequired")
        elif (why := check(openapi)) is not None:
            bad(f"{where}.schema.openAPIV3Schema", why)
        scale = (version.get("subresources") or {}).get("scale")
        if scale is not None:
            for path in ("specReplicasPath", "statusReplicasPath"):
                if not isinstance(scale, dict) or not str(scale.get(path) or "").startswith("."):
                    bad(f"{where}.subresources.scale.{path}", "Required value: a JSON path such as .spec.replicas", "FieldValueRequired")
        for c, column in enumerate(version.get("additionalPrinterColumns") or []):
            at = f"{where}.additionalPrinterColumns[{c}]"
            if not isinstance(column, dict) or not column.get("name") or not column.get("jsonPath"):
                bad(at, "Required value: name and jsonPath", "FieldValueRequired")
            elif column.get("type") not in COLUMN_TYPES:
                bad(f"{at}.type", f'Unsupported value: "{column.get("type")}": supported values: ' + ", ".join(f'"{t}"' for t in COLUMN_TYPES),
                    "FieldValueNotSupported")
    if kind and group and registry.owner_of_kind(kind, group) not in (None, name):
        bad("spec.names.kind", f'Invalid value: "{kind}": already served by another resource in group {group}')
    if group and plural and registry.owner_of_plural(group, plural) not in (None, name):
        bad("spec.names.plural", f'Invalid value: "{plural}": already served in group {group}')
    return causes


def accepted_status(crd: dict[str, Any], now: float) -> dict[str, Any]:
    """What the server reports once it serves a CRD: names accepted, established."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    stamp = rfc3339(int(now))
    conditions = [
        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": stamp},
        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted",
         "lastTransitionTime": stamp},
    ]
    old = {c.get("type"): c for c in (crd.get("status") or {}).get("conditions") or []}
    for condition in conditions:  # an unchanged condition keeps its transition time
        before = old.get(condition["type"])
        if before and before.get("status") == condition["status"] and before.get("lastTransitionTime"):
            condition["lastTransitionTime"] = before["lastTransitionTime"]
    stored = [v.get("name") for v in spec.get("versions") or [] if v.get("storage")]
    previous = list((crd.get("status") or {}).get("storedVersions") or [])
    return {"acceptedNames": names, "conditions": conditions, "storedVersions": list(dict.fromkeys(previous + stored))}
