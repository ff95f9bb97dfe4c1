"""Delegated groups: tandem decides which replicas exist and when, the group's scheduler where.

A group whose `spec.scheduler.backend` is not `native` is placed by that scheduler
(Volcano, KAI, Koordinator, Kueue, kube-scheduler's Workload API). The pass still
coordinates it (rollout steps, scaling, rolling update, minimums first, the gang timeout,
whole-replica replacement); what changes is:

- **Liveness.** The backend must be enabled in this operator (`--backends`) and the API
  server must serve every kind it needs (its CRDs installed); otherwise the group is not
  accepted and the condition names what is missing (`liveness`).
- **Pods** are made as the backend needs them (`Backend.prepare_pod`: scheduler name, its
  labels and annotations, its gates), labelled `tandem.dev/backend`, and leave tandem's
  gate behind once coordination admits them (`delegated_pod`): tandem's engine never
  places them.
- **Gang objects** (`desired_gang_objects`, `gang_writes`): each unit's objects are the
  backend's renderer's (`Backend.unit_objects`, the same as `tandem render`) for the
  unit's current step (`step_view`: a gang's minimum is what coordination admitted, not
  the target), owned by the group. Kinds the scheduler lets change are merge-patched as
  steps go; kinds it keeps immutable (Kueue's Workload, the Workload API's objects) are
  made once per gang and replaced only while no pod of their unit is bound.
- **Hand-over.** A change of backend is a new revision (`manifests.revision_of`), so the
  rolling update replaces the group's replicas unit by unit with pods of the new backend;
  the old backend's objects of a unit stay as they are while any of its pods remain there,
  and go with the last one.

Pure: the group, its pods and objects in, objects and writes out.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from typing import Iterable, Mapping

from tandem.api.merge import SAME, merge_diff
from tandem.api.naming import (
    ADMITTED,
    BACKEND_LABEL,
    GANG_ANNOTATION,
    GATE,
    GROUP_LABEL,
    LABEL_PREFIX,
    OWN_GANG,
    REPLICA_LABEL,
    ROLE_LABEL,
    UNIT_LABEL,
)
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.backends.base import Backend, BackendOptions, step_view
from tandem.backends.delegated_kinds import ALL_KEYS, DELEGATED_KINDS, IMMUTABLE_KEYS, PRIORITY_CLASS, delegated_keys
from tandem.backends.priority import priority_class, priority_class_name
from tandem.backends.registry import get_backend
from tandem.cluster.kind_keys import object_key
from tandem.cluster.payloads import GroupPayload, PodPayload, as_pod
from tandem.cluster.ports import Object
from tandem.controller.actions import CreateObject, DeleteObject, PatchObject, Write
from tandem.controller.manifests import owner_reference
from tandem.errors import InputError

NATIVE = "native"
COMPOSITE_KEY = "CompositePodGroup.scheduling.k8s.io"
RENDERED_ANNOTATION = LABEL_PREFIX + "rendered"  # on a gang object: a digest of what tandem rendered for it


@dataclass(frozen=True)
class DelegationSettings:
    """The backends this operator delegates to (`tandem operator --backends`) and the queue
    for a group that names none (`spec.scheduler.queue` wins)."""

    backends: tuple[str, ...] = ()
    queue: str = "default"

    @property
    def kinds(self) -> tuple[str, ...]:
        """What a pass reads for them: each enabled backend's gang kinds, and PriorityClasses."""
        keys = delegated_keys(self.backends)
        return (*keys, PRIORITY_CLASS.key) if keys else ()

    def backend_kinds(self, name: str) -> tuple[str, ...]:
        """The gang kinds backend `name` needs served to be live."""
        return tuple(kind.key for kind in DELEGATED_KINDS[name])

    def backend(self, name: str) -> Backend:
        return get_backend(name, BackendOptions(queue=self.queue))


