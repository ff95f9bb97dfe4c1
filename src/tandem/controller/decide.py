"""Decide: the whole pass as a pure function of one snapshot and the time.

`decide(state, now, placer)` returns every write and event of the pass, per group, when
the next pass is due (`requeue_after`), and what the memo should keep for the next pass
(`Decisions.memory`, stored by the caller). It reads nothing but its arguments and writes
nothing: the same snapshot and time give the same actions.

For each valid group, in order:

1. **Release** what holds capacity half-done for longer than
   `scheduler.gangTimeoutSeconds`: a pod placed but not bound in time, and every pod of a
   unit below some role's minimum since `partialSince`; such a unit is rolled out again
   after a backoff.
2. **Companions**: the group's headless Service, and per unit the peers ConfigMap
   (`/etc/tandem/peers.json`, `peers.py`: each role's bound replicas, their pods'
   addresses, ports, readiness and domains, and which `to` replicas each `from` replica of
   an affinity sits near), created or brought up to date with its generation bumped; a
   unit beyond `spec.replicas` loses its ConfigMap.
3. **Coordinate**: units beyond `spec.replicas` go whole; per unit, the coordination
   planner turns its replicas and remembered state into deletes, admissions and creates
   (pods are created with tandem's scheduling gate, owned by the group). A replica that
   lost pods is Failed (re-created whole), unless it is a creation cut short or its role's
   `recovery` is ReplaceMissingPod: then its missing pods are created and placed beside
   its surviving ones where it stays whole (`recovery.py`), or it is Failed after all.
4. **Place** (all groups together): admitted pods still gated go to the engine, with each
   unit's running replicas fixed and every other pod's node taken (a pod this pass
   deletes included: it holds its node until it is gone); the engine chooses
   each unit's domain for the counts its spec asks for (`RoleDemand.eventual`), not only
   for what the current step admits. A pod created in
   this pass is created already placed (`nodeSelector` on `kubernetes.io/hostname`,
   without tandem's gate); an existing one gets the same in one preconditioned patch.
4b. **Delegate** (a group whose `scheduler.backend` is not `native`): its pods were made
   as its scheduler needs them and leave tandem's gate once admitted (step 4 never places
   them); each unit's gang objects are brought to the unit's step (`delegation`), and what
   the scheduler says of a waiting unit (`backend_words`) is kept for its status.
5. **Provision** (off by default): a unit the engine could not place asks the cluster's
   node autoscaler for its minimum with a ProvisioningRequest (see `provisioning`).
6. **Status**: the typed status of what the group will be after these writes, merge-
   patched (only the reconcile pass's keys) when it differs from what is stored: each
   unit's state (the engine's words for one that does not fit) and domain, the
   conditions with reasons and messages (`health`), Degraded for a write the API refused
   last pass (`memo.rejected`) or a Service name taken; Normal events for what changed.

A group's events are folded into one per type and reason (`event_digest`).

An invalid group (see `validity`), or one whose scheduler is not enabled or not served
(`delegation.liveness`), gets only an `Accepted=False` condition and a Warning event; its
pods are left as they are.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from collections import Counter

from tandem.api.group_status import AUTOSCALING_CONDITION, RECONCILE_KEYS, UNIT_STATES, InferenceGroupStatus, RoleStatus, UnitState, UnitStatus, list_units, worded
from tandem.api.merge import merge_patch
from tandem.api.naming import GROUP_LABEL, PEERS_FILE, POD_INDEX_LABEL, REPLICA_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.api.resources import ClusterTopology, InferenceGroup, TopologyLevel
from tandem.backends.base import Backend
from tandem.cluster.kind_keys import object_key
from tandem.api.timestamps import rfc3339, seconds
from tandem.cluster.writes import RecordEvent
from tandem.controller.actions import Action, CreateObject, Decisions, DeleteObject, GroupActions, PatchObject, PatchStatus
from tandem.api.naming import ADMITTED, ASSIGNED_AT, CREATION, GATE, HOSTNAME_LABEL, peers_config_map, pod_name
from tandem.cluster.payloads import PodPayload, as_object, as_pod
from tandem.cluster.pods import assigned_node, pod_failed, pod_index
from tandem.cluster.ports import Object, ObjectRef
from tandem.cluster.replicas import UnitRead, creation_of, creations_whole, is_functional, minimum_placed, replicas_of_unit, unit_replicas
from tandem.controller.affinity_keep import DomainOf, domains_in, keep_affinities
from tandem.controller.backend_words import Words, unit_words
from tandem.backends.delegated_kinds import ALL_KEYS as GANG_KINDS
from tandem.controller.delegation import (
    NATIVE,
    DelegationSettings,
    admission_patch,
    delegated_pod,
    desired_gang_objects,
    gang_writes,
    liveness,
    made_alone,
    pod_backend,
    priority_class_for,
)
from tandem.controller.domains import unit_domain
from tandem.controller.event_digest import digest
from tandem.controller.health import Health, verdict
from tandem.controller.fit import REASON as NEVER_FITS, Capacity, never_fits, said_never_fit
from tandem.controller.manifests import headless_service, replica_pods, revision_of
from tandem.controller.peers import (
    Path,
    content_digest,
    domain_path,
    fresh_generation,
    peers_body,
    peers_config_map_object,
    stored_content,
    with_generation,
)
from tandem.controller.memo import MemoUpdate
from tandem.controller.observe import ClusterState, GroupState
from tandem.controller.provisioning import PROVISIONING_KINDS, ProvisioningSettings, UnitNeed, plan_provisioning
from tandem.controller.recovery import Recovery
from tandem.controller.status_patch import coordination_of, condition, memory_of, owned_patch, read_status, unchanged
from tandem.coordination.model import CoordinationStatus, Decision, Observed, Replica, UnitSpec, backoff_seconds
from tandem.coordination.planner import next_step
from tandem.placement import Plan, place
from tandem.placement.demand import PlacedReplica, UnitDemand, units_from_group

Placer = Callable[..., Plan]
PodKey = tuple[str, str]  # (namespace, name)
# A deadline reached exactly is not yet passed (timeouts compare with `>`): wake just after.
_AFTER_DEADLINE_S = 1e-3


def decide(
    state: ClusterState,
    now: float,
    placer: Placer = place,
    provisioning: ProvisioningSettings = ProvisioningSettings(),
    delegation: DelegationSettings = DelegationSettings(),
) -> Decisions:
    stamp = _quiet_stamp(state)
    quiet = state.memo.quiet
    if quiet is not None and quiet[0] == stamp and now < quiet[1]:
        # Every group was skipped as settled last time, and nothing any of them read has
        # changed since (the very same group states, topologies, Services, served kinds and
        # freed capacity) nor has a deadline come: each would be skipped again. What the
        # loop below would return then, without a look at each group.
        requeue = quiet[1] - now + _AFTER_DEADLINE_S if quiet[1] != math.inf else None
        return Decisions((), requeue, 0, (), MemoUpdate(settled_hits=len(state.groups), quiet=quiet))
    expected = _Expected(state.pods)  # pods as they will be
    drafts, deadlines = [], []
    classes: set[str] = set()  # PriorityClasses this pass creates (one create per name, whichever group asks first)
    skipped = 0
    capacities: dict[str, Capacity] = {}  # per topology, built when first needed this pass
    recovery = Recovery(state.memo.placement, state.topologies, dict(state.topology_versions))
    for group in state.groups:
        inputs = state.settled_key(group)
        until = state.memo.settled_until(group.key, inputs) if group.valid else None
        skipped += until is not None
        if until is not None and now < until:  # settled with these very inputs, and no deadline since
            if until != math.inf:
                deadlines.append(until)
            continue
        draft = _Draft(group, inputs)
        if group.valid:
            name = draft.typed.spec.scheduler.backend
            draft.unavailable = liveness(name, delegation, state.served)
            if name != NATIVE and draft.unavailable is None:
                draft.backend = delegation.backend(name)
                draft.topology = state.topologies.get(draft.typed.spec.topology_name)
        if draft.acting:
            # the revision hashes the roles, their pods and templates; the rest is what replicas are read against
            spec = (group.raw["metadata"].get("uid"), draft.revision, draft.before.creations, draft.replace_missing)
            draft.reads = _Reads(spec, state.memo.unit_reads.get(group.key))
        drafts.append(draft)
        if draft.acting:
            # With provisioning, nodes of another shape may come: the unit asks for them instead.
            asks_nodes = provisioning.enabled and provisioning.class_for(draft.typed) is not None
            draft.never_fit = None if asks_nodes else _never_fit(state, draft.typed, capacities)
            _release(draft, now, expected)
            _companions(draft, now, expected, state)
            _coordinate(draft, now, expected, recovery, domains_in(state.nodes, state.topologies.get(draft.typed.spec.topology_name)))
    placed, notes, ran, idle = _place(state, drafts, now, expected, placer, recovery)
    for draft in drafts:
        if draft.acting:
            _delegate(draft, expected, state, classes)
            _provision(draft, now, expected, provisioning)
            _note_room(draft, expected)
            _status(draft, now, expected, state)
        elif draft.unavailable is not None:
            _invalid(draft, now, *draft.unavailable, state="BackendUnavailable")
        else:
            _invalid(draft, now)
        draft.actions = digest(draft.actions)  # one event per (type, reason): after the last use of `pod_write`
    deadlines += [d for draft in drafts for d in draft.deadlines]
    requeue = max(min(deadlines) - now, 0.0) + _AFTER_DEADLINE_S if deadlines else None
    groups = tuple(GroupActions(*draft.group.key, actions=tuple(draft.actions), fence=_fence(draft)) for draft in drafts)
    freed = state.memo.placement.freed
    memory = MemoUpdate(
        settled=tuple(
            (draft.group.key, draft.settled_key, min(draft.deadlines, default=math.inf), freed if _waiting(draft) or draft.never_fit else None)
            for draft in drafts
            # a group with a refused write is decided again: it says so until the write succeeds
            if draft.settled_key is not None and draft.group.valid and not draft.actions and draft.group.key not in state.memo.rejected
        ),
        settled_hits=skipped,
        unit_reads=tuple((draft.group.key, draft.reads.settle()) for draft in drafts if draft.reads is not None),
        placement_ran=ran,
        idle_placement=idle,
        quiet=None if drafts else (stamp, min(deadlines, default=math.inf)),
    )
    return Decisions(groups, requeue, placed, tuple(notes), memory)


def _quiet_stamp(state: ClusterState) -> tuple[Any, ...]:
    """Everything a settled group's skip reads but the clock (`ClusterState.settled_key`,
    `Memo.settled_until`): the group states (one tuple, the same object while no group,
    pod or companion changes), the topologies' versions, any Service's change, the served
    kinds (one object while the same) and the capacity freed. Compared by identity where
    the objects are kept as one."""
    memo = state.memo
    return (_Same(state.groups), state.topology_versions, memo.index.kind_serial.get("Service", 0), _Same(state.served), memo.placement.freed)


class _Same:
    """Equal to another only when holding the very same object (a tuple of thousands of
    group states compares in one step, and is never mistaken for an equal copy)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


