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
    ("kueue.x-k8s.io/v1beta2", "Workload"): "kueue/kueue.x-k8s.io_workloads.yaml",
}
KUEUE = "kueue.x-k8s.io/"

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
    if kind == "Workload" and obj.get("apiVersion", "").startswith(KUEUE):
        problems += _kueue_workload_rules(spec)
    elif kind == "Workload":
        problems += _workload_rules(spec)
    if kind == "Pod":
        problems += _kueue_pod_rules(obj["metadata"])
    return problems


def _kueue_workload_rules(spec: dict[str, Any]) -> list[str]:
    """The Workload CRD's CEL rules and Kueue's own validation of what tandem renders (TAS
    requests as jobframework.ValidateTASPodSetRequest checks them; PodSet groups as
    ValidatePodSetGroupingTopology accepts them)."""
    problems = []
    if "priorityClassRef" in spec and "priority" not in spec:
        problems.append("priority should not be nil when priorityClassRef is set")
    ref = spec.get("priorityClassRef", {})
    if ref and (ref.get("group"), ref.get("kind")) not in {("scheduling.k8s.io", "PriorityClass"), ("kueue.x-k8s.io", "WorkloadPriorityClass")}:
        problems.append(f"priorityClassRef group and kind do not match: {ref}")
    names = [ps["name"] for ps in spec.get("podSets", [])]
    if len(set(names)) != len(names):
        problems.append(f"podSets is a list-map keyed by name: {names}")
    groups: dict[str, list[dict[str, Any]]] = {}
    for ps in spec.get("podSets", []):
        if ps.get("minCount", 0) > ps.get("count", 1):
            problems.append("minCount should be positive and less or equal to count")
        request = ps.get("topologyRequest", {})
        problems += [f"PodSet {ps['name']}: {p}" for p in _tas_request_problems(request)]
        if "podSetSliceSize" in request and request["podSetSliceSize"] > ps.get("count", 1):
            problems.append(f"PodSet {ps['name']}: podSetSliceSize must not be greater than the PodSet count")
        if "podSetGroupName" in request:
            groups.setdefault(request["podSetGroupName"], []).append(ps)
    for name, members in groups.items():
        if len(members) != 2 or all(m.get("count", 1) != 1 for m in members):
            problems.append(f"PodSet group {name}: exactly 2 PodSets, one with count 1, got {[m.get('count', 1) for m in members]}")
        levels = {(m["topologyRequest"].get("required"), m["topologyRequest"].get("preferred")) for m in members}
        if len(levels) != 1:
            problems.append(f"PodSet group {name}: members must request the same topology, got {levels}")
    return problems


def _tas_request_problems(request: dict[str, Any]) -> list[str]:
    problems = []
    modes = [key for key in ("required", "preferred", "unconstrained") if key in request]
    if len(modes) > 1:
        problems.append(f"at most one of required, preferred, unconstrained, got {modes}")
    if ("podSetSliceRequiredTopology" in request) != ("podSetSliceSize" in request):
        problems.append("podSetSliceRequiredTopology and podSetSliceSize go together")
    if "podSetGroupName" in request and not {"required", "preferred"} & set(request):
        problems.append("podSetGroupName needs required or preferred")
    return problems


def _kueue_pod_rules(metadata: dict[str, Any]) -> list[str]:
    """A Kueue pod's TAS annotations, as Kueue's pod webhook validates them (with TASGroupedPodSetSlicing on)."""
    annotations = metadata.get("annotations", {})
    request = {
        field: annotations[KUEUE + key]
        for field, key in [
            ("required", "podset-required-topology"),
            ("preferred", "podset-preferred-topology"),
            ("podSetGroupName", "podset-group-name"),
            ("podSetSliceRequiredTopology", "podset-slice-required-topology"),
            ("podSetSliceSize", "podset-slice-size"),
        ]
        if KUEUE + key in annotations
    }
    problems = _tas_request_problems(request)
    if "podSetSliceSize" in request and not request["podSetSliceSize"].isdigit():
        problems.append("podset-slice-size must be a number")
    labels = metadata.get("labels", {})
    prebuilt, group = labels.get(KUEUE + "prebuilt-workload-name"), labels.get(KUEUE + "pod-group-name")
    if prebuilt and group and prebuilt != group:
        problems.append("prebuilt workload and pod group should be equal")
    if (KUEUE + "pod-group-total-count" in annotations) != bool(group):
        problems.append("both the pod-group-total-count annotation and the pod-group-name label should be set")
    index_label = annotations.get(KUEUE + "pod-group-pod-index-label")
    if index_label and group and not int(labels[index_label]) < int(annotations[KUEUE + "pod-group-total-count"]):
        # The webhook copies it to kueue.x-k8s.io/pod-group-pod-index; the pod controller wants it
        # below the total count (validatePodGroupMetadata, ReadUIntFromLabelBelowBound).
        problems.append(f"pod index {labels[index_label]} is not below the pod group's total count")
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