def liveness(backend: str, settings: DelegationSettings, served: frozenset[str]) -> tuple[str, str] | None:
    """(reason, message) when a group naming `backend` cannot be delegated now, else None."""
    if backend == NATIVE:
        return None
    if backend not in settings.backends:
        return (
            "BackendNotEnabled",
            f"spec.scheduler.backend: backend {backend!r} is not enabled in this operator "
            f"(run it with --backends {backend}; deploy/components/operator-{backend} does, with its RBAC)",
        )
    missing = [kind.crd for kind in DELEGATED_KINDS[backend] if kind.key not in served]  # as `backend_kinds` lists them
    if missing:
        how = "enable that API group in the API server" if backend == "workload-api" else f"install {backend}'s CRDs"
        return (
            "BackendNotServed",
            f"spec.scheduler.backend: backend {backend!r} is not live: the API server does not serve {', '.join(missing)} ({how})",
        )
    return None


def delegated_pod(pod: PodPayload, backend: Backend, group: InferenceGroup, topology: ClusterTopology | None, alone: bool = False) -> PodPayload:
    """`pod` (from `manifests.replica_pods`) as `backend` needs it; admitted by coordination,
    it carries no tandem gate (the backend places it), else tandem's gate holds it back.
    `alone`: made while its unit runs, its replica is a gang of its own (`GANG_ANNOTATION`)
    where the backend's gangs depend on it (`Backend.fixed_minimums`: Kueue's base pod
    group counts the unit's first minimum, which a replacement would never complete)."""
    if alone and backend.fixed_minimums:
        pod = copy.deepcopy(pod)
        pod["metadata"].setdefault("annotations", {})[GANG_ANNOTATION] = OWN_GANG
    out = backend.prepare_pod(pod, group, topology)
    meta, spec = out["metadata"], out["spec"]
    meta["labels"] = dict(sorted({**meta.get("labels", {}), BACKEND_LABEL: backend.name}.items()))
    if (meta.get("annotations") or {}).get(ADMITTED) == "true":
        gates = [g for g in spec.get("schedulingGates", []) if g.get("name") != GATE]
        if gates:
            spec["schedulingGates"] = gates
        else:
            spec.pop("schedulingGates", None)
    return as_pod(out)


def admission_patch(pod: PodPayload, delegated: bool) -> dict[str, object]:
    """The patch that admits a pod coordination held back: the mark, and for a delegated
    pod also tandem's gate lifted (gates can only be removed), so its scheduler sees it."""
    patch: dict[str, object] = {"metadata": {"annotations": {ADMITTED: "true"}}}
    if delegated:
        gates = [g for g in pod.get("spec", {}).get("schedulingGates", []) if g.get("name") != GATE]
        patch["spec"] = {"schedulingGates": gates or None}
    return patch


def pod_backend(pod: PodPayload) -> str:
    """The backend a pod was made for: its label, `native` for a pod without one."""
    return (pod["metadata"].get("labels") or {}).get(BACKEND_LABEL, NATIVE)


UnitAdmitted = Mapping[int, Mapping[str, tuple[int, ...]]]  # unit -> role -> admitted replica indexes


def made_alone(pod: PodPayload) -> bool:
    """Whether the pod's replica is a gang of its own (`delegated_pod`'s `alone`)."""
    return (pod["metadata"].get("annotations") or {}).get(GANG_ANNOTATION) == OWN_GANG


def desired_gang_objects(
    raw: GroupPayload, group: InferenceGroup, topology: ClusterTopology | None, backend: Backend, admitted: UnitAdmitted,
    alone: Mapping[int, set[tuple[str, int]]] | None = None,
) -> tuple[list[Object], str | None]:
    """The backend's objects for each unit with admitted replicas, at the unit's step, and
    the group's shared ones while any unit has some; owned by the group. `alone`: per unit,
    the replicas made as gangs of their own. The second value is the renderer's refusal,
    should it refuse a group the checks accepted."""
    objects: list[Object] = []
    try:
        for unit in sorted(admitted):
            indexes = admitted[unit]
            if not any(indexes.values()):
                continue
            counts, extent = {r: len(ix) for r, ix in indexes.items()}, {r: max(ix) + 1 for r, ix in indexes.items() if ix}
            view = step_view(group, counts, extent, keep_minimums=backend.fixed_minimums)
            made = backend.unit_objects(view, topology, unit, raw, replicas=indexes, alone=(alone or {}).get(unit, set()))
            objects += [obj for obj in made if _for_admitted(obj, indexes)]
        if objects:
            objects = backend.shared_objects(group, topology) + objects
    except InputError as exc:
        return [], str(exc)
    return [_owned(obj, raw) for obj in objects], None