class _Reads:
    """What a decision read of a group's units, by the identity of the pods read: a pass
    reads a unit up to four times (peers, coordination, demands, status), and a group is
    decided again when any one of its pods changes, most units unchanged. The reads of
    the group's last decision are kept in the memo for the next one while the group (its
    uid) and what the reads depend on (its revision: roles, pods per replica, templates)
    are the same. Each entry keeps its pods, so no id is reused while it is remembered."""

    def __init__(self, spec: tuple[Any, ...], before: "_Reads | None"):
        self.spec = spec
        self._before = before if before is not None and before.spec == spec else None
        self._replicas: dict[tuple[int, ...], tuple[tuple[PodPayload, ...], UnitRead]] = {}
        # per unit, by its pods and their domain paths: its peers file's content digest, and
        # the stored file last found to hold it (no text kept: 65,536 units' files are MBs)
        self._peers: dict[tuple[int, tuple[int, ...], tuple[Path, ...], tuple[str, ...]], tuple[tuple[PodPayload, ...], bytes, str | None]] = {}

    def replicas(self, pods: list[PodPayload], compute: Callable[[], UnitRead]) -> UnitRead:
        key = tuple(map(id, pods))
        hit = self._replicas.get(key) or (self._before._replicas.get(key) if self._before else None)
        if hit is None:
            hit = (tuple(pods), compute())
        self._replicas[key] = hit
        return hit[1]

    def peers(
        self, unit: int, pods: list[PodPayload], paths: tuple[Path, ...], levels: tuple[str, ...], stored: str | None, compute: Callable[[], str]
    ) -> str | None:
        """The unit's peers body when `stored` (the file stored) does not hold it, else None.
        By its pods and their domain paths (a node relabelled changes the body, not the
        pods): when they are as last time, a hash of `stored` (none when it is the very
        file checked last time) tells it is current without building the body."""
        key = (unit, tuple(map(id, pods)), paths, levels)
        hit = self._peers.get(key) or (self._before._peers.get(key) if self._before else None)
        held = stored_content(stored)
        if hit is not None and held is not None and (hit[2] is stored or content_digest(held[1], is_body=False) == hit[1]):
            self._peers[key] = (hit[0], hit[1], stored)
            return None
        body = compute()
        current = held is not None and held[1] == body[1:]
        self._peers[key] = (tuple(pods), content_digest(body), stored if current else None)
        return None if current else body

    def settle(self) -> "_Reads":
        """These reads, without the last decision's (kept for the next one)."""
        self._before = None
        return self


def _waiting(draft: _Draft) -> bool:
    """Whether a pod of the group waits for a node."""
    return any(_waits_for_placement(p) for p in draft.group.pods)


def _fence(draft: _Draft) -> str | None:
    """The group's resourceVersion when the pass creates anything for it (else None)."""
    if not any(isinstance(action, CreateObject) for action in draft.actions):
        return None
    return draft.group.raw["metadata"].get("resourceVersion")


class _Expected:
    """Pods as they will be after this pass: the observed ones, with this pass's creates,
    patches and deletes laid over them (the observed map is shared and not copied)."""

    def __init__(self, observed: Mapping[PodKey, PodPayload]):
        self._observed = observed
        self._over: dict[PodKey, PodPayload | None] = {}

    def get(self, key: PodKey) -> PodPayload | None:
        if key in self._over:
            return self._over[key]
        return self._observed.get(key)

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None  # type: ignore[arg-type]

    def __getitem__(self, key: PodKey) -> PodPayload:
        pod = self.get(key)
        if pod is None:
            raise KeyError(key)
        return pod

    def __setitem__(self, key: PodKey, pod: PodPayload) -> None:
        self._over[key] = pod

    def __delitem__(self, key: PodKey) -> None:
        self._over[key] = None

    def written(self) -> bool:
        """Whether this pass has created, changed or deleted a pod so far."""
        return bool(self._over)


