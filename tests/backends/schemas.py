"""Validators for rendered objects: the real upstream CRDs (../shared/schemas) and Kubernetes' own kinds.

CRD schemas are made strict the way the API server prunes: every object schema that
does not say `x-kubernetes-preserve-unknown-fields` rejects unknown fields; apiVersion and
kind must be exactly the CRD's; metadata is checked against Kubernetes' strict ObjectMeta.
Built-in kinds (Pod, PriorityClass, the scheduling.k8s.io Workload API) use the strict
JSON schemas kubernetes-validate ships, per Kubernetes version. Each schema is loaded and
prepared once per session. CEL rules (`x-kubernetes-validations`) are not JSON Schema; the
ones that matter for rendered objects are re-checked by hand in `cel_problems`.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from referencing import Registry, Resource

from tandem.api.loading import load_texts
from tandem.api.resources import API_VERSION as TANDEM_API_VERSION

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / ".." / "shared"
SCHEMAS = SHARED / "schemas"
SKIP_REASON = f"the upstream CRDs are not here: {SHARED.resolve()} is absent (it sits beside the repository)"
KUBE_SCHEMAS = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
DEFINITIONS_ID = "https://kubernetes.io/api/_definitions.json"
OBJECT_META = f"{DEFINITIONS_ID}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
LATEST_KUBE = "1.37"

CRDS: dict[tuple[str, str], str] = {
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): "volcano/scheduling.volcano.sh_podgroups.yaml",
    ("topology.volcano.sh/v1alpha1", "HyperNode"): "volcano/topology.volcano.sh_hypernodes.yaml",
    ("scheduling.sigs.k8s.io/v1alpha1", "PodGroup"): "koordinator/scheduling.sigs.k8s.io_podgroups.yaml",
    ("scheduling.koordinator.sh/v1alpha1", "ClusterNetworkTopology"): "koordinator/scheduling.koordinator.sh_clusternetworktopologies.yaml",
    ("scheduling.run.ai/v2alpha2", "PodGroup"): "kai/scheduling.run.ai_podgroups.yaml",
    ("kai.scheduler/v1alpha1", "Topology"): "kai/kai.scheduler_topologies.yaml",
    ("kueue.x-k8s.io/v1beta2", "Topology"): "kueue/kueue.x-k8s.io_topologies.yaml",
}

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


# ----------------------------------------------------------------------------- loading


@lru_cache(maxsize=None)
def _definitions(kube: str) -> Resource:
    path = KUBE_SCHEMAS / f"v{kube}.0-local-strict" / "_definitions.json"
    return Resource.from_contents(json.loads(path.read_text(encoding="utf-8")))


def _strict(schema: Any) -> Any:
    """Forbid unknown fields in every object schema that does not preserve them."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if "properties" in out:
        out["properties"] = {name: _strict(sub) for name, sub in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = _strict(out["items"])
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _strict(out["additionalProperties"])
    for key in ("anyOf", "allOf", "oneOf"):
        if key in out:
            out[key] = [_strict(sub) for sub in out[key]]
    is_object = out.get("type") == "object" or "properties" in out
    if is_object and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@lru_cache(maxsize=None)
def crd_validator(api_version: str, kind: str) -> jsonschema.Draft202012Validator:
    crd = yaml.load((SCHEMAS / CRDS[(api_version, kind)]).read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    group, version = api_version.split("/")
    assert crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == kind
    (entry,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = _strict(entry["schema"]["openAPIV3Schema"])
    schema["properties"]["apiVersion"] = {"const": api_version}
    schema["properties"]["kind"] = {"const": kind}
    schema["properties"]["metadata"] = {"$ref": OBJECT_META}
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
    registry = Registry().with_resource(DEFINITIONS_ID, _definitions(LATEST_KUBE))
    return jsonschema.Draft202012Validator(schema, registry=registry)


@lru_cache(maxsize=None)
def builtin_validator(api_version: str, kind: str, kube: str) -> jsonschema.Draft202012Validator:
    prefix = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    path = KUBE_SCHEMAS / f"v{kube}.0-local-strict" / f"{kind.lower()}-{prefix}.json"
    if not path.exists():
        raise AssertionError(f"kubernetes-validate {kubernetes_validate.__version__} has no schema for {api_version} {kind} in Kubernetes {kube}")
    schema = json.loads(path.read_text(encoding="utf-8"))
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
    registry = Registry().with_resource(DEFINITIONS_ID, _definitions(kube))
    return jsonschema.Draft202012Validator(schema, registry=registry)


# ----------------------------------------------------------------------------- checking


def schema_problems(obj: dict[str, Any], kube: str = LATEST_KUBE) -> list[str]:
    """Every reason `obj` would be refused: schema errors, bad names, broken CEL rules."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    where = f"{kind} {obj.get('metadata', {}).get('name')}"
    if api_version == TANDEM_API_VERSION:
        load_texts([(where, json.dumps(obj))])  # tandem's own kinds: the loader is their schema
        return []
    if (api_version, kind) in CRDS:
        validator = crd_validator(api_version, kind)
    else:
        validator = builtin_validator(api_version, kind, kube)
    problems = [f"{where}: {'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]
    return problems + [f"{where}: {p}" for p in name_problems(obj) + cel_problems(obj)]


def name_problems(obj: dict[str, Any]) -> list[str]:
    meta = obj.get("metadata", {})
    problems = []
    name = meta.get("name", "")
    if not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
        problems.append(f"metadata.name {name!r} is not a DNS-1123 subdomain")
    for key, value in meta.get("labels", {}).items():
        if not _QUALIFIED.match(key):
            problems.append(f"label key {key!r} is not a qualified name")
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            problems.append(f"label {key}={value!r}: not a label value")
    for key, value in meta.get("annotations", {}).items():
        if not _QUALIFIED.match(key) or not isinstance(value, str):
            problems.append(f"annotation {key!r} is not a qualified name with a string value")
    return problems


def cel_problems(obj: dict[str, Any]) -> list[str]:
    """The CEL rules of the CRDs (and API validation of built-ins) that rendered objects could break."""
    kind, spec = obj.get("kind"), obj.get("spec", {})
    problems = []
    if kind == "HyperNode":
        for member in spec.get("members", []):
            chosen = [k for k in ("exactMatch", "regexMatch", "labelMatch") if k in member.get("selector", {})]
            if len(chosen) != 1:
                problems.append(f"a member needs exactly one of exactMatch, regexMatch, labelMatch, got {chosen}")
            if member.get("type") == "HyperNode" and chosen != ["exactMatch"]:
                problems.append("HyperNode members must be selected by exactMatch")
    if kind == "Topology":
        labels = [level["nodeLabel"] for level in spec.get("levels", [])]
        if len(set(labels)) != len(labels):
            problems.append("levels must be unique")
        if "kubernetes.io/hostname" in labels[:-1]:
            problems.append("kubernetes.io/hostname can only be the lowest level")
    if kind == "PodGroup" and "networkTopology" in spec:
        if {"highestTierAllowed", "highestTierName"} <= set(spec["networkTopology"]):
            problems.append("highestTierName and highestTierAllowed cannot be set together")
    if kind == "Workload":
        problems += _workload_rules(spec)
    return problems


def _workload_rules(spec: dict[str, Any]) -> list[str]:
    problems = []
    if "podGroupTemplates" in spec and "compositePodGroupTemplates" in spec:
        problems.append("podGroupTemplates and compositePodGroupTemplates are a union")

    def walk(templates: list[dict[str, Any]], depth: int) -> None:
        if len(templates) > 8:
            problems.append(f"a template list holds at most 8 entries, got {len(templates)}")
        for template in templates:
            if depth > 4:
                problems.append("the group-template hierarchy is at most 4 levels deep")
            walk(template.get("compositePodGroupTemplates", []), depth + 1)
            if len(template.get("podGroupTemplates", [])) > 8:
                problems.append("a template list holds at most 8 entries")
            for leaf in template.get("podGroupTemplates", []):
                if depth + 1 > 4:
                    problems.append("the group-template hierarchy is at most 4 levels deep")
                _check_policy(leaf, problems)

    walk(spec.get("compositePodGroupTemplates", []), 1)
    for template in spec.get("podGroupTemplates", []) + spec.get("podGroups", []):
        _check_policy(template, problems)
    return problems


def _check_policy(template: dict[str, Any], problems: list[str]) -> None:
    policy = template.get("schedulingPolicy", template.get("policy", {}))
    if len(policy) != 1:
        problems.append(f"a scheduling policy is exactly one of basic or gang, got {sorted(policy)}")
    if "gang" in policy and policy["gang"].get("minCount", 1) < 1:
        problems.append("gang minCount must be positive")
    if len(template.get("schedulingConstraints", {}).get("topology", [])) > 1:
        problems.append("at most one topology constraint per group")


def assert_valid(objects: list[dict[str, Any]], kube: str = LATEST_KUBE) -> None:
    problems = [p for obj in objects for p in schema_problems(obj, kube)]
    assert not problems, "\n".join(problems[:20])
