"""Discovery and the documents clients read before they act: `/api`, `/apis`, resource lists,
`/version`, `/openapi/v2` and `/openapi/v3`.

Discovery is the legacy (unaggregated) kind: a client asking for aggregated discovery gets
plain JSON and falls back, as it does with older servers. The OpenAPI documents are just
what kubectl needs, not a full API description:
- v3: per group-version, one PATCH operation per kind that names the kind
  (`x-kubernetes-group-version-kind`) and the `fieldValidation` parameter, so `kubectl
  apply` (default `--validate=strict`) leaves validation to this server; no strategic
  merge content type is listed, so kubectl computes strategic patches from its own
  built-in types (and merge patches for custom resources). Custom resources' schemas are
  included as components (for `kubectl explain`).
- v2: an empty document (protobuf or JSON), so kubectl's fallbacks find nothing to check.
/version says v1.32 (gcloud's kubectl dispatcher picks its kubectl from it).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import tandem
from tandem.apiserver.kinds import SUBRESOURCE_VERBS, VERBS, Registry, Resource

KUBE_MAJOR, KUBE_MINOR = "1", "32"
OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"  # what the real server answers
# An openapi_v2.Document with only `swagger: "2.0"` (field 1, a string), in protobuf.
_EMPTY_V2_PROTOBUF = b"\n\x032.0"


def version_info() -> dict[str, str]:
    return {
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "gitVersion": f"v{KUBE_MAJOR}.{KUBE_MINOR}.0-tandem.{tandem.__version__}",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "none (tandem apiserver, Python)",
        "compiler": "tandem",
        "platform": "linux/amd64",
    }


def api_versions(address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g, vs) for g, vs in registry.groups() if g]}


def api_group(registry: Registry, name: str) -> dict[str, Any] | None:
    for group, versions in registry.groups():
        if group == name and group:
            return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}
    return None


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    resources = sorted(registry.resources(group, version), key=lambda r: r.plural)
    if not resources:
        return None
    listed: list[dict[str, Any]] = []
    for r in resources:
        entry: dict[str, Any] = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind, "verbs": list(VERBS)}
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        entry["storageVersionHash"] = hashlib.sha256(f"{r.group}/{r.version}/{r.kind}".encode()).hexdigest()[:12]
        listed.append(entry)
        if r.binding:
            listed.append({"name": f"{r.plural}/binding", "singularName": "", "namespaced": r.namespaced, "kind": "Binding", "verbs": ["create"]})
        if r.scale is not None:
            listed.append({"name": f"{r.plural}/scale", "singularName": "", "namespaced": r.namespaced, "group": "autoscaling", "version": "v1",
                           "kind": "Scale", "verbs": list(SUBRESOURCE_VERBS)})
        if r.status:
            listed.append({"name": f"{r.plural}/status", "singularName": "", "namespaced": r.namespaced, "kind": r.kind, "verbs": list(SUBRESOURCE_VERBS)})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}" if group else version, "resources": listed}


# ----------------------------------------------------------------------------- OpenAPI


def openapi_v2(accept: str) -> tuple[str, bytes]:
    if "protobuf" in accept:
        return OPENAPI_V2_PROTOBUF, _EMPTY_V2_PROTOBUF
    document = {"swagger": "2.0", "info": {"title": "Kubernetes (tandem apiserver)", "version": f"v{KUBE_MAJOR}.{KUBE_MINOR}.0"}, "paths": {}, "definitions": {}}
    return "application/json", json.dumps(document).encode()


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_v3_root(registry: Registry) -> dict[str, Any]:
    paths = {}
    for group, versions in registry.groups():
        for version in versions:
            path = _gv_path(group, version)
            digest = hashlib.sha512(json.dumps(openapi_v3(registry, group, version), sort_keys=True).encode()).hexdigest().upper()
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}


def openapi_v3_for_path(registry: Registry, path: str) -> dict[str, Any] | None:
    """The document at `/openapi/v3/<path>` (`api/v1`, `apis/<group>/<version>`)."""
    parts = path.strip("/").split("/")
    if parts[:1] == ["api"] and len(parts) == 2:
        group, version = "", parts[1]
    elif parts[:1] == ["apis"] and len(parts) == 3:
        group, version = parts[1], parts[2]
    else:
        return None
    if not registry.resources(group, version):
        return None
    return openapi_v3(registry, group, version)


def openapi_v3(registry: Registry, group: str, version: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for r in sorted(registry.resources(group, version), key=lambda r: r.plural):
        gvk = {"group": r.group, "version": r.version, "kind": r.kind}
        prefix = f"/{_gv_path(r.group, r.version)}" + ("/namespaces/{namespace}" if r.namespaced else "")
        paths[f"{prefix}/{r.plural}/{{name}}"] = {"patch": _patch_operation(r, gvk)}
        if r.schema is not None:
            schemas[_schema_name(r)] = {**r.schema.openapi, "x-kubernetes-group-version-kind": [gvk]}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (tandem apiserver)", "version": f"v{KUBE_MAJOR}.{KUBE_MINOR}.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _patch_operation(r: Resource, gvk: dict[str, str]) -> dict[str, Any]:
    body = {"schema": {"type": "object"}}
    return {
        "operationId": f"patch{'Namespaced' if r.namespaced else ''}{r.kind}",
        "x-kubernetes-action": "patch",
        "x-kubernetes-group-version-kind": gvk,
        "parameters": [
            {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
            for name in ("dryRun", "fieldManager", "fieldValidation")
        ],
        "requestBody": {"content": {"application/json-patch+json": body, "application/merge-patch+json": body, "application/apply-patch+yaml": body}},
        "responses": {"200": {"description": "OK"}},
    }


def _schema_name(r: Resource) -> str:
    reversed_group = ".".join(reversed(r.group.split(".")))
    return f"{reversed_group}.{r.version}.{r.kind}"
