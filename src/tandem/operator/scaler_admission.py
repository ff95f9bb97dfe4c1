"""One autoscaler per group, at admission: tandem's (`spec.autoscaling`, each role's
replicas per unit) or an HPA / KEDA ScaledObject on the group's scale subresource (the
number of units), never both (`cluster/unit_autoscalers.py` says why).

- An HPA or ScaledObject whose `scaleTargetRef` names a group with `spec.autoscaling` is
  refused, naming the group; so is a group that gains or changes `spec.autoscaling` while
  one targets it, naming each. Where both exist already (made before the operator, or the
  webhook bypassed), a write that leaves that pairing as it was is admitted (the HPA's
  owner, KEDA, updates the HPA it made; a person relabels the group): the autoscaler
  pass's ScalingActive=False ConflictingAutoscaler says what to fix, and nothing is
  refused that would not make it worse.
- A write of the group's scale subresource (`kubectl scale ig`) is not refused on this
  account: it sets the number of units, which tandem's policies never write (they size
  roles within a unit), so a person's unit count and tandem's per-role sizing compose.
  It is an HPA that must not also scale the group, and that is refused at the HPA's door.

The objects are read from the operator's informers (both kinds watched; KEDA's only while
its CRD is installed, else none can exist). Each problem is one line, field path first.
"""

from __future__ import annotations

from typing import Any, Mapping

from tandem.cluster.ports import Reader
from tandem.cluster.unit_autoscalers import TARGET_KIND, targeted_group, unit_autoscalers
from tandem.errors import NotFound, Problem


def scaler_problems(obj: Mapping[str, Any], old: Mapping[str, Any] | None, namespace: str | None, reader: Reader) -> list[Problem]:
    """An HPA or ScaledObject being created or updated: refused when it newly targets a
    group that tandem's own autoscaler scales."""
    name = targeted_group(obj)
    if name is None or (old and targeted_group(old) == name):
        return []
    try:
        group = reader.get(TARGET_KIND, namespace or "default", name)
    except NotFound:
        return []  # the group may come later: then it is the group that is refused
    if not _autoscaling(group):
        return []
    return [Problem(
        "spec.scaleTargetRef",
        f'{TARGET_KIND} "{name}" is scaled by tandem\'s own autoscaler (its spec.autoscaling sizes each role); one autoscaler '
        f"per group: remove spec.autoscaling from the group first, or leave its scaling to tandem",
    )]


def autoscaled_group_problems(obj: Mapping[str, Any], old: Mapping[str, Any] | None, namespace: str | None, reader: Reader) -> list[Problem]:
    """A group being created or updated: refused when it gains or changes `spec.autoscaling`
    while an HPA or ScaledObject scales its units."""
    autoscaling = _autoscaling(obj)
    if not autoscaling or (old and _autoscaling(old) == autoscaling):
        return []
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    rivals = unit_autoscalers(reader, meta.get("namespace") or namespace, str(meta.get("name") or ""))
    if not rivals:
        return []
    return [Problem(
        "spec.autoscaling",
        f"the group's units are scaled by {', '.join(rivals)} (spec.scaleTargetRef); one autoscaler per group: delete "
        f"{'it' if len(rivals) == 1 else 'them'} first, or leave spec.autoscaling out",
    )]


def _autoscaling(obj: Mapping[str, Any]) -> Any:
    """`spec.autoscaling` of a group as sent (any shape: the model's checks speak of that)."""
    spec = obj.get("spec")
    return spec.get("autoscaling") if isinstance(spec, Mapping) else None