def _for_admitted(obj: Object, indexes: Mapping[str, tuple[int, ...]]) -> bool:
    """An object a renderer made for one replica (labelled with its role and index, as a
    Kueue extra is) only while that replica is admitted: a step view's replicas reach the
    highest admitted index, and the indexes below it need not all be admitted."""
    labels = obj["metadata"].get("labels") or {}
    role, replica = labels.get(ROLE_LABEL), labels.get(REPLICA_LABEL)
    if role is None or replica is None or not replica.isdigit():
        return True
    return int(replica) in indexes.get(role, ())


def _owned(obj: Object, raw: GroupPayload) -> Object:
    """`obj` labelled and owned as the group's, and stamped with a digest of what tandem
    rendered (`RENDERED_ANNOTATION`): the API server and the scheduler fill in fields of
    their own (Kueue's `spec.active`, defaults of every CRD), so the stored object is
    compared with the rendering by that digest, never field by field."""
    meta = dict(obj["metadata"])
    meta["labels"] = dict(sorted({**(meta.get("labels") or {}), GROUP_LABEL: raw["metadata"]["name"]}.items()))
    rendered = json.dumps({"spec": obj.get("spec"), "labels": meta["labels"], "annotations": meta.get("annotations") or {}}, sort_keys=True)
    meta["annotations"] = dict(sorted({**(meta.get("annotations") or {}), RENDERED_ANNOTATION: hashlib.sha256(rendered.encode()).hexdigest()[:16]}.items()))
    meta["ownerReferences"] = [dict(owner_reference(raw))]
    return {**obj, "metadata": meta}


def gang_writes(
    raw: GroupPayload,
    desired: Iterable[Object],
    observed: Iterable[Object],
    backend: str,
    remaining: Mapping[str, set[int]],
    bound: set[int],
) -> tuple[list[Write], list[Write]]:
    """(creates and patches, deletes) bringing the group's gang objects to `desired`.

    `observed`: the group's gang objects as read (any backend's); `remaining`: per backend,
    the units where its pods remain (another backend's objects of a unit go only with its
    last pod there; a shared one with its last pod in the group); `bound`: the units with a
    pod of `backend` bound or let go by its scheduler (no gate left). A desired object of a
    kind the scheduler keeps immutable that differs from the stored one is replaced
    (deleted now, made again by the next pass) only while no pod of its unit is: a gang in
    use is left as it was made."""
    uid = raw["metadata"].get("uid")
    stored = {(object_key(o, ALL_KEYS), o["metadata"]["name"]): o for o in observed if _ours(o, uid)}
    wanted = {(object_key(o, ALL_KEYS), o["metadata"]["name"]): o for o in desired}
    ahead: list[Write] = []
    behind: list[Write] = []
    for target in sorted(wanted):
        want, have = wanted[target], stored.get(target)
        key, name = target
        if have is None:
            ahead.append(CreateObject(want, f"{backend} {want['kind']} for {_scope(want)}", gathers_pods=True))
            continue
        patch = _patch(have, want)
        if patch is None:
            continue
        meta = have["metadata"]
        if key in IMMUTABLE_KEYS and _covers(have.get("spec"), want.get("spec")):
            # its spec is what tandem renders; only its labels or annotations were changed
            # (by hand): metadata can be patched on any kind
            patch = {k: v for k, v in patch.items() if k == "metadata"}
            ahead.append(PatchObject(key, meta.get("namespace"), name, patch, meta.get("resourceVersion"), f"{backend} {want['kind']} of {_scope(want)} put back"))
            continue
        if key in IMMUTABLE_KEYS:
            unit = _unit(have)
            # A CompositePodGroup gathers PodGroups, never pods: replacing it strands no pod,
            # and one left asking for children that no longer exist would hold its unit for ever.
            if key == COMPOSITE_KEY or not (bound if unit is None else unit in bound):
                behind.append(DeleteObject(key, meta.get("namespace"), name, uid=meta.get("uid"), resource_version=meta.get("resourceVersion"),
                                           why=f"{backend} {want['kind']} changed for {_scope(want)}; it cannot be patched (made again next pass)"))
            continue
        ahead.append(PatchObject(key, meta.get("namespace"), name, patch, meta.get("resourceVersion"), f"{backend} {want['kind']} follows {_scope(want)}"))
    for target in sorted(set(stored) - set(wanted)):
        obj = stored[target]
        owner = _backend_of(target[0])
        unit = _unit(obj)
        units = remaining.get(owner, set())
        if owner != backend and (units if unit is None else unit in units):
            continue  # the old backend's pods are still there: its objects stay with them
        meta = obj["metadata"]
        behind.append(DeleteObject(target[0], meta.get("namespace"), target[1], uid=meta.get("uid"), resource_version=meta.get("resourceVersion"),
                                   why=f"{owner} {obj.get('kind')} no longer wanted"))
    return ahead, behind


