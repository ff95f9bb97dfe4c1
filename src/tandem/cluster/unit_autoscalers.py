"""HorizontalPodAutoscalers and KEDA ScaledObjects that scale an InferenceGroup's units,
found by their `spec.scaleTargetRef`.

tandem's own autoscaler (`spec.autoscaling`) writes each role's replicas per unit; an HPA
or a ScaledObject (KEDA drives an HPA of its own for each) writes the group's scale
subresource, `spec.replicas`, the number of units. Both at once on one group would be two
controllers sizing one workload from two sets of signals, each undoing the other's
reasoning, so tandem refuses it at admission (`operator/admission.py`) and, where it
exists anyway (made before the operator ran, or with the webhook bypassed), leaves such a
group's counts alone (`controller/autoscaler.py`, ScalingActive=False ConflictingAutoscaler).

An object scales a group when its `scaleTargetRef` names kind `InferenceGroup` of API
group `tandem.dev` (any version) and the group's name: both kinds scale only a target in
their own namespace. A ScaledObject's `apiVersion` and `kind` default to `apps/v1` and
`Deployment` (KEDA's ScaledObject specification), an HPA's are required.
"""

from __future__ import annotations

from typing import Any, Mapping

from tandem.cluster.ports import Reader
from tandem.errors import BadRequest

HPA = "HorizontalPodAutoscaler"  # autoscaling/v2
SCALED_OBJECT = "ScaledObject"  # keda.sh/v1alpha1 (its CRD may not be installed)
UNIT_AUTOSCALER_KINDS = (HPA, SCALED_OBJECT)
API_GROUP = "tandem.dev"
TARGET_KIND = "InferenceGroup"
_DEFAULT_TARGET = {SCALED_OBJECT: ("apps/v1", "Deployment")}  # KEDA's defaults; an HPA's fields are required


def targeted_group(obj: Mapping[str, Any]) -> str | None:
    """The name of the InferenceGroup `obj` (an HPA or a ScaledObject) scales, or None
    when it scales something else (or its reference is malformed)."""
    spec = obj.get("spec")
    ref = spec.get("scaleTargetRef") if isinstance(spec, Mapping) else None
    if not isinstance(ref, Mapping):
        return None
    api_version, kind = _DEFAULT_TARGET.get(str(obj.get("kind") or ""), ("", ""))
    api_version = ref.get("apiVersion") or api_version
    kind = ref.get("kind") or kind
    name = ref.get("name")
    if not isinstance(api_version, str) or not api_version.startswith(f"{API_GROUP}/") or kind != TARGET_KIND:
        return None  # as the webhook's matchConditions select them: `tandem.dev/<version>`
    return name if isinstance(name, str) and name else None


def describe(obj: Mapping[str, Any]) -> str:
    """How messages name one: `HorizontalPodAutoscaler "llama-units"`."""
    return f'{obj.get("kind") or "?"} "{(obj.get("metadata") or {}).get("name", "")}"'


def unit_autoscalers(reader: Reader, namespace: str | None, name: str) -> tuple[str, ...]:
    """Every HPA and ScaledObject scaling the group `namespace/name`, described, sorted.
    A kind the reader does not hold counts as none: the operator always watches both (an
    unserved ScaledObject, KEDA not installed, is an empty cache), a simulator's world
    has neither."""
    found = []
    for kind in UNIT_AUTOSCALER_KINDS:
        try:
            objects = reader.list(kind, namespace or "default")
        except BadRequest:
            continue  # not watched by this reader
        found += [describe({"kind": kind, **o}) for o in objects if targeted_group({"kind": kind, **o}) == name]
    return tuple(sorted(found))