@dataclass
class _Draft:
    """One group's actions as the pass builds them."""

    group: GroupState
    settled_key: tuple[Any, ...] | None = None
    actions: list[Action] = field(default_factory=list)
    released: set[int] = field(default_factory=set)
    decisions: dict[int, Decision] = field(default_factory=dict)
    deadlines: list[float] = field(default_factory=list)
    pod_write: dict[PodKey, int] = field(default_factory=dict)  # a pod's create or patch in `actions`
    unschedulable: set[int] = field(default_factory=set)  # units the engine could not place this pass
    waits_on: dict[int, str] = field(default_factory=dict)  # per unit, what it waits on (provisioning)
    room: dict[int, tuple[str, dict[str, int]]] = field(default_factory=dict)  # unit -> the engine's words and replicas it left waiting, per role
    reads: _Reads | None = None  # what this pass read of the group's units
    assessed: set[int] = field(default_factory=set)  # units the engine placed (or tried to) in this pass
    verdicts: dict[int, str] = field(default_factory=dict)  # the engine's words for a unit it could not place whole
    faults: list[tuple[str, str]] = field(default_factory=list)  # (reason, message): what keeps the group Degraded
    never_fit: str | None = None  # why no unit could ever fit the nodes (`fit.py`): then none is created
    unavailable: tuple[str, str] | None = None  # (reason, message): its backend is not enabled or not served (`delegation.liveness`)
    backend: Backend | None = None  # the scheduler a delegated group is handed to; None: tandem's engine places it
    topology: ClusterTopology | None = None  # the group's ClusterTopology, for its backend
    words: dict[int, Words] = field(default_factory=dict)  # per unit, what its scheduler says of it (delegated groups)
    queued: set[int] = field(default_factory=set)  # units with a replica its scheduler queues (`_queue_time`)
    _level_keys: tuple[list[TopologyLevel], tuple[str, ...], tuple[str, ...]] | None = None  # (`level_keys`)

    @property
    def acting(self) -> bool:
        """Whether the pass acts for the group: it is valid and its scheduler is there."""
        return self.group.valid and self.unavailable is None

    @property
    def typed(self) -> InferenceGroup:
        assert self.group.typed is not None
        return self.group.typed

    @functools.cached_property
    def before(self) -> InferenceGroupStatus:
        """The status as stored (read once per pass)."""
        return read_status(self.group.raw)

    @functools.cached_property
    def revision(self) -> str:
        """The revision the group's template asks for now."""
        return revision_of(self.typed, self.group.raw)

    def replicas(self, pods: list[PodPayload]) -> UnitRead:
        """`replicas_of_unit` of one unit's pods, read against the current revision (a
        replica of another cut short in its creation cannot be completed: it is Failed,
        for coordination and status alike). The answer is shared: not to be changed."""
        assert self.reads is not None
        sizes = {r.name: r.pods_per_replica for r in self.typed.spec.roles}
        return self.reads.replicas(pods, lambda: replicas_of_unit(pods, sizes, self.revision, self.before.creations, self.replace_missing))

    @functools.cached_property
    def replace_missing(self) -> frozenset[str]:
        """The roles whose replicas get only their missing workers back (`recovery`)."""
        return frozenset(r.name for r in self.typed.spec.roles if r.recovery == "ReplaceMissingPod")

    @functools.cached_property
    def creation(self) -> int:
        """The number this pass's creates carry (`naming.CREATION`): above every one so far."""
        return max([self.before.creations, *map(creation_of, self.group.pods)]) + 1

    def peers(
        self, unit: int, pods: list[PodPayload], nodes: Mapping[tuple[str, str], Object], levels: list[TopologyLevel], stored: str | None, now: float
    ) -> str | None:
        """The unit's peers file to store (`peers.py`), or None when `stored` is current."""
        assert self.reads is not None
        labels, names = self.level_keys(levels)
        paths = tuple([domain_path(p, nodes, labels) for p in pods])

        def body() -> str:
            by_name = {p["metadata"]["name"]: path for p, path in zip(pods, paths)}
            return peers_body(self.group.raw, unit, self.typed, self.replicas(pods), names, by_name)

        text = self.reads.peers(unit, pods, paths, names, stored, body)
        return None if text is None else with_generation(text, stored, fresh_generation(now))

    def level_keys(self, levels: list[TopologyLevel]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The levels' node labels and names, read once per pass."""
        if self._level_keys is None or self._level_keys[0] is not levels:
            self._level_keys = (levels, tuple(level.node_label for level in levels), tuple(level.name for level in levels))
        return self._level_keys[1], self._level_keys[2]

    def event(self, type_: str, reason: str, message: str) -> None:
        self.actions.append(RecordEvent(ObjectRef.of(self.group.raw), type_, reason, message))  # type: ignore[arg-type]

    def delete_pod(self, pod: PodPayload, why: str, expected: _Expected) -> None:
        key = _pod_key(pod)
        if key not in expected:
            return
        meta = pod["metadata"]
        # uid and resourceVersion preconditions: the pod deleted is the one decided on, as it
        # was read (a cache that lagged may have shown it unbound, failed or surplus before
        # it changed; then the delete fails with a Conflict and the next pass decides again)
        self.actions.append(
            DeleteObject("Pod", meta.get("namespace"), meta["name"], uid=meta.get("uid"), resource_version=meta.get("resourceVersion"), why=why)
        )
        del expected[key]


# ----------------------------------------------------------------------------- 1. release


def _release(draft: _Draft, now: float, expected: _Expected) -> None:
    timeout = draft.typed.spec.scheduler.gang_timeout_seconds
    expired = set()
    by_unit = _live_by_unit(draft.group, expected)
    for unit in draft.before.units:
        if unit.partial_since is None:
            continue
        deadline = seconds(unit.partial_since) + timeout
        if now <= deadline:
            draft.deadlines.append(deadline)
        elif _partial(draft, by_unit.get(unit.index, [])):
            expired.add(unit.index)
        # else whole again (or holding nothing) since the status was written: nothing to
        # release, and this pass's status clears `partialSince`
    for pod in sorted(draft.group.pods, key=pod_index, reverse=True):  # a replica's workers before its leader
        meta, spec = pod["metadata"], pod.get("spec", {})
        if meta.get("deletionTimestamp"):
            continue
        if int((meta.get("labels") or {}).get(UNIT_LABEL, -1)) in expired:
            draft.delete_pod(pod, "its unit outlived the gang timeout partially placed", expected)
            continue
        assigned = (meta.get("annotations") or {}).get(ASSIGNED_AT)
        if assigned is None or spec.get("nodeName") or pod_failed(pod):
            continue
        if now - seconds(assigned) > timeout:
            draft.delete_pod(pod, "not bound within the gang timeout", expected)
            draft.event("Warning", "NotBound", f"pod {meta['name']} not bound within gangTimeoutSeconds ({timeout}s); released")
        else:
            draft.deadlines.append(seconds(assigned) + timeout)
    for index in sorted(expired):
        draft.event(
            "Warning", "GangTimeout", f"unit {index} partially placed for more than {timeout}s; released to be placed again as a unit"
        )
    draft.released = expired


def _partial(draft: _Draft, pods: list[PodPayload]) -> bool:
    """Holding a node (a bound pod) without every role's minimum bound: what `partialSince` times."""
    group = draft.typed
    return any(p["spec"].get("nodeName") for p in pods) and not minimum_placed(unit_replicas(pods, group, draft.replicas(pods)), group)


# ----------------------------------------------------------------------------- 2. companions


def _companions(draft: _Draft, now: float, expected: _Expected, state: ClusterState) -> None:
    """Service first, then the peers files, so a pod created in this pass finds its
    ConfigMap; the files list only bound replicas, so creating pods changes none. A file
    is written only when its content changes, with the stored generation plus one (a new
    one, or one written anew, starts at `fresh_generation`). A Service of the same name
    that is not the group's (without its label) is not fought over: the group is Degraded
    and says whose name it is."""
    raw, typed = draft.group.raw, draft.typed
    named = state.service_named_like(draft.group)
    topology = state.topologies.get(typed.spec.topology_name)
    levels = topology.spec.levels if topology is not None else []
    existing = {(c["kind"], c["metadata"]["name"]): c for c in draft.group.companions}
    service = headless_service(raw)
    if ("Service", service["metadata"]["name"]) not in existing:
        if named is None:
            draft.actions.append(CreateObject(service, "the group's headless Service"))
        else:
            where = f"{service['metadata']['namespace']}/{service['metadata']['name']}"
            draft.faults.append(("ServiceNameTaken", (
                f"Service {where} exists and is not this group's (it lacks the label {GROUP_LABEL}={raw['metadata']['name']}): "
                "the pods get no DNS names (peers cannot reach each other) until it is deleted or renamed"
            )))
    by_unit = _live_by_unit(draft.group, expected)
    for unit in range(typed.spec.replicas):
        current = existing.get(("ConfigMap", peers_config_map(raw["metadata"]["name"], unit)))
        stored = (current.get("data") or {}).get(PEERS_FILE) if current is not None else None
        document = draft.peers(unit, by_unit.get(unit, []), state.nodes, levels, stored, now)
        if document is None:
            continue  # the stored file is current
        if current is None:
            draft.actions.append(CreateObject(peers_config_map_object(raw, unit, document), f"unit {unit}: peers file"))
        else:
            meta = current["metadata"]
            patch = {"data": {PEERS_FILE: document}}
            draft.actions.append(PatchObject("ConfigMap", meta.get("namespace"), meta["name"], patch, meta.get("resourceVersion"), f"unit {unit}: peers changed"))
    for (kind, _), obj in sorted(existing.items()):
        index = (obj["metadata"].get("labels") or {}).get(UNIT_LABEL)
        if kind == "ConfigMap" and index is not None and index.isdigit() and int(index) >= typed.spec.replicas:
            meta = obj["metadata"]
            draft.actions.append(DeleteObject("ConfigMap", meta.get("namespace"), meta["name"], uid=meta.get("uid"), why=f"unit {index} is beyond spec.replicas"))


# ----------------------------------------------------------------------------- 3. coordinate


def _coordinate(draft: _Draft, now: float, expected: _Expected, recovery: Recovery, domain_of: DomainOf) -> None:
    raw, typed, revision = draft.group.raw, draft.typed, draft.revision
    spec = UnitSpec.from_group(typed, revision)
    pods_per_replica = {r.name: r.pods_per_replica for r in typed.spec.roles}
    by_unit = _live_by_unit(draft.group, expected)
    for unit in sorted(u for u in by_unit if u >= typed.spec.replicas):
        for pod in by_unit[unit]:
            draft.delete_pod(pod, f"unit {unit} is beyond spec.replicas ({typed.spec.replicas})", expected)
    before = draft.before
    for unit in range(typed.spec.replicas):
        replicas, pods_of = draft.replicas(by_unit.get(unit, []))
        # a replica completed beside its surviving pods only where it stays whole, else Failed
        # (a delegated replica's missing pods are made again and its scheduler places them)
        replicas, repairs = recovery.repair(typed, replicas, pods_of) if draft.backend is None else (replicas, {})
        saved = before.unit(unit)
        memory = coordination_of(saved.coordination) if saved is not None else CoordinationStatus()
        retry_after = seconds(saved.retry_after) if saved is not None and saved.retry_after else None
        if draft.never_fit is not None:  # nothing created for it; what runs is left as it is
            draft.decisions[unit] = Decision("Stalled", f"{NEVER_FITS}: {draft.never_fit}", {}, (), (), memory)
            continue
        if unit in draft.released or (retry_after is not None and now < retry_after and not replicas):
            draft.decisions[unit] = Decision("Stalled", "requeued after a gang timeout; backing off", {}, (), (), memory)
            if retry_after is not None and unit not in draft.released:
                draft.deadlines.append(retry_after)
            continue
        if draft.backend is not None and memory.step_started is not None:
            memory = _queue_time(draft, unit, memory, _queued(replicas, pods_of), spec.step_timeout, now)
        decision = next_step(spec, Observed(tuple(replicas), memory), now)
        # the replicas it deletes: none a Required affinity leans on while an equal one can go
        decision = keep_affinities(typed, revision, decision, replicas, pods_of, domain_of)
        draft.decisions[unit] = decision
        if decision.status.step_started is not None and decision.state == "Progressing":
            draft.deadlines.append(decision.status.step_started + spec.step_timeout)
        if decision.status.retry_after is not None and decision.status.retry_after > now:
            draft.deadlines.append(decision.status.retry_after)
        failed = {(r.role, r.index) for r in replicas if r.phase == "Failed"}
        for delete in decision.delete:
            for pod in pods_of.get((delete.role, delete.index), []):
                draft.delete_pod(pod, f"coordination: {delete.why}", expected)
            if (delete.role, delete.index) in failed:
                draft.event("Normal", "ReplicaReplaced", f"unit {unit}: {delete.role} replica {delete.index} replaced ({delete.why})")
        for ungate in decision.ungate:
            for pod in pods_of.get((ungate.role, ungate.index), []):
                meta = pod["metadata"]
                patch = admission_patch(pod, draft.backend is not None)
                draft.pod_write[_pod_key(pod)] = len(draft.actions)
                draft.actions.append(
                    PatchObject("Pod", meta.get("namespace"), meta["name"], patch, meta.get("resourceVersion"), "admitted by the step")
                )
                expected[_pod_key(pod)] = merge_patch(pod, patch)
        gone = {(d.role, d.index) for d in decision.delete}
        for replica in replicas:
            if replica.phase == "Failed" or (replica.role, replica.index) in gone:
                continue
            members = pods_of[(replica.role, replica.index)]
            if len(members) < pods_per_replica[replica.role]:
                admitted = any((p["metadata"].get("annotations") or {}).get(ADMITTED) == "true" for p in members)
                have = {p["metadata"]["name"] for p in members}
                missing = [p for p in replica_pods(raw, typed, unit, replica.role, replica.index, revision, admitted) if p["metadata"]["name"] not in have]
                _create_pods(draft, missing, now, expected, f"unit {unit}: {replica.role} replica {replica.index} completed",
                             alone=any(made_alone(p) for p in members))  # in its surviving pods' gang
            for index, node in repairs.get((replica.role, replica.index), {}).items():  # beside its surviving pods
                name = pod_name(raw["metadata"]["name"], unit, replica.role, replica.index, index)
                _assign(draft, expected[(raw["metadata"].get("namespace", "default"), name)], node, now, expected)
        used = {(r.role, r.index) for r in replicas if (r.role, r.index) not in gone}
        for create in decision.create:
            for index in _lowest_free({i for role, i in used if role == create.role}, create.count):
                used.add((create.role, index))
                pods = replica_pods(raw, typed, unit, create.role, index, create.revision, admitted=True)
                _create_pods(draft, pods, now, expected, f"unit {unit}: {create.role} replica {index}")
        if decision.state == "Stalled":
            draft.event("Warning", "Stalled", f"unit {unit}: {decision.reason}")


def _queue_time(draft: _Draft, unit: int, memory: CoordinationStatus, queued: bool, timeout: float, now: float) -> CoordinationStatus:
    """The step timeout times tandem's steps, not its scheduler's queue: releasing a replica
    the scheduler queues would delete its gang object too, whose creation time is its place
    in that queue (Kueue's, Volcano's). So while some admitted replica waits on the
    scheduler, the step's clock starts again when the unit joins the queue and whenever it
    would have run out (one status write per `stepTimeoutSeconds`, the unit saying why it
    waits meanwhile), and once more when the scheduler lets the unit go, so what it placed
    gets a whole step to become Ready. `blocked` carries the mark (`queued by <backend>`)."""
    assert draft.backend is not None
    mark = f"queued by {draft.backend.name}"
    if queued:
        draft.queued.add(unit)
        if memory.blocked != mark or now - (memory.step_started or now) > timeout:
            return dataclasses.replace(memory, step_started=now, blocked=mark)
    elif memory.blocked == mark:
        return dataclasses.replace(memory, step_started=now, blocked="")
    return memory


def _queued(replicas: list[Replica], pods_of: Mapping[tuple[str, int], list[PodPayload]]) -> bool:
    """Whether some admitted replica waits on its scheduler: none of its pods bound, failed or held by tandem."""
    return any(
        r.phase == "Pending" and not any(p["spec"].get("nodeName") or pod_failed(p) or _held(p) for p in pods_of.get((r.role, r.index), []))
        for r in replicas
    )


def _create_pods(draft: _Draft, pods: list[PodPayload], now: float, expected: _Expected, why: str, alone: bool | None = None) -> None:
    """Create a replica's pods workers first, its leader last (`replicas_of_unit` reads a
    replica cut short by a crash from that order). A delegated group's pods are made as its
    scheduler needs them (`delegation.delegated_pod`), `alone` (a gang of their own) when
    their unit already runs, unless the caller says (a replica's missing pods join its gang)."""
    if draft.backend is not None:
        if alone is None:  # made while its unit runs: a gang of its own where that matters (`delegated_pod`)
            unit = int(pods[0]["metadata"]["labels"][UNIT_LABEL]) if pods else 0
            alone = bool(_live_by_unit(draft.group, expected).get(unit))
        pods = [delegated_pod(pod, draft.backend, draft.typed, draft.topology, alone) for pod in pods]
    for pod in reversed(pods):
        pod["metadata"]["creationTimestamp"] = rfc3339(now)  # what the server will stamp; read by status
        pod["metadata"].setdefault("annotations", {})[CREATION] = str(draft.creation)
        draft.pod_write[_pod_key(pod)] = len(draft.actions)
        draft.actions.append(CreateObject(_without_server_fields(pod), why))
        expected[_pod_key(pod)] = pod


def _live_by_unit(group: GroupState, expected: _Expected) -> dict[int, list[PodPayload]]:
    by_unit: dict[int, list[PodPayload]] = {}
    for pod in group.pods:
        current = expected.get(_pod_key(pod))
        if current is None or current["metadata"].get("deletionTimestamp"):
            continue
        by_unit.setdefault(int(current["metadata"]["labels"][UNIT_LABEL]), []).append(current)
    return by_unit


def _pods_after(draft: _Draft, expected: _Expected) -> dict[int, list[PodPayload]]:
    """The group's live pods per unit as they will be after this pass, created ones included."""
    by_unit = _live_by_unit(draft.group, expected)
    for key, action in draft.pod_write.items():
        if isinstance(draft.actions[action], CreateObject) and key in expected:
            pod = expected[key]
            by_unit.setdefault(int(pod["metadata"]["labels"][UNIT_LABEL]), []).append(pod)
    return by_unit


def _lowest_free(taken: set[int], count: int) -> list[int]:
    out: list[int] = []
    candidate = 0
    while len(out) < count:
        if candidate not in taken:
            out.append(candidate)
        candidate += 1
    return out


# ----------------------------------------------------------------------------- 4. place


def _place(
    state: ClusterState, drafts: list[_Draft], now: float, expected: _Expected, placer: Placer, recovery: Recovery
) -> tuple[int, list[str], bool, tuple[Any, ...] | None]:
    """Pods placed, notes for the log, whether the engine ran and, if it did and placed
    nothing, the inputs of that placement (for the memo to keep)."""
    valid = [d for d in drafts if d.acting]
    # Only a group's own pods wait for tandem's gate, and a group skipped as settled has none.
    candidates = {key for d in valid for key in (*map(_pod_key, d.group.pods), *d.pod_write)}
    waiting = {key: expected[key] for key in sorted(candidates) if key in expected and _waits_for_placement(expected[key])}
    if not waiting or not valid:
        return 0, [], False, None
    # The engine places nothing more on less room: when the last placement placed nothing,
    # no capacity has come free since (no node changed, no pod let go of or moved its
    # load), the groups with waiting pods did not change and this pass wrote no pod, it is
    # not run again. Units waiting for capacity cost nothing until capacity, or they, change.
    waiting_groups = {(namespace, (pod["metadata"].get("labels") or {}).get(GROUP_LABEL)) for (namespace, _), pod in waiting.items()}
    inputs = [(d.group.key, d.group.inputs) for d in valid if d.group.key in waiting_groups]  # only units with waiting pods are placed
    signature = None
    if all(i is not None for _, i in inputs) and not expected.written():
        signature = (state.memo.placement.freed, state.topology_versions, tuple(inputs), tuple(waiting))
        if signature == state.memo.idle_placement:
            return 0, [], False, None
    # The snapshot of the observed nodes and pods, kept up to date by `observe` (the memo's
    # cache): equal to building it from them, at the cost of what changed. What this pass
    # writes before placing changes no node's load: creates are gated, patches only admit,
    # and a pod this pass deletes holds its node until it is gone (the delete may fail, and
    # a deleted pod terminates before it lets go).
    notes = [note for _, note in sorted(state.memo.unusable.items())]
    cache = state.memo.placement
    snapshot = recovery.with_repairs(cache.snapshot()[0])  # what this pass placed beside surviving pods holds its room
    views = {name: cache.view((name, dict(state.topology_versions).get(name)), t, snapshot) for name, t in state.topologies.items()}
    demands: list[UnitDemand] = []
    by_group: dict[tuple[str, str], _Draft] = {}
    # The engine places units in the order given: priority, then age (as `units_from_groups`).
    for draft in sorted(valid, key=lambda d: (-d.typed.spec.priority, d.group.raw["metadata"].get("creationTimestamp") or "", d.group.key)):
        by_group[draft.group.key] = draft
        demands += _unit_demands(draft, expected)
    plan = placer(snapshot, views, demands)
    placed = 0
    idle = signature if not any(r.pods for u in plan.units for _, rs in u.roles for r in rs if not r.existing) else None
    waiting_by_unit = _waiting_replicas(waiting)
    for unit in plan.units:
        draft = by_group[(unit.unit.namespace, unit.unit.group)]
        draft.assessed.add(unit.unit.unit)
        if unit.message:
            draft.verdicts[unit.unit.unit] = unit.message
        if unit.state == "Unschedulable":
            draft.unschedulable.add(unit.unit.unit)
            draft.event("Warning", "Unschedulable", f"unit {unit.unit.unit}: {unit.message}")
        new = sum(len(r.pods) for _, rs in unit.roles for r in rs if not r.existing)
        if new and unit.state != "Unschedulable":
            draft.event("Normal", "Placed", f"unit {unit.unit.unit}: {new} pods" + (f" in {unit.domain}" if unit.domain else ""))
        slots = waiting_by_unit.get(unit.unit.key, {})
        short: dict[str, int] = {}
        for role, replicas in unit.roles:
            # The engine numbers new replicas from the lowest index no running one holds; the
            # waiting ones may hold others (a lower index was taken when they were created
            # and has gone since): each new replica goes to the next waiting one, in order.
            fresh = [r for r in replicas if not r.existing]
            for replica, members in zip(fresh, slots.get(role, [])):
                for assignment, pod in zip(replica.pods, members):
                    if pod is not None:
                        _assign(draft, pod, assignment.node, now, expected)
                        placed += 1
            if len(slots.get(role, [])) > len(fresh):
                short[role] = len(slots[role]) - len(fresh)
        # (A unit not placed at all keeps the engine's words in its own reason and state:
        # only a step's replicas left waiting beside what runs are the planner's to know.)
        blocked = unit.message if short and unit.state != "Unschedulable" else ""
        draft.room[unit.unit.unit] = (blocked, short if blocked else {})
        saved = draft.before.unit(unit.unit.unit)
        said = saved.coordination.blocked if saved is not None and saved.coordination is not None else ""
        if unit.state != "Unschedulable" and short and said != blocked:
            # Once per change of the engine's words: a step whose admitted replicas (a
            # rolling update's surge, a rollout's or scaling's next step) it found no room
            # for (a unit not placed at all has its event above).
            draft.event("Warning", "Unschedulable", f"unit {unit.unit.unit}: {unit.message}")
    return placed, notes, True, idle


def _waiting_replicas(waiting: dict[PodKey, PodPayload]) -> dict[tuple[str, str, int], dict[str, list[list[PodPayload | None]]]]:
    """Per unit (namespace, group, unit) and role, the replicas with pods waiting for a node,
    lowest index first: each a list by pod index (None for a pod not waiting: placed already)."""
    by_replica: dict[tuple[str, str, int, str, int], dict[int, PodPayload]] = {}
    for (namespace, _), pod in waiting.items():
        labels = pod["metadata"].get("labels") or {}
        key = (namespace, labels[GROUP_LABEL], int(labels[UNIT_LABEL]), labels[ROLE_LABEL], int(labels[REPLICA_LABEL]))
        by_replica.setdefault(key, {})[pod_index(pod)] = pod
    out: dict[tuple[str, str, int], dict[str, list[list[PodPayload | None]]]] = {}
    for (namespace, group, unit, role, _), pods in sorted(by_replica.items()):
        out.setdefault((namespace, group, unit), {}).setdefault(role, []).append([pods.get(i) for i in range(max(pods) + 1)])
    return out


def _assign(draft: _Draft, pod: PodPayload, node: str, now: float, expected: _Expected) -> None:
    """Write the node choice and lift tandem's gate: into the pod's create if this pass
    creates it, else into one patch (with its admission, if this pass admits it)."""
    key = _pod_key(pod)
    gates = [g for g in pod["spec"].get("schedulingGates", []) if g.get("name") != GATE]
    assignment = {
        "metadata": {"annotations": {ASSIGNED_AT: rfc3339(now)}},
        "spec": {"nodeSelector": {HOSTNAME_LABEL: node}, "schedulingGates": gates or None},
    }
    expected[key] = merge_patch(pod, assignment)
    draft.deadlines.append(now + draft.typed.spec.scheduler.gang_timeout_seconds)  # bound by then, or released
    index = draft.pod_write.get(key)
    earlier = draft.actions[index] if index is not None else None
    if isinstance(earlier, CreateObject):
        draft.actions[index] = dataclasses.replace(  # type: ignore[index]
            earlier, obj=_without_server_fields(as_pod(merge_patch(earlier.obj, assignment))), why=f"{earlier.why}, placed on {node}"
        )
        return
    meta = pod["metadata"]
    if isinstance(earlier, PatchObject):
        draft.actions[index] = dataclasses.replace(  # type: ignore[index]
            earlier, patch=_merge_patches(earlier.patch, assignment), why=f"admitted and placed on {node}"
        )
        return
    draft.pod_write[key] = len(draft.actions)
    draft.actions.append(PatchObject("Pod", meta.get("namespace"), meta["name"], assignment, meta.get("resourceVersion"), f"placed on {node}"))


def _waits_for_placement(pod: PodPayload) -> bool:
    meta, spec = pod["metadata"], pod.get("spec", {})
    return (
        GROUP_LABEL in (meta.get("labels") or {})
        and (meta.get("annotations") or {}).get(ADMITTED) == "true"
        and any(g.get("name") == GATE for g in spec.get("schedulingGates", []))
        and not meta.get("deletionTimestamp")
    )


def _unit_demands(draft: _Draft, expected: _Expected) -> list[UnitDemand]:
    """Per unit with waiting pods: the admitted replicas as the demand, the running ones as existing."""
    typed = draft.typed
    by_unit = _pods_after(draft, expected)
    out = []
    for demand in units_from_group(typed):
        members = by_unit.get(demand.unit, [])
        if not any(_waits_for_placement(p) for p in members):
            continue
        replicas, pods_of = draft.replicas(members)
        admitted = {r.name: 0 for r in typed.spec.roles}
        existing = []
        for replica in replicas:
            if replica.phase in ("Gated", "Failed"):
                continue
            admitted[replica.role] += 1
            members_of = sorted(pods_of[(replica.role, replica.index)], key=lambda p: int(p["metadata"]["labels"][POD_INDEX_LABEL]))
            nodes = [assigned_node(p) for p in members_of]
            if all(nodes):
                # An old revision's replica holds its nodes, but a new one may not lean on it.
                leaving = replica.revision != draft.revision
                existing.append(PlacedReplica(replica.role, replica.index, tuple(n for n in nodes if n), leaving))
        # Only the admitted replicas are placed now; the domain is chosen (and room reserved)
        # for the whole unit the spec asks for, so the steps that follow fit beside it.
        roles = tuple(dataclasses.replace(r, desired=admitted[r.name], eventual=r.desired) for r in demand.roles)
        out.append(dataclasses.replace(demand, roles=roles, existing=tuple(existing)))
    return out


def _note_room(draft: _Draft, expected: _Expected) -> None:
    """Each unit's coordination memory says why its step's replicas wait for a node, in the
    engine's words, and how many per role (`CoordinationStatus.blocked`, `.short`): from
    this pass's placement; nothing once none waits; as it was when the engine did not run
    (nothing changed since it last tried), or while the unit backs off a timed-out step."""
    by_unit = _pods_after(draft, expected)
    for unit, decision in draft.decisions.items():
        if unit in draft.room:
            blocked, short = draft.room[unit]
        elif decision.state == "Stalled" or unit in draft.queued or any(_waits_for_placement(p) for p in by_unit.get(unit, [])):
            blocked, short = decision.status.blocked, dict(decision.status.short)
        else:
            blocked, short = "", {}
        reason = decision.reason
        if blocked and blocked not in reason:
            reason = f"{reason}; waiting for room: {blocked}" if reason else f"waiting for room: {blocked}"
        if (blocked, short, reason) != (decision.status.blocked, dict(decision.status.short), decision.reason):
            status = dataclasses.replace(decision.status, blocked=blocked, short=short)
            draft.decisions[unit] = dataclasses.replace(decision, reason=reason, status=status)


# ----------------------------------------------------------------------------- 4b. delegate


def _delegate(draft: _Draft, expected: _Expected, state: ClusterState, classes: set[str]) -> None:
    """A delegated group's gang objects, brought to each unit's step as this pass leaves it
    (`delegation`), and what its scheduler says of each unit (`backend_words`). Creates and
    patches go before the pass's first pod write (a pod finds its gang ready), deletes last."""
    backend = draft.backend
    observed = [c for c in draft.group.companions if object_key(c, GANG_KINDS) in GANG_KINDS]
    if backend is None:
        if not observed:
            return
        name = NATIVE  # handed back to tandem's engine: other schedulers' objects go with their last pods
    else:
        name = backend.name
    typed = draft.typed
    admitted: dict[int, dict[str, tuple[int, ...]]] = {}
    alone: dict[int, set[tuple[str, int]]] = {}
    remaining: dict[str, set[int]] = {}
    bound: set[int] = set()
    by_unit = _pods_after(draft, expected)
    for unit in range(typed.spec.replicas):
        replicas, pods_of = draft.replicas(by_unit.get(unit, []))
        indexes: dict[str, list[int]] = {r.name: [] for r in typed.spec.roles}
        for replica in replicas:
            members = pods_of.get((replica.role, replica.index), [])
            if replica.phase not in ("Gated", "Failed") and replica.role in indexes and all(pod_backend(p) == name for p in members):
                indexes[replica.role].append(replica.index)
                if any(made_alone(p) for p in members):
                    alone.setdefault(unit, set()).add((replica.role, replica.index))
        admitted[unit] = {role: tuple(sorted(found)) for role, found in indexes.items()}
    for unit, pods in by_unit.items():
        for pod in pods:
            remaining.setdefault(pod_backend(pod), set()).add(unit)
            # bound, or let go by the scheduler (Kueue lifts its gate once it admits): the gang is in use
            if pod_backend(pod) == name and (pod["spec"].get("nodeName") or not pod["spec"].get("schedulingGates")):
                bound.add(unit)
    ahead: list[Action] = []
    if backend is not None:
        desired, refusal = desired_gang_objects(draft.group.raw, typed, draft.topology, backend, admitted, alone)
        if refusal is not None:
            draft.faults.append(("BackendRefused", f"backend {name!r} would not render the group's objects: {refusal}"))
            return
        wanted_class = priority_class_for(typed, backend, state.priority_classes)
        if wanted_class is not None and wanted_class["metadata"]["name"] not in classes:
            classes.add(wanted_class["metadata"]["name"])
            ahead.append(CreateObject(wanted_class, f"PriorityClass for spec.priority {typed.spec.priority}"))
    else:
        desired = []
    creates, deletes = gang_writes(draft.group.raw, desired, observed, name, remaining, bound)
    ahead += creates
    at = next((i for i, a in enumerate(draft.actions) if isinstance(a, (CreateObject, PatchObject, DeleteObject)) and a.target[0] == "Pod"), len(draft.actions))
    draft.actions[at:at] = ahead
    draft.pod_write = {key: index + len(ahead) if index >= at else index for key, index in draft.pod_write.items()}
    draft.actions += deletes
    if backend is None:
        return
    objects_of: dict[int, list[Object]] = {}
    for obj in observed:
        unit_label = (obj["metadata"].get("labels") or {}).get(UNIT_LABEL)
        if unit_label is not None and unit_label.isdigit():
            objects_of.setdefault(int(unit_label), []).append(obj)
    for unit, pods in by_unit.items():
        waiting = [p for p in pods if pod_backend(p) == name and not p["spec"].get("nodeName") and not pod_failed(p) and not _held(p)]
        if waiting:
            words = unit_words(name, objects_of.get(unit, []), waiting)
            if words is not None:
                draft.words[unit] = words


def _held(pod: PodPayload) -> bool:
    """Held back by coordination: tandem's gate, not yet admitted."""
    return any(g.get("name") == GATE for g in pod.get("spec", {}).get("schedulingGates", []))


# ----------------------------------------------------------------------------- 5. provision


def _provision(draft: _Draft, now: float, expected: _Expected, settings: ProvisioningSettings) -> None:
    """The group's ProvisioningRequests (`provisioning`): only where a unit did not fit or a request exists."""
    requests = [c for c in draft.group.companions if c["kind"] in PROVISIONING_KINDS]
    if not draft.unschedulable and not requests:
        return
    if not settings.enabled and settings.class_for(draft.typed) is None:
        return  # off, and the group asks for nothing: no unit need be read
    typed = draft.typed
    by_unit = _pods_after(draft, expected)
    units = []
    for index in range(typed.spec.replicas):
        pods = by_unit.get(index, [])
        replicas = unit_replicas(pods, typed, draft.replicas(pods))
        bound = {r.name: sum(1 for x in replicas[r.name] if x.phase in ("Scheduled", "Ready")) for r in typed.spec.roles}
        missing = tuple((r.name, max(r.minimum - bound[r.name], 0)) for r in typed.spec.roles)
        units.append(UnitNeed(index, index in draft.unschedulable, any(_waits_for_placement(p) for p in pods), missing))
    plan = plan_provisioning(draft.group.raw, typed, units, requests, settings, now)
    draft.actions += plan.actions
    draft.deadlines += plan.deadlines
    draft.waits_on = plan.reasons


# ----------------------------------------------------------------------------- 6. status


def _status(draft: _Draft, now: float, expected: _Expected, state: ClusterState) -> None:
    raw, typed, before = draft.group.raw, draft.typed, draft.before
    generation = int(raw["metadata"].get("generation", 1))
    revision = draft.revision
    by_unit = _pods_after(draft, expected)
    units = {unit: unit_replicas(pods, typed, draft.replicas(pods)) for unit in range(typed.spec.replicas) for pods in [by_unit.get(unit, [])]}
    roles: list[RoleStatus] = []
    available = scheduled_all = True
    below: dict[int, list[str]] = {}
    for role in typed.spec.roles:
        every = [r for replicas in units.values() for r in replicas[role.name]]
        scheduled = sum(1 for r in every if r.phase in ("Scheduled", "Ready"))
        scheduled_all &= scheduled >= role.replicas * typed.spec.replicas
        for unit, replicas in units.items():
            ready = sum(1 for r in replicas[role.name] if r.phase == "Ready")
            if ready < role.minimum:
                available = False
                below.setdefault(unit, []).append(f"{role.name} {ready}/{role.minimum} Ready")
        roles.append(
            RoleStatus(
                name=role.name,
                desired_replicas=role.replicas * typed.spec.replicas,
                replicas=sum(1 for r in every if r.phase != "Failed"),
                scheduled_replicas=scheduled,
                ready_replicas=sum(1 for r in every if r.phase == "Ready"),
                updated_replicas=sum(1 for r in every if r.revision == revision and r.phase != "Failed"),
            )
        )
    topology = state.topologies.get(typed.spec.topology_name)
    levels = topology.spec.levels if topology is not None else []
    unit_statuses = []
    for unit, decision in sorted(draft.decisions.items()):
        replicas = units[unit]
        pods = by_unit.get(unit, [])
        holding = any(p["spec"].get("nodeName") for p in pods)
        enough = minimum_placed(replicas, typed)
        saved = before.unit(unit)
        partial_since = None
        if holding and not enough:
            partial_since = saved.partial_since if saved is not None and saved.partial_since else rfc3339(now)
            draft.deadlines.append(seconds(partial_since) + typed.spec.scheduler.gang_timeout_seconds)
        elif unit in draft.released and saved is not None:
            partial_since = saved.partial_since  # until the release is seen done: a delete that fails is retried at once
        releases, retry_after = (saved.releases, saved.retry_after) if saved is not None else (0, None)
        if unit in draft.released:
            releases += 1
            retry_at = now + backoff_seconds(releases)
            retry_after = rfc3339(retry_at)
            draft.deadlines.append(retry_at)
        elif holding and enough:
            releases, retry_after = 0, None  # placed whole again: the backoff starts over
        unit_state, reason = _unit_state(draft, unit, decision, pods, saved)
        unit_statuses.append(
            UnitStatus(
                index=unit,
                state=unit_state,
                reason="; ".join(r for r in (reason, draft.waits_on.get(unit)) if r),
                domain=unit_domain(pods, state.nodes, levels),
                functional=is_functional(replicas, typed),
                partial_since=partial_since,
                releases=releases,
                retry_after=retry_after,
                coordination=memory_of(decision.status),
            )
        )
    stale = any(r.revision != revision and r.phase != "Failed" for replicas in units.values() for rs in replicas.values() for r in rs)
    updating = revision if stale else ""
    faults = [*draft.faults, *(("WriteRejected", f"the API refused {r}") for r in state.memo.rejected.get(draft.group.key, ()))]
    health = verdict(Health(
        units=worded(unit_statuses), roles=roles, available=available, scheduled=scheduled_all,
        below=[(unit, ", ".join(what)) for unit, what in sorted(below.items())], updating=updating,
        degraded=not available and any(r.ready_replicas for r in roles), faults=tuple(faults), never_fit=draft.never_fit,
    ))
    conditions = [condition(before.conditions, kind, value, why, message, now, generation) for kind, value, why, message in health.conditions]
    if typed.spec.autoscaling is not None:  # the autoscaler's condition is its own: kept as read
        conditions += [c for c in before.conditions if c.type == AUTOSCALING_CONDITION]
    status = InferenceGroupStatus(
        observed_generation=generation,
        revision=revision,
        replicas=sum(1 for replicas in units.values() if any(r.phase != "Failed" for rs in replicas.values() for r in rs)),
        functional_units=sum(1 for u in unit_statuses if u.functional),
        selector=f"{GROUP_LABEL}={raw['metadata']['name']}",
        state=health.state,
        message=health.message,
        ready=", ".join(f"{r.name} {r.ready_replicas}/{r.desired_replicas}" for r in roles),
        conditions=conditions,
        roles=roles,
        unit_states=_counted(unit_statuses),
        units=list_units(unit_statuses),
        creations=creations_whole(draft.group.pods, {r.name: r.pods_per_replica for r in typed.spec.roles}, before.creations),
    )
    if draft.never_fit is not None and not said_never_fit(before):
        draft.event("Warning", NEVER_FITS, draft.never_fit)
    _happenings(draft, before, status)
    _patch_status(draft, status, RECONCILE_KEYS)
    if any(isinstance(a, CreateObject) and a.obj["kind"] == "Pod" for a in draft.actions) and draft.creation > status.creations:
        # this pass's creates, once they all went through (a crash or a failed create leaves
        # what they made readable as a creation cut short)
        meta = raw["metadata"]
        patch = {"status": {"creations": draft.creation}}
        draft.actions.append(PatchStatus("InferenceGroup", meta.get("namespace"), meta["name"], patch, why="creations", after_creates=True))


def _unit_state(draft: _Draft, unit: int, decision: Decision, pods: list[PodPayload], saved: UnitStatus | None) -> tuple[UnitState, str]:
    """The unit's state and why, most urgent first: a stalled step; pods the engine found no
    room for (its words, this pass's or, when it did not run again, the last ones); pods
    waiting for a node or to be bound; a step under way; complete."""
    if draft.never_fit is not None:
        return "Unschedulable", decision.reason  # `NeverFits: ...`: no unit of the group is made (fit.py)
    if decision.state == "Stalled":
        return "Stalled", decision.reason
    waiting = any(_waits_for_placement(p) for p in pods)
    if waiting:
        if unit in draft.assessed:
            if unit in draft.verdicts:
                return "Unschedulable", draft.verdicts[unit]
        elif saved is not None and saved.state == "Unschedulable":  # listed without its words beyond the first 100: still so
            return "Unschedulable", saved.reason
    if draft.backend is not None:
        delegated = _delegated_state(draft, unit, pods, saved)
        if delegated is not None:
            return delegated
    if decision.state == "Complete":
        return "Complete", decision.reason
    if waiting:
        return "Pending", "pods wait for a node"
    if any(assigned_node(p) and not p["spec"].get("nodeName") and not pod_failed(p) for p in pods):
        return "Pending", "pods placed, waiting to be bound"
    return "Progressing", decision.reason


def _delegated_state(draft: _Draft, unit: int, pods: list[PodPayload], saved: UnitStatus | None) -> tuple[UnitState, str] | None:
    """A delegated unit whose admitted pods wait for their scheduler: Unschedulable in its
    words when it refuses them (a Warning event when its words change), else Pending."""
    assert draft.backend is not None
    waiting = [p for p in pods if not p["spec"].get("nodeName") and not pod_failed(p) and not _held(p)]
    if not waiting:
        return None
    words = draft.words.get(unit)
    if words is None:
        return "Pending", f"pods wait for {draft.backend.name} to place them"
    if not words.unschedulable:
        return "Pending", words.message
    # (a unit beyond the status's listed words keeps its state without them: no change)
    unlisted = saved is not None and saved.state == "Unschedulable" and not saved.reason
    if saved is None or (saved.reason != words.message and not unlisted):
        draft.event("Warning", "Unschedulable", f"unit {unit}: {words.message}")
    return "Unschedulable", words.message


def _counted(units: list[UnitStatus]) -> dict[str, int]:
    """Units by state, every state present (a merge patch would keep a key left out)."""
    counts: Counter[str] = Counter(u.state for u in units)
    return {state: counts[state] for state in UNIT_STATES}


def _happenings(draft: _Draft, before: InferenceGroupStatus, after: InferenceGroupStatus) -> None:
    """Normal events for what changed since the stored status (ScaledTo, UpdateStarted,
    UpdateFinished) and a Warning when the group becomes Degraded by a refused write or a
    name taken: told once, when the status first says it."""
    def described(status: InferenceGroupStatus) -> str:
        units = sum(status.unit_states.values())
        return f"{units} unit{'s' if units != 1 else ''}: " + ", ".join(f"{r.name} {r.desired_replicas}" for r in status.roles)

    if before.unit_states and described(before) != described(after):
        draft.event("Normal", "ScaledTo", f"{described(after)} replicas (was {described(before)})")
    progressing = {c.type: c for c in before.conditions}.get("Progressing")
    was_updating = progressing is not None and progressing.status == "True" and progressing.reason == "Updating"
    now_updating = after.condition("Progressing")
    updating = now_updating is not None and now_updating.reason == "Updating"
    if updating and not was_updating:
        draft.event("Normal", "UpdateStarted", f"rolling out revision {after.revision}" + (f" (was {before.revision})" if before.revision else ""))
    elif was_updating and not updating:
        draft.event("Normal", "UpdateFinished", f"every replica is of revision {after.revision}")
    degraded, was = after.condition("Degraded"), before.condition("Degraded")
    if degraded is not None and degraded.status == "True" and degraded.reason in ("WriteRejected", "ServiceNameTaken"):
        if was is None or (was.status, was.reason, was.message) != (degraded.status, degraded.reason, degraded.message):
            draft.event("Warning", degraded.reason, degraded.message)


def _never_fit(state: ClusterState, group: InferenceGroup, capacities: dict[str, Capacity]) -> str | None:
    """`fit.never_fits` over the nodes of the group's topology, every pod gone."""
    topology = state.topologies.get(group.spec.topology_name)
    if topology is None:
        return None
    if topology.metadata.name not in capacities:
        cache = state.memo.placement
        snapshot, _ = cache.snapshot()
        key = (topology.metadata.name, dict(state.topology_versions).get(topology.metadata.name))
        capacities[topology.metadata.name] = Capacity(cache.view(key, topology, snapshot))
    return never_fits(group, capacities[topology.metadata.name])


def _invalid(draft: _Draft, now: float, reason: str = "InvalidSpec", message: str | None = None, state: str = "Invalid") -> None:
    """Say what is wrong (the spec's problems, or why its scheduler is not there), once per
    change; touch nothing else."""
    raw = draft.group.raw
    generation = int(raw["metadata"].get("generation", 1))
    message = "; ".join(str(p) for p in draft.group.problems) if message is None else message
    before = read_status(raw)
    accepted = condition(before.conditions, "Accepted", False, reason, message, now, generation)
    others = [c for c in before.conditions if c.type != "Accepted"]
    update = {"conditions": [accepted, *others], "observed_generation": generation, "state": state, "message": message}
    status = before.model_copy(update=update)
    if _patch_status(draft, status, ("conditions", "observedGeneration", "state", "message")):
        draft.event("Warning", reason, message)


def _patch_status(draft: _Draft, status: InferenceGroupStatus, keys: tuple[str, ...]) -> bool:
    patch = owned_patch(status, keys)
    raw = draft.group.raw
    if unchanged(raw, patch):
        return False
    meta = raw["metadata"]
    draft.actions.append(PatchStatus("InferenceGroup", meta.get("namespace"), meta["name"], patch, meta.get("resourceVersion")))
    return True


# ----------------------------------------------------------------------------- helpers


def _pod_key(pod: PodPayload) -> PodKey:
    return (pod["metadata"].get("namespace", "default"), pod["metadata"]["name"])


def _merge_patches(first: Any, second: Any) -> Any:
    """Two merge patches as one (the second wins)."""
    if not isinstance(first, dict) or not isinstance(second, dict):
        return second
    out = dict(first)
    for key, value in second.items():
        out[key] = _merge_patches(out.get(key), value) if key in out else value
    return out


def _without_server_fields(pod: PodPayload) -> Object:
    """The pod as a create sends it: without what the server stamps."""
    meta = pod["metadata"].copy()
    meta.pop("creationTimestamp", None)
    return as_object({**pod, "metadata": meta})