def priority_class_for(group: InferenceGroup, backend: Backend, existing: Mapping[tuple[str, str], Object]) -> Object | None:
    """The PriorityClass `group`'s priority needs, when the backend uses one and none exists."""
    name = priority_class_name(group.spec.priority)
    if name is None or not backend.renders_priority_class or ("", name) in existing:
        return None
    return priority_class(group.spec.priority)


def _patch(have: Object, want: Object) -> dict[str, object] | None:
    """None while the stored object carries the digest of this very rendering and still holds
    what tandem rendered (its labels, annotations and spec fields: a hand may have changed
    them and left the digest); else what brings it there: the spec (a field the server
    defaulted and tandem does not render is nulled, and defaulted again by the server),
    tandem's labels and annotations."""
    meta: dict[str, object] = {}
    for part in ("labels", "annotations"):
        theirs = have["metadata"].get(part) or {}
        changed = {k: v for k, v in (want["metadata"].get(part) or {}).items() if theirs.get(k) != v}
        if changed:
            meta[part] = changed
    digest = (want["metadata"].get("annotations") or {}).get(RENDERED_ANNOTATION)
    if not meta and digest is not None and _covers(have.get("spec"), want.get("spec")):
        return None  # the digest is there (no annotation changed), and so is the spec
    body: dict[str, object] = {}
    spec = merge_diff(have.get("spec"), want.get("spec"))
    if spec is not SAME:
        body["spec"] = spec
    if meta:
        body["metadata"] = meta
    return body or None


def _covers(have: object, want: object) -> bool:
    """Whether `have` holds every field of `want` as `want` has it (the server and the
    scheduler add fields of their own: defaults, Kueue's `spec.active`)."""
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(_covers(have.get(k), v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(have) == len(want) and all(_covers(h, w) for h, w in zip(have, want))
    return have == want


def _ours(obj: Object, uid: str | None) -> bool:
    refs = obj["metadata"].get("ownerReferences") or []
    return any(r.get("kind") == "InferenceGroup" and r.get("uid") == uid for r in refs)


def _unit(obj: Object) -> int | None:
    value = (obj["metadata"].get("labels") or {}).get(UNIT_LABEL)
    return int(value) if value is not None and value.isdigit() else None


def _scope(obj: Object) -> str:
    unit = _unit(obj)
    return "the group" if unit is None else f"unit {unit}"


def _backend_of(key: str) -> str:
    for name, kinds in DELEGATED_KINDS.items():
        if any(kind.key == key for kind in kinds):
            return name
    return NATIVE
