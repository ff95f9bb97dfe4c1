"""Decide: a topology pass as a pure function of what was observed and the time.

Per ClusterTopology, in name order:
1. **Finalizer**: `tandem.dev/topology-in-use` is added when absent (resourceVersion
   precondition). When deletion was asked: with groups naming the topology, nothing of it
   changes and it is DeletionBlocked (status, a Warning event naming the groups); without,
   its objects are deleted and then the finalizer removed (skipped if a delete failed).
2. **Backend objects**, per enabled backend: the renderer's output (`desired.py`), then
   created when missing, merge-patched when their spec, tandem's labels or the owner
   reference differ (resourceVersion precondition), and tandem's objects nobody wants any
   more deleted (uid and resourceVersion preconditions: one changed since it was read,
   its labels perhaps, is judged again next pass): those of a topology gone, of a level list changed, of
   a domain emptied. Objects without both ownership labels are never touched; one sitting
   on a name tandem wants is reported (NameTaken). A backend that refuses the topology
   (BackendRefused) or, for Volcano, HyperNodes tandem does not own (ForeignHyperNodes: a
   discoverer built them; two trees over the same nodes would clash) leaves that
   topology's objects of the backend as they are.
   Koordinator reads ONE ClusterNetworkTopology (named `default`): it follows the
   ClusterTopology named `default` if there is one, else the oldest (creationTimestamp,
   then name) among those that pass tandem's checks and are not being deleted; the
   others are Degraded (KoordinatorTopologyTaken), saying which one it follows.
   Kueue: the ResourceFlavors named by `tandem.dev/kueue-resource-flavors` get
   `spec.topologyName` (merge patch); never owned, never deleted. A flavor Kueue would
   refuse it (missing, no `nodeLabels`, topologyName already naming another: immutable)
   is reported (ResourceFlavorRefused).
3. **Status** (`status.py`), merge-patched only when it differs from what is stored.
4. **Events**, at most one per type and reason per topology and pass, and only on a
   change: TopologyUpdated (Normal: created/updated/deleted counts of the writes that went
   through, counted by apply) when objects were written, DeletionBlocked and Degraded
   (Warning) when the condition's words change.
5. **Refused writes** (`refusal_gate.py`, the memo's `refused`, learnt by apply): a write the
   same as one the API refused for good is held back until `refusal_retry` seconds after
   the refusal, and every refusal whose write is decided again is told in the status
   (Degraded, WriteRefused). A finalizer's removal waits while a delete is held. When the
   status write itself is the one refused, no condition event is sent (it would repeat each
   pass): the refusals the last pass learnt are told once in a WriteRefused event instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from tandem.api.merge import SAME, merge_diff
from tandem.api.timestamps import seconds
from tandem.api.topology_status import EXAMPLES
from tandem.backends.koordinator import TOPOLOGY_NAME as KOORDINATOR_TOPOLOGY_NAME
from tandem.cluster.ports import Object, ObjectRef
from tandem.cluster.writes import RecordEvent
from tandem.topology_controller.actions import (
    Action,
    CreateObject,
    DeleteObject,
    PatchObject,
    PatchStatus,
    RecordWrites,
    TopologyActions,
    TopologyDecisions,
)
from tandem.topology_controller.desired import Rendered, desired_objects
from tandem.topology_controller.kinds import key_of, owned_kinds, render_keys
from tandem.topology_controller.observe import TopologyState, World
from tandem.topology_controller.ownership import FINALIZER, FLAVORS_ANNOTATION, owner_topology
from tandem.topology_controller.refusal_gate import RefusalGate, refused_message
from tandem.topology_controller.status import Finding, status_patch, topology_status, unlabeled_finding

NAMES_SHOWN = 5  # objects named in a message; the rest are counted
REFUSAL_RETRY_S = 300.0  # a refused write is sent once more this long after its refusal (the process passes its --resync)
ADOPT_HINT = "adopt them with `tandem topology from-hypernodes`"


@dataclass
class _Plan:
    topology: TopologyState
    findings: list[Finding] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # backends whose objects are kept for it
    writes: list[Action] = field(default_factory=list)  # backend objects and flavors
    removing: bool = False  # deletion asked and no group names it

    def find(self, reason: str, message: str) -> None:
        self.findings.append(Finding(reason, message))


def decide(world: World, now: float, refusal_retry: float = REFUSAL_RETRY_S) -> TopologyDecisions:
    gate = RefusalGate(world.memo.refused, now, refusal_retry)
    plans = {t.name: _Plan(t) for t in world.topologies}
    renders: list[tuple[str, str, Rendered]] = []  # (topology, backend, rendering), in topology then backend order
    protected: set[tuple[str, str]] = set()  # (kind, topology): its objects of the kind are left as they are
    kinds = [kind for backend in world.backends for kind in owned_kinds(backend)]
    koordinator = _koordinator_topology(world) if "koordinator" in world.backends else None
    flavor_requests: list[tuple[_Plan, str]] = []  # (plan, Kueue Topology name)
    for state in world.topologies:
        plan = plans[state.name]
        users = world.users(state.name)
        if state.deleting:  # valid or not: a deletion is never stuck on a spec
            if users:
                plan.find("DeletionBlocked", f"deletion waits while {len(users)} InferenceGroup(s) name it: {_names([u.key for u in users])}")
                protected |= {(kind, state.name) for kind in kinds}
            else:
                plan.removing = True
            continue
        if state.typed is None:
            plan.find("InvalidSpec", "; ".join(str(p) for p in state.problems) + "; its scheduler objects are left as they are")
            protected |= {(kind, state.name) for kind in kinds}
            continue
        _render(world, state, plan, renders, protected, koordinator, flavor_requests)
    converged = _converged(world, plans, renders, protected, kinds)
    for name, (writes, findings) in converged.items():
        if name in plans:
            plans[name].writes += writes
            plans[name].findings += findings
    for plan, topology_name in flavor_requests:
        _flavors(world, plan, topology_name)
    decided = [_finish(world, plan, now, gate) for plan in plans.values()]
    orphans = [TopologyActions(name, tuple(gate.admitted(writes))) for name, (writes, _) in sorted(converged.items()) if name not in plans and writes]
    return TopologyDecisions(tuple(d for d in decided + orphans if d.actions), held=tuple(gate.held))


def _render(
    world: World,
    state: TopologyState,
    plan: _Plan,
    renders: list[tuple[str, str, Rendered]],
    protected: set[tuple[str, str]],
    koordinator: str | None,
    flavor_requests: list[tuple[_Plan, str]],
) -> None:
    typed = state.typed
    assert typed is not None
    foreign_hypernodes = world.foreign.get("HyperNode", {})
    for backend in world.backends:
        if backend == "volcano" and foreign_hypernodes:
            names = sorted(foreign_hypernodes)
            plan.find(
                "ForeignHyperNodes",
                f"{len(names)} HyperNode(s) not made by tandem exist ({_names(names)}): a second tree over the same nodes "
                f"would clash, so tandem writes none for this topology; {ADOPT_HINT}",
            )
            protected.add(("HyperNode", state.name))
            continue
        if backend == "koordinator" and koordinator != state.name:
            plan.find(
                "KoordinatorTopologyTaken",
                f"Koordinator reads one ClusterNetworkTopology ({KOORDINATOR_TOPOLOGY_NAME!r}); it follows ClusterTopology "
                f"{koordinator!r} (the one named {KOORDINATOR_TOPOLOGY_NAME!r}, else the oldest)",
            )
            continue
        paths = world.paths[render_keys(backend, typed)]
        levels = tuple((lv.name, lv.node_label) for lv in typed.spec.levels)
        key = (state.raw["metadata"].get("uid"), levels, paths.full_serial)
        previous = world.memo.previous(backend, state.name)
        rendered: Rendered = world.memo.render(
            backend, state.name, key, paths, lambda b=backend: desired_objects(b, typed, state.raw, paths.representatives(), previous)  # type: ignore[misc]
        )
        if rendered.refused is not None:
            plan.find("BackendRefused", f"{backend}: {rendered.refused}; its objects for this topology are left as they are")
            protected |= {(kind, state.name) for kind in owned_kinds(backend)}
            continue
        plan.kept.append(backend)
        renders.append((state.name, backend, rendered))
        if backend == "kueue" and (state.raw["metadata"].get("annotations") or {}).get(FLAVORS_ANNOTATION):
            topology_name = next(o["metadata"]["name"] for o in rendered.objects if o["kind"] == "Topology")
            flavor_requests.append((plan, topology_name))


Converged = dict[str, tuple[list[Action], list[Finding]]]  # topology -> (writes, findings)


def _converged(
    world: World, plans: dict[str, _Plan], renders: list[tuple[str, str, Rendered]], protected: set[tuple[str, str]], kinds: list[str]
) -> Converged:
    """`_converge`, kept while its inputs are these very renderings and no object of the
    backend kinds changed: the same inputs give the same writes (a settled pass over
    67,000 HyperNodes compares none of them)."""
    memo = world.memo
    key = (tuple((t, b) for t, b, _ in renders), frozenset(protected), tuple(sorted(plans)), tuple(memo.kind_serial.get(k, 0) for k in kinds))
    kept = memo.converged
    if kept is not None and kept[0] == key and len(kept[1]) == len(renders) and all(a is r for a, (_, _, r) in zip(kept[1], renders)):
        result: Converged = kept[2]
        return result
    result = _converge(world, plans, renders, protected, kinds)
    memo.converged = (key, tuple(r for _, _, r in renders), result)
    return result


def _converge(
    world: World, plans: dict[str, _Plan], renders: list[tuple[str, str, Rendered]], protected: set[tuple[str, str]], kinds: list[str]
) -> Converged:
    """Creates and patches for what is wanted; deletes of tandem's objects nobody wants
    (under their topology's name, also when it is gone). A pair found in step last time,
    both objects unchanged since, is not compared again."""
    memo = world.memo
    out: Converged = {}

    def of(topology: str) -> tuple[list[Action], list[Finding]]:
        return out.setdefault(topology, ([], []))

    wanted: dict[tuple[str, str], tuple[str, Object]] = {}  # (kind, name) -> (topology, object)
    for topology, _, rendered in renders:
        for obj in rendered.objects:
            target = (key_of(obj), obj["metadata"]["name"])
            other = wanted.get(target)
            if other is not None:
                of(topology)[1].append(Finding("NameTaken", f"{target[0]} {target[1]} is also wanted by ClusterTopology {other[0]!r}, which keeps it"))
                continue
            wanted[target] = (topology, obj)
    in_step: dict[tuple[str, str], tuple[Object, Object]] = {}
    for target, (topology, obj) in wanted.items():  # in topology, backend, kind, name order
        kind, name = target
        writes, findings = of(topology)
        if name in world.foreign.get(kind, {}):
            findings.append(Finding("NameTaken", f"{kind} {name} exists and is not tandem's (it lacks tandem's ownership labels): left as it is"))
            continue
        current = world.owned.get(kind, {}).get(name)
        if current is None:
            writes.append(CreateObject(obj, why=f"{kind} {name} is missing", kind=kind))
            continue
        if memo.agreed(target, obj, current):
            in_step[target] = (obj, current)
            continue
        patch = _patch(current, obj)
        if patch is None:
            in_step[target] = (obj, current)
        else:
            writes.append(PatchObject(kind, name, patch, current["metadata"].get("resourceVersion"), why=f"{kind} {name} differs"))
    memo.in_step = in_step
    for kind in kinds:
        owned = world.owned.get(kind, {})
        for name in sorted(set(owned) - {n for k, n in wanted if k == kind}):
            obj = owned[name]
            owner = owner_topology(obj) or ""
            if (kind, owner) in protected:
                continue
            writes, _ = of(owner)
            why = f"{kind} {name} is no longer wanted" if owner in plans else f"ClusterTopology {owner} is gone"
            writes.append(DeleteObject(kind, name, obj["metadata"].get("uid"), why=why, resource_version=obj["metadata"].get("resourceVersion")))
    return out


def _patch(current: Object, wanted: Object) -> dict[str, Any] | None:
    """The merge patch bringing `current` to `wanted` in what tandem keeps (spec, tandem's
    labels, its owner reference), or None when they agree; others' labels stay."""
    meta, want = current.get("metadata") or {}, wanted["metadata"]
    labels = meta.get("labels") or {}
    label_patch = {k: v for k, v in want["labels"].items() if labels.get(k) != v}
    refs = meta.get("ownerReferences") or []
    ours = want["ownerReferences"][0]
    # exactly one ClusterTopology reference, to this topology's uid (an object moved from
    # another topology, Koordinator's, loses the other's)
    topology_refs = [r for r in refs if r.get("kind") == "ClusterTopology"]
    has_ref = len(topology_refs) == 1 and topology_refs[0].get("uid") == ours["uid"]
    spec_patch = merge_diff(current.get("spec"), wanted.get("spec"))
    if not label_patch and has_ref and spec_patch is SAME:
        return None
    body: dict[str, Any] = {}
    if label_patch or not has_ref:
        body["metadata"] = {}
        if label_patch:
            body["metadata"]["labels"] = label_patch
        if not has_ref:
            body["metadata"]["ownerReferences"] = [r for r in refs if r.get("kind") != "ClusterTopology"] + [ours]
    if spec_patch is not SAME:
        body["spec"] = spec_patch
    return body


def _flavors(world: World, plan: _Plan, topology_name: str) -> None:
    raw = plan.topology.raw
    listed = (raw["metadata"].get("annotations") or {}).get(FLAVORS_ANNOTATION, "")
    for name in sorted({n.strip() for n in listed.split(",") if n.strip()}):
        flavor = world.flavors.get(name)
        spec = {} if flavor is None else flavor.get("spec") or {}
        if flavor is None:
            plan.find("ResourceFlavorRefused", f"ResourceFlavor {name} (asked by {FLAVORS_ANNOTATION}) not found")
        elif spec.get("topologyName") == topology_name:
            continue
        elif spec.get("topologyName"):
            plan.find(
                "ResourceFlavorRefused",
                f"ResourceFlavor {name} names Topology {spec['topologyName']!r}; Kueue keeps topologyName immutable once set",
            )
        elif not spec.get("nodeLabels"):
            plan.find("ResourceFlavorRefused", f"ResourceFlavor {name} has no spec.nodeLabels; Kueue requires at least one with a topologyName")
        else:
            plan.writes.append(
                PatchObject("ResourceFlavor", name, {"spec": {"topologyName": topology_name}}, flavor["metadata"].get("resourceVersion"),
                            why=f"ResourceFlavor {name} is asked to use Topology {topology_name}")
            )


def _finish(world: World, plan: _Plan, now: float, gate: RefusalGate) -> TopologyActions:
    """The topology's writes in order: finalizer, backend objects, status; then events.
    Writes the API refused as they are are held back (`gate`)."""
    state, raw = plan.topology, plan.topology.raw
    meta = raw["metadata"]
    finalizers = list(meta.get("finalizers") or [])
    actions: list[Action] = []
    ref = ObjectRef.of(raw)
    if plan.removing:
        actions += gate.admitted(plan.writes)
        removal = PatchObject("ClusterTopology", state.name, {"metadata": {"finalizers": [f for f in finalizers if f != FINALIZER]}},
                              meta.get("resourceVersion"), why="no group names it: deletion may go on")
        if FINALIZER in finalizers and len(actions) == len(plan.writes) and gate.admit(removal):  # not while a delete is held
            actions.append(removal)
            return TopologyActions(state.name, tuple(actions), after_deletes=len(actions) - 1)
        return TopologyActions(state.name, tuple(actions))
    if FINALIZER not in finalizers and not state.deleting:
        actions += gate.admitted([PatchObject("ClusterTopology", state.name, {"metadata": {"finalizers": finalizers + [FINALIZER]}},
                                              meta.get("resourceVersion"), why="protect it from deletion while groups name it")])
    actions += gate.admitted(plan.writes)
    users = [u.key for u in world.users(state.name)]
    findings = list(plan.findings)
    refusals = gate.of(state.name)
    if refusals:
        findings.append(Finding("WriteRefused", refused_message(refusals, NAMES_SHOWN)))
    levels = counts = None
    if state.typed is not None and state.level_keys is not None:
        levels = [(lv.name, lv.node_label) for lv in state.typed.spec.levels]
        counts = world.paths[state.level_keys].counts(EXAMPLES)
        unlabeled = unlabeled_finding(counts, levels)
        if unlabeled is not None:
            findings.append(unlabeled)
    wanted = topology_status(raw, levels, counts, world.nodes, users, plan.kept, findings, now)
    patch = status_patch(raw.get("status"), wanted)
    status = None if patch is None else PatchStatus("ClusterTopology", state.name, patch)
    status_held = status is not None and not gate.admit(status)
    if status is not None and not status_held:
        actions.append(status)
    owned = frozenset(kind for backend in world.backends for kind in owned_kinds(backend))
    if any(isinstance(a, (CreateObject, PatchObject, DeleteObject)) and a.target[0] in owned for a in actions):
        actions.append(RecordWrites(ref, ", ".join(plan.kept) or "backends", owned))  # its counts: the writes that go through (apply)
    if status_held:  # the status cannot tell what changed: the refusals just learnt, once, by an event
        fresh = [r for r in gate.of(state.name) if r.new]
        if fresh:
            actions.append(RecordEvent(ref, "Warning", "WriteRefused", refused_message(fresh, NAMES_SHOWN)))
        return TopologyActions(state.name, tuple(actions))
    before = {c.get("type"): c for c in (raw.get("status") or {}).get("conditions") or () if isinstance(c, dict)}
    after = {c["type"]: c for c in wanted["conditions"]}
    blocked = next((f for f in findings if f.reason == "DeletionBlocked"), None)
    if blocked is not None and (before.get("Ready") or {}).get("message") != blocked.message:
        actions.append(RecordEvent(ref, "Warning", "DeletionBlocked", blocked.message))
    degraded = after["Degraded"]
    if degraded["status"] == "True" and blocked is None and (before.get("Degraded") or {}).get("message") != degraded["message"]:
        actions.append(RecordEvent(ref, "Warning", degraded["reason"], degraded["message"]))
    return TopologyActions(state.name, tuple(actions))


def _koordinator_topology(world: World) -> str | None:
    """The ClusterTopology Koordinator's one ClusterNetworkTopology follows (see the module's docstring)."""
    candidates = [t for t in world.topologies if t.typed is not None and not t.deleting]
    if any(t.name == KOORDINATOR_TOPOLOGY_NAME for t in candidates):
        return KOORDINATOR_TOPOLOGY_NAME
    if not candidates:
        return None
    oldest = min(candidates, key=lambda t: (seconds(t.raw["metadata"].get("creationTimestamp")), t.name))
    return oldest.name


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")
