"""What must hold, checked against the true store (never a replica's view).

After every step:

- `capacity`: no node holds more GPUs than it has (pods bound to it, or placed on it by
  tandem and not yet bound; failed pods hold nothing), save the race of two schedulers
  over one pool that the kubelet's admission settles (`admission_refused`).

Delegated groups (issue 27) have invariants of their own (`delegated.py`: delegated-pod,
gang-object, hand-over, gang-restored, queued-released, and convergence at the end); the
ones here judge their pods by their scheduler's rules where they assume tandem's engine
placed a pod (see each).
- `partial-placement`: no unit holds a node (a bound pod) without every role's minimum of
  complete replicas bound, and no pod placed by tandem stays unbound, for longer than its
  gang timeout plus one resync; the time the control plane
  could not act (no leader, an API storm, reads lagging) and the replicas' clock skew are
  added, since the controller cannot release what it cannot write or see.
- `created-twice`: no pod is created again under the same name and revision unless its
  last incarnation was failed or replaced for a reason (judged from the store as it was
  when the controller deleted it: failed, not bound, its node not Ready, its group gone or
  of another revision, beyond the spec's counts, its replica broken, its unit below its
  minimums past its gang timeout, or left by such a release whose delete failed, until the
  unit is whole again: the release is retried, not timed anew). A replica cut short by a crash must be completed, not replaced; one seen
  whole before that then lost its leader is broken.
- `left-behind`: no Pod, Service or ConfigMap of tandem's outlives its group.
- `replica-pack`: every pod of a replica whose pods are all there and bound lies inside
  one domain of its role's `pack.required` level (a replica that lost a pod is re-created
  whole, or completed beside its surviving pods, never spread).
- `rollout-floor`: during a rolling update that started on a settled group, the group never
  has fewer functional units than when it started (until a node fault ends the window).
- `ratio-skew`: during coordination scaling that started on a settled group, every unit's
  roles stay within `scaling.maxSkew` of each other's progress (one replica of rounding),
  and during a rolling update the new revision's roles stay within
  `rollingUpdate.maxSkew` (as tests/coordination/test_properties.py bounds them).

At the end (after the faults heal and the run settles):

- `status`: each group's status says what its pods say (functional units, Ready replicas
  per role, the generation observed).
- `liveness`: if every group fits the healthy, empty cluster together (the placement
  engine says so), every unit of every group is functional (no deadlock, no livelock),
  unless it does not fit beside the units running now (the engine moves no running unit:
  counted as `fragmented`, not a violation).
- `convergence`: if they fit so, every group is what its spec says (every replica of the current revision,
  with its template as written, Ready, nothing beyond the counts), unless some of its pods
  wait for a node or a unit is Stalled backing off: a step needs room its unit's domain
  has not got (a rolling update's surge beside running units, extras of a unit whose
  running replicas pin it to a full rack; the engine moves no running unit). Counted as
  `waiting_for_room`, not a violation.
- `idempotent`: once settled (every group what its spec says), one more pass writes nothing.
- `required-affinity`: at the end, every bound complete `from` replica of a unit shares its
  Required rule's domain with a bound complete `to` replica of the same unit (unless a node
  was lost: a `to` replica lost with its node is replaced where there is room, and the
  engine moves no running replica; counted as `affinity_stranded_by_node_loss`).

After every step, too:

- `blocked-unreported`: a pod admitted by coordination that waits for a node (no room: a
  rolling update's surge into a full domain, say) is reported by its step's timeout plus
  one resync: its unit Stalled, or an `Unschedulable` event on its group (issue 25). The
  time the control plane could not act and the clock skew are added, as above.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from support.builders import load
from support.faults.autoscaling import AutoscalingChecks
from support.faults.delegated import NATIVE, DelegatedChecks, backend_of_group, backend_of_pod
from support.faults.schedule import EPOCH
from tandem.api.naming import GPU_RESOURCE, GROUP_LABEL, POD_INDEX_LABEL, REPLICA_LABEL, REVISION_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.api.naming import ADMITTED, HOSTNAME_LABEL
from tandem.api.quantity import MILLI, parse_quantity
from tandem.api.resources import InferenceGroup
from tandem.api.timestamps import seconds
from tandem.cluster.memory import Snapshot
from tandem.cluster.pods import assigned_node, pod_failed, pod_gpus, pod_ready
from tandem.controller import OBSERVED_KINDS
from tandem.controller.decide import decide
from tandem.controller.manifests import revision_of
from tandem.controller.observe import observe
from tandem.coordination.ratio import progress, skew_fraction
from tandem.placement import place, units_from_groups
from tandem.topology import ClusterSnapshot, TopologyView

if TYPE_CHECKING:
    from support.faults.world import World

SLACK_S = 3.0  # step granularity: a deadline seen at the next whole second, a pass after its event
USER_CHANGES = ("create", "delete", "scale", "ratio", "template", "backend")


@dataclass(frozen=True)
class Violation:
    at: float
    invariant: str
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "invariant": self.invariant, "detail": self.detail}


@dataclass
class GroupNow:
    """A group and its pods as the store holds them now."""

    raw: dict[str, Any]
    typed: InferenceGroup | None
    revision: str
    pods: list[dict[str, Any]]

    @property
    def name(self) -> str:
        return self.raw["metadata"]["name"]

    @property
    def uid(self) -> str:
        return self.raw["metadata"]["uid"]

    def unit_pods(self, unit: int) -> list[dict[str, Any]]:
        return [p for p in self.pods if p["metadata"]["labels"].get(UNIT_LABEL) == str(unit)]

    def replicas(self, unit: int) -> dict[str, list["Rep"]]:
        """The unit's replicas per role (every role of the spec present)."""
        assert self.typed is not None
        out: dict[str, list[Rep]] = {r.name: [] for r in self.typed.spec.roles}
        sizes = {r.name: r.pods_per_replica for r in self.typed.spec.roles}
        for rep in read_replicas(self.unit_pods(unit), sizes):
            out.setdefault(rep.role, []).append(rep)
        return out

    def unit_functional(self, unit: int) -> bool:
        assert self.typed is not None
        replicas = self.replicas(unit)
        return all(sum(1 for x in replicas[r.name] if x.phase == "Ready") >= r.minimum for r in self.typed.spec.roles)

    def functional(self) -> int:
        assert self.typed is not None
        return sum(1 for u in range(self.typed.spec.replicas) if self.unit_functional(u))

    def complete(self) -> bool:
        """Every unit runs every replica of the current revision, Ready, nothing else."""
        assert self.typed is not None
        for unit in range(self.typed.spec.replicas):
            replicas = self.replicas(unit)
            for r in self.typed.spec.roles:
                mine = replicas[r.name]
                if len(mine) != r.replicas or any(x.phase != "Ready" or x.revision != self.revision for x in mine):
                    return False
        written = {r["name"]: r for r in self.raw["spec"]["roles"]}
        if not all(carries_template(p, written.get(p["metadata"]["labels"][ROLE_LABEL])) for p in self.pods):
            return False
        return all(int(p["metadata"]["labels"][UNIT_LABEL]) < self.typed.spec.replicas for p in self.pods)

    def settled(self) -> bool:
        return self.typed is not None and self.complete() and not any(pod_failed(p) for p in self.pods)


@dataclass(frozen=True)
class Rep:
    """A replica as its pods say, read here without the controller's code: Failed (a pod
    failed, or a worker is missing beside its leader), CutShort (its leader missing: a
    creation a crash cut short, holding the highest indices), else the least advanced of
    its pods: Held (gated, not admitted by coordination), Waiting (admitted, behind tandem's
    gate), Placed (a node chosen, not bound), Bound, Ready."""

    role: str
    index: int
    revision: str
    phase: str
    members: tuple[dict[str, Any], ...]


ORDER = ("Held", "Waiting", "Placed", "Bound", "Ready")


def read_replicas(pods: list[dict[str, Any]], sizes: dict[str, int]) -> list[Rep]:
    by: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for pod in pods:
        labels = pod["metadata"]["labels"]
        by.setdefault((labels[ROLE_LABEL], int(labels[REPLICA_LABEL])), []).append(pod)
    out = []
    for (role, index), members in sorted(by.items()):
        revision = members[0]["metadata"]["labels"].get(REVISION_LABEL, "")
        size = sizes.get(role, 1)
        if _broken(members, size):
            phase = "Failed"
        elif len(members) < size:
            phase = "CutShort"
        else:
            phase = min((_pod_state(p) for p in members), key=ORDER.index)
        out.append(Rep(role, index, revision, phase, tuple(members)))
    return out


def _pod_state(pod: dict[str, Any]) -> str:
    if pod_ready(pod) and pod["spec"].get("nodeName"):
        return "Ready"
    if pod["spec"].get("nodeName"):
        return "Bound"
    if assigned_node(pod):
        return "Placed"
    return "Waiting" if (pod["metadata"].get("annotations") or {}).get(ADMITTED) == "true" else "Held"


@dataclass
class Window:
    """A rolling update or a scaling step sequence being watched."""

    kind: str  # "update" or "scaling"
    uid: str
    name: str
    opened: float
    floor: int = 0  # functional units when the update began
    start: dict[int, dict[str, int]] = field(default_factory=dict)  # scaling: unit -> role -> replicas at the start


class Checker:
    def __init__(self, world: "World"):
        self.world = world
        self.violations: list[Violation] = []
        self._models: dict[tuple[str, str], tuple[InferenceGroup | None, str]] = {}
        self._over: set[str] = set()  # nodes over capacity at the last step
        self._partial: dict[tuple[str, int], list[float]] = {}  # (group uid, unit) -> [since, impaired seconds]
        # (group uid, unit) -> the uids of its pods while it was partial past its gang timeout:
        # the release the controller may carry out until the unit is whole again (`_why`)
        self._releasable: dict[tuple[str, int], set[str]] = {}
        self._unbound: dict[str, list[float]] = {}  # pod uid -> [placed since, impaired seconds]
        self._waiting: dict[str, list[float]] = {}  # pod uid -> [admitted and waiting for a node since, impaired seconds]
        self._reported: set[tuple[str, Any]] = set()
        self._deleted: dict[tuple[str, str], tuple[str, str, str | None]] = {}  # pod -> (revision, owner uid, reason or None)
        # (group uid, unit, role, replica, revision) -> the pods' uids when last seen with every pod
        self._whole: dict[tuple[str, int, str, int, str], frozenset[str]] = {}
        self._spread: set[tuple[str, ...]] = set()  # replicas seen outside their pack at the last step
        self.windows: list[Window] = []
        self._settled_before: dict[str, GroupNow] = {}
        self.skew = _skew_allowance(world)
        self.clock_error = self.skew + max((abs(r.offset) for r in world.replicas), default=0.0)  # a replica's clock vs the true one
        self.created = 0
        self.replaced = 0
        self.exercised: dict[str, int] = {"update_windows": 0, "scaling_windows": 0, "partial_units": 0, "waiting_for_room": 0, "fragmented": 0}
        self.delegated = DelegatedChecks(self)
        self.autoscaling = AutoscalingChecks(self)
        self._looked_behind: str | None = None

    # ------------------------------------------------------------------ reading the store

    def groups(self, snapshot: Snapshot) -> dict[str, GroupNow]:
        pods: dict[str, list[dict[str, Any]]] = {}
        for pod in snapshot.list("Pod", labels=GROUP_LABEL):
            pods.setdefault(pod["metadata"]["labels"][GROUP_LABEL], []).append(pod)
        out = {}
        for raw in snapshot.list("InferenceGroup"):
            if raw["metadata"].get("deletionTimestamp"):
                continue
            typed, revision = self._model(raw)
            out[raw["metadata"]["name"]] = GroupNow(raw, typed, revision, pods.get(raw["metadata"]["name"], []))
        return out

    def _model(self, raw: dict[str, Any]) -> tuple[InferenceGroup | None, str]:
        key = (raw["metadata"]["uid"], raw["metadata"]["resourceVersion"])
        if key not in self._models:
            try:
                typed = InferenceGroup.model_validate({k: v for k, v in raw.items() if k != "status"})
                self._models[key] = (typed, revision_of(typed, raw))
            except ValidationError:
                self._models[key] = (None, "")
        return self._models[key]

    def violation(self, invariant: str, detail: str, once: Any = None) -> None:
        if once is not None:
            if (invariant, once) in self._reported:
                return
            self._reported.add((invariant, once))
        self.violations.append(Violation(self.world.t, invariant, detail))

    # ------------------------------------------------------------------ every step

    def step(self) -> None:
        snapshot = self.world.store.snapshot()
        groups = self.groups(snapshot)
        self._capacity(snapshot)
        self._partial_placement(groups)
        self._left_behind(snapshot, groups)
        self._windows(groups)
        self._blocked_reported(snapshot, groups)
        self._replicas_whole(snapshot, groups)
        self.delegated.step(snapshot, groups)

    def _blocked_reported(self, snapshot: Snapshot, groups: dict[str, GroupNow]) -> None:
        """A pod waiting for a node past its step's timeout (plus a resync) has been said so."""
        impaired = self.world.leaderless or self.world.storm_now() or self.world.stale_now()
        now: set[str] = set()
        reported: set[str] | None = None
        for g in groups.values():
            if g.typed is None:
                continue
            timeout = g.typed.spec.coordination.rollout.step_timeout_seconds
            for pod in g.pods:
                if _pod_state(pod) != "Waiting" or pod_failed(pod) or pod["metadata"].get("deletionTimestamp"):
                    continue
                uid = pod["metadata"]["uid"]
                now.add(uid)
                clock = self._waiting.setdefault(uid, [self.world.t, 0.0])
                if impaired:
                    clock[1] += 1.0
                allowed = timeout + self.world.schedule.resync + SLACK_S + clock[1] + self.clock_error
                if self.world.t - clock[0] <= allowed:
                    continue
                unit = int(pod["metadata"]["labels"][UNIT_LABEL])
                states = {u.get("index"): u.get("state") for u in (g.raw.get("status") or {}).get("units") or []}
                if reported is None:
                    reported = {f"{e['involvedObject']['name']}/{u}" for e in snapshot.list("Event") if e.get("reason") == "Unschedulable"
                                for part in e["message"].split("; ") for u in _units_named(part)}
                if states.get(unit) == "Stalled" or f"{g.name}/{unit}" in reported:
                    continue
                backend = backend_of_pod(pod)
                reason = next((u.get("reason") or "" for u in (g.raw.get("status") or {}).get("units") or [] if u.get("index") == unit), "")
                if backend != NATIVE and states.get(unit) in ("Pending", "Unschedulable") and backend in reason:
                    # Handed to its scheduler: the unit says so, in the scheduler's words when it
                    # has any (a queued unit keeps its place; what the scheduler says is its own).
                    continue
                self.violation("blocked-unreported", f"{g.name} unit {unit}: pod {pod['metadata']['name']} waits for a node since "
                                                     f"t={clock[0]:.0f} and the unit is neither Stalled nor reported Unschedulable",
                               once=uid)
        for uid in [u for u in self._waiting if u not in now]:
            del self._waiting[uid]

    def _capacity(self, snapshot: Snapshot) -> None:
        """Delegated pods count once their scheduler bound them (they carry no hostname
        selector). A node over only because a scheduler other than tandem's engine bound
        pods there after tandem chose it for pods not bound yet is the race two schedulers
        over one pool have: the kubelet refuses the later bind, and judges it
        (`admission_refused`)."""
        on: dict[str, list[dict[str, Any]]] = {}
        for pod in snapshot.list("Pod"):
            node = assigned_node(pod)
            if node and not pod_failed(pod):
                on.setdefault(node, []).append(pod)
        over = set()
        for node in snapshot.list("Node"):
            name = node["metadata"]["name"]
            have = parse_quantity(node["status"]["allocatable"].get(GPU_RESOURCE, 0)) // MILLI
            used = sum(pod_gpus(p) for p in on.get(name, []))
            if used > have:
                over.add(name)
                if name not in self._over and used - self._raced(on[name]) > have:  # once per time over
                    self.violation("capacity", f"node {name} holds {used} GPUs of {have}")
        self._over = over

    def _raced(self, pods: list[dict[str, Any]]) -> int:
        """GPUs on a node bound by another scheduler after tandem chose the node for a pod
        not bound yet (the newest such choice is after that pod was made)."""
        chosen = [seconds(p["metadata"]["creationTimestamp"]) - EPOCH for p in pods if not p["spec"].get("nodeName")]
        if not chosen:
            return 0
        bound_at = self.world.kubelet.bound_at
        return sum(pod_gpus(p) for p in pods if p["spec"].get("nodeName") and _placer(p) != "tandem"
                   and bound_at.get(p["metadata"]["uid"], -1.0) >= min(chosen))

    def admission_refused(self, pod: dict[str, Any], node: str, holders: list[dict[str, Any]]) -> None:
        """The kubelet refused `pod` (no room on `node` beside `holders`). A race between two
        schedulers is no fault: a holder placed by another scheduler (tandem's engine, a
        delegated group's, or bound past both) was bound after `pod` was made, so the room
        `pod` was given could be taken before its placer saw it. Otherwise one scheduler
        over-committed the node on its own: a `capacity` violation."""
        mine = _placer(pod)
        made = seconds(pod["metadata"]["creationTimestamp"]) - EPOCH
        bound_at = self.world.kubelet.bound_at
        raced = [h for h in holders if _placer(h) != mine
                 and bound_at.get(h["metadata"]["uid"], seconds(h["metadata"]["creationTimestamp"]) - EPOCH) >= made]
        if raced:
            self.exercised["admission_refused"] = self.exercised.get("admission_refused", 0) + 1
            return
        held = sum(pod_gpus(h) for h in holders)
        self.violation("capacity", f"node {node}: {mine} bound {pod['metadata']['name']} ({pod_gpus(pod)} GPUs) beside {held} GPUs held "
                                   f"by {sorted({_placer(h) for h in holders})} (refused by the kubelet)")

    def _partial_placement(self, groups: dict[str, GroupNow]) -> None:
        impaired = self.world.leaderless or self.world.storm_now() or self.world.stale_now()
        now: set[tuple[str, int]] = set()
        releasable: dict[tuple[str, int], set[str]] = {}
        for g in groups.values():
            if g.typed is None:
                continue
            sizes = {r.name: r.pods_per_replica for r in g.typed.spec.roles}
            units = {int(p["metadata"]["labels"][UNIT_LABEL]) for p in g.pods}
            for unit in sorted(units):
                key = (g.uid, unit)
                replicas = read_replicas(g.unit_pods(unit), sizes)
                bound = {r.name: sum(1 for x in replicas if x.role == r.name and x.phase in ("Bound", "Ready")) for r in g.typed.spec.roles}
                whole = all(bound[r.name] >= r.minimum for r in g.typed.spec.roles)
                if not whole and key in self._releasable:  # pods gone are no longer the release's
                    left = self._releasable[key] & {p["metadata"]["uid"] for p in g.unit_pods(unit)}
                    if left:
                        releasable[key] = left
                if not any(p["spec"].get("nodeName") and not pod_failed(p) for p in g.unit_pods(unit)):
                    continue  # holds no node (a placed pod not yet bound is `unbound`'s)
                if whole:
                    continue
                now.add(key)
                if key not in self._partial:
                    self.exercised["partial_units"] += 1
                clock = self._partial.setdefault(key, [self.world.t, 0.0])
                if impaired:
                    clock[1] += 1.0
                if self._past_gang_timeout(g, clock[0]):
                    releasable.setdefault(key, set()).update(p["metadata"]["uid"] for p in g.unit_pods(unit))
                allowed = g.typed.spec.scheduler.gang_timeout_seconds + self.world.schedule.resync + SLACK_S + clock[1] + self.skew
                if self.world.t - clock[0] > allowed:
                    self.violation(
                        "partial-placement",
                        f"{g.name} unit {unit} partially placed since t={clock[0]:.0f} ({self.world.t - clock[0]:.0f}s > {allowed:.0f}s allowed): bound {bound}",
                        once=(key, clock[0]),
                    )
        for key in [k for k in self._partial if k not in now]:
            del self._partial[key]
        self._releasable = releasable
        self._unbound_pods(groups, impaired)

    def _past_gang_timeout(self, g: GroupNow, since: float) -> bool:
        """A unit partial since `since` may be released by now (the replicas' clocks apart)."""
        assert g.typed is not None
        return self.world.t - since >= g.typed.spec.scheduler.gang_timeout_seconds - self.skew - SLACK_S

    def _unbound_pods(self, groups: dict[str, GroupNow], impaired: bool) -> None:
        """A pod tandem placed (its gate lifted, a node chosen) and not bound is released
        after the gang timeout: it must not hold its node longer (plus one resync).
        A delegated group's pods are placed by their scheduler, never by a hostname selector
        (`delegated-pod`), so none is judged here: its scheduler holds no node for a pod
        before it binds the gang's minimum whole, which `partial-placement` judges."""
        now: set[str] = set()
        for g in groups.values():
            if g.typed is None:
                continue
            for pod in g.pods:
                if pod["spec"].get("nodeName") or pod_failed(pod) or not assigned_node(pod):
                    continue
                uid = pod["metadata"]["uid"]
                now.add(uid)
                clock = self._unbound.setdefault(uid, [self.world.t, 0.0])
                if impaired:
                    clock[1] += 1.0
                allowed = g.typed.spec.scheduler.gang_timeout_seconds + self.world.schedule.resync + SLACK_S + clock[1] + self.skew
                if self.world.t - clock[0] > allowed:
                    self.violation("partial-placement", f"pod {pod['metadata']['name']} placed on {assigned_node(pod)} and not bound since "
                                                        f"t={clock[0]:.0f} ({self.world.t - clock[0]:.0f}s > {allowed:.0f}s allowed)", once=uid)
        for uid in [u for u in self._unbound if u not in now]:
            del self._unbound[uid]

    def _replicas_whole(self, snapshot: Snapshot, groups: dict[str, GroupNow]) -> None:
        """Note the replicas seen with every pod (`created-twice` judges from it), and check
        that a replica with every pod bound is inside its role's required pack."""
        labels_of = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in snapshot.list("Node")}
        level_label = {lv["name"]: lv["nodeLabel"] for t in snapshot.list("ClusterTopology") for lv in t["spec"]["levels"]}
        seen: set[tuple[str, int, str, int, str]] = set()
        spread: set[tuple[str, ...]] = set()
        for g in groups.values():
            if g.typed is None:
                continue
            for unit in sorted({int(p["metadata"]["labels"][UNIT_LABEL]) for p in g.pods}):
                for rep in read_replicas(g.unit_pods(unit), {r.name: r.pods_per_replica for r in g.typed.spec.roles}):
                    key = (g.uid, unit, rep.role, rep.index, rep.revision)
                    role = next((r for r in g.typed.spec.roles if r.name == rep.role), None)
                    if role is None:
                        continue
                    if len(rep.members) >= role.pods_per_replica:
                        self._whole[key] = frozenset(p["metadata"]["uid"] for p in rep.members)
                    if any(p["metadata"]["labels"].get(REVISION_LABEL, "") == rep.revision for p in rep.members):
                        seen.add(key)
                    level = role.topology.pack.required
                    if any(backend_of_pod(p) != NATIVE for p in rep.members):
                        # Placed by a delegated scheduler: its stand-in does not imitate required
                        # levels (tandem/schedulers/gang.py), so its rules are the gang's only.
                        continue
                    nodes = [p["spec"].get("nodeName") for p in rep.members if not pod_failed(p)]
                    if level is None or len(nodes) < role.pods_per_replica or not all(n in labels_of for n in nodes):
                        continue
                    domains = {labels_of[n].get(level_label.get(level, ""), "") for n in nodes}
                    if len(domains) > 1:
                        spread.add((g.uid, str(unit), rep.role, str(rep.index)))
                        self.violation("replica-pack", f"{g.name} unit {unit} {rep.role} replica {rep.index} spans {level}s {sorted(domains)} "
                                                       f"({', '.join(sorted(str(n) for n in nodes))})", once=(g.uid, unit, rep.role, rep.index, tuple(sorted(nodes))))
        self._whole = {key: uids for key, uids in self._whole.items() if key in seen}  # a replica gone starts over
        self._spread = spread

    def _left_behind(self, snapshot: Snapshot, groups: dict[str, GroupNow]) -> None:
        if snapshot.resource_version == self._looked_behind:
            return  # nothing changed since the last look (each object is reported once)
        self._looked_behind = snapshot.resource_version
        uids = {g.uid for g in groups.values()}
        for kind in ("Pod", "Service", "ConfigMap", *self.delegated.keys):
            for obj in snapshot.list(kind, labels=GROUP_LABEL):
                refs = obj["metadata"].get("ownerReferences") or []
                if not any(ref.get("uid") in uids for ref in refs):
                    self.violation("left-behind", f"{kind} {obj['metadata']['name']} outlives its group", once=obj["metadata"]["uid"])

    # ------------------------------------------------------------------ pods created twice

    def judge_delete(self, namespace: str | None, name: str) -> tuple[tuple[str, str], tuple[str, str, str | None]]:
        """Why the pod may be deleted, on the store as it is just before the delete."""
        snapshot = self.world.store.snapshot()
        pod = snapshot.get("Pod", namespace, name)
        labels = pod["metadata"].get("labels") or {}
        owner = next((r.get("uid", "") for r in pod["metadata"].get("ownerReferences") or []), "")
        if backend_of_pod(pod) in self.world.kubelet.paused:
            siblings = [p for p in snapshot.list("Pod", namespace=namespace, labels=GROUP_LABEL)
                        if all(p["metadata"]["labels"].get(k) == labels.get(k) for k in (GROUP_LABEL, UNIT_LABEL, ROLE_LABEL, REPLICA_LABEL, REVISION_LABEL))]
            whole_waits = not any(p["spec"].get("nodeName") for p in siblings)
            self.delegated.judge_release(pod, self._why(snapshot, pod, queued=True), whole_waits)
        return (namespace or "default", name), (labels.get(REVISION_LABEL, ""), owner, self._why(snapshot, pod))

    def pod_deleted(self, judged: tuple[tuple[str, str], tuple[str, str, str | None]]) -> None:
        """The delete judged went through."""
        key, record = judged
        self._deleted[key] = record

    def pod_created(self, pod: dict[str, Any]) -> None:
        self.created += 1
        meta = pod["metadata"]
        record = self._deleted.pop((meta.get("namespace", "default"), meta["name"]), None)
        if record is None:
            return
        revision, owner, why = record
        same = revision == meta["labels"].get(REVISION_LABEL) and owner in {r.get("uid") for r in meta.get("ownerReferences") or []}
        if same and why is None:
            self.violation("created-twice", f"pod {meta['name']} created again; its last incarnation was deleted while running, complete and wanted")
        elif same:
            self.replaced += 1

    def _why(self, snapshot: Snapshot, pod: dict[str, Any], queued: bool = False) -> str | None:
        """Why deleting this pod (as the store holds it now) may be followed by creating it again; None: no reason.
        `queued`: the pod waits for its scheduler, which is stopped: neither being unbound nor
        a step's timeout is a reason then (`queued-released`)."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        labels = meta.get("labels") or {}
        if pod_failed(pod) or meta.get("deletionTimestamp"):
            return "failed"
        node = spec.get("nodeName")
        if not node and not queued:
            return "not bound"
        try:
            if node and (self.world.down.get(node) or not pod_ready_node(snapshot.get("Node", None, node))):
                return "node not Ready"
        except Exception:
            return "node gone"
        g = self.groups(snapshot).get(labels.get(GROUP_LABEL, ""))
        if g is None or g.typed is None or g.uid not in {r.get("uid") for r in meta.get("ownerReferences") or []}:
            return "group gone or invalid"
        if labels.get(REVISION_LABEL) != g.revision:
            return "old revision"
        unit, role_name, index = int(labels[UNIT_LABEL]), labels[ROLE_LABEL], int(labels[REPLICA_LABEL])
        if unit >= g.typed.spec.replicas:
            return "unit beyond spec.replicas"
        role = next((r for r in g.typed.spec.roles if r.name == role_name), None)
        if role is None:
            return "role gone"
        unit_pods = g.unit_pods(unit)
        members = [p for p in unit_pods if p["metadata"]["labels"][ROLE_LABEL] == role_name and int(p["metadata"]["labels"][REPLICA_LABEL]) == index]
        whole = self._whole.get((g.uid, unit, role_name, index, labels.get(REVISION_LABEL, "")), frozenset())
        if _broken(members, role.pods_per_replica, {p["metadata"]["uid"] for p in members} <= whole):
            return "replica broken"
        live = {int(p["metadata"]["labels"][REPLICA_LABEL]) for p in unit_pods if p["metadata"]["labels"][ROLE_LABEL] == role_name and not pod_failed(p)}
        if len(live) > role.replicas:
            return "surplus replica"
        since = self._partial.get((g.uid, unit))
        if since is not None and self._past_gang_timeout(g, since[0]):
            return "unit below its minimums beyond its gang timeout"
        if meta.get("uid") in self._releasable.get((g.uid, unit), ()):
            # Its unit was partial past its gang timeout while this pod was in it, and has not
            # been whole since: the release's delete of it failed and is retried, not timed
            # anew (docs/controller.md), even once the unit held nothing for a while (the
            # write that would clear `partialSince` may have failed, and the next leader
            # reads the one it finds).
            return "left over from its unit's gang-timeout release"
        if not all(pod_ready(p) for p in members) and not queued:
            # a step that did not get there in time is released (docs/coordination.md); its
            # start is the controller's record, in the status, on a replica's clock
            unit_status = next((u for u in (g.raw.get("status") or {}).get("units") or [] if u.get("index") == unit), {})
            started = (unit_status.get("coordination") or {}).get("stepStarted")
            timeout = g.typed.spec.coordination.rollout.step_timeout_seconds
            if started and EPOCH + self.world.t - seconds(started) >= timeout - self.clock_error - SLACK_S:
                return "not Ready within the step timeout"
        return None

    # ------------------------------------------------------------------ windows

    def before_event(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind in ("node-loss", "flap", "pod-delete", "node-delete"):
            self.windows.clear()  # pods lost or not Ready: floors and ratios no longer apply
        elif kind == "startup-failures":
            self.windows = [w for w in self.windows if w.kind == "update"]
        elif kind in USER_CHANGES:
            self.windows = [w for w in self.windows if w.name != event["group"]]
            g = self.groups(self.world.store.snapshot()).get(event["group"])
            self._settled_before = {event["group"]: g} if g is not None and g.settled() else {}

    def after_event(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind not in ("template", "ratio", "backend") or event["group"] not in self._settled_before:
            return
        if any(start <= self.world.t < until for start, until, _ in self.world.failure_windows) and kind == "ratio":
            return
        before = self._settled_before[event["group"]]
        if kind in ("template", "backend"):  # a change of backend is a rolling update too (the hand-over)
            self.windows.append(Window("update", before.uid, before.name, self.world.t, floor=before.functional()))
            self.exercised["update_windows"] += 1
        else:
            assert before.typed is not None
            start = {u: {r.name: len([p for p in before.unit_pods(u) if p["metadata"]["labels"][ROLE_LABEL] == r.name]) // r.pods_per_replica
                         for r in before.typed.spec.roles} for u in range(before.typed.spec.replicas)}
            self.windows.append(Window("scaling", before.uid, before.name, self.world.t, start=start))
            self.exercised["scaling_windows"] += 1

    def _windows(self, groups: dict[str, GroupNow]) -> None:
        keep = []
        for w in self.windows:
            g = groups.get(w.name)
            if g is None or g.uid != w.uid or g.typed is None:
                continue
            if w.kind == "update":
                functional = g.functional()
                if functional < w.floor:
                    self.violation("rollout-floor", f"{g.name}: {functional} functional units during a rolling update begun with {w.floor}",
                                   once=(w.uid, w.opened))
                self._lockstep(g, w)
            else:
                self._scaling_skew(g, w)
            if not g.complete():
                keep.append(w)
        self.windows = keep

    def _lockstep(self, g: GroupNow, w: Window) -> None:
        assert g.typed is not None
        skew = g.typed.spec.coordination.rolling_update.max_skew
        for unit in range(g.typed.spec.replicas):
            by_role = g.replicas(unit)
            growing = [r for r in g.typed.spec.roles if r.replicas > 0]
            if not growing:
                continue
            p = {r.name: progress(sum(1 for x in by_role[r.name] if x.phase != "Failed" and x.revision == g.revision), 0, r.replicas)
                 for r in growing}
            slowest = min(p.values())
            for r in growing:
                allowed = skew_fraction(skew, 0, r.replicas) + Fraction(2, r.replicas)
                if p[r.name] - slowest > allowed:
                    self.violation("ratio-skew", f"{g.name} unit {unit}: rolling update out of lockstep: {dict((k, str(v)) for k, v in p.items())}",
                                   once=(w.uid, w.opened, unit))

    def _scaling_skew(self, g: GroupNow, w: Window) -> None:
        assert g.typed is not None
        skew = g.typed.spec.coordination.scaling.max_skew
        for unit, start in w.start.items():
            if unit >= g.typed.spec.replicas:
                continue
            by_role = g.replicas(unit)
            goal = {r.name: r.replicas for r in g.typed.spec.roles}
            moving = [r for r in goal if r in start and start[r] != goal[r]]
            if not moving:
                continue
            now = {r: sum(1 for x in by_role.get(r, []) if x.phase not in ("Failed", "Held")) for r in moving}
            p = {r: progress(now[r], start[r], goal[r]) for r in moving}
            slowest = min(p.values())
            for r in moving:
                allowed = skew_fraction(skew, start[r], goal[r]) + Fraction(1, abs(goal[r] - start[r]))
                if p[r] - slowest > allowed:
                    self.violation("ratio-skew", f"{g.name} unit {unit}: scaling out of maxSkew {skew}: {now} from {start} to {goal}",
                                   once=(w.uid, w.opened, unit))

    # ------------------------------------------------------------------ at the end

    def converged(self) -> bool:
        """Nothing left to do: every group complete and its status saying so (or nothing fits)."""
        snapshot = self.world.store.snapshot()
        groups = self.groups(snapshot)
        if not all(g.typed is None or (g.complete() and not _status_problems(g)) for g in groups.values()):
            return False
        now = self.world.replicas[0].clock(self.world.t)
        delegation = self.world.delegation
        served = frozenset(k for k in delegation.kinds if self.world.store.serves(k))
        state = observe(snapshot, kinds=OBSERVED_KINDS + tuple(sorted(served)), served=served)
        return not any(group.actions for group in decide(state, now, delegation=delegation).groups)  # a pass would write nothing

    def end(self, reconcile_once: Any) -> None:
        snapshot = self.world.store.snapshot()
        groups = self.groups(snapshot)
        for g in groups.values():
            if g.typed is None:
                continue
            for problem in _status_problems(g):
                self.violation("status", f"{g.name}: {problem}")
        fit = fits(snapshot, groups)
        stuck = [(g, u) for g in groups.values() if g.typed is not None for u in range(g.typed.spec.replicas) if not g.unit_functional(u)]
        if fit and stuck:
            room = fits_now(snapshot, groups, {(g.name, u) for g, u in stuck})
            for g, unit in stuck:
                if (g.name, unit) in room:
                    self.violation("liveness", f"{g.name} unit {unit} is not functional though it fits beside what runs: {_summary(g)}")
                else:
                    self.exercised["fragmented"] += 1  # fits an empty cluster, not beside the running units (none is moved)
        for g in groups.values():
            if g.typed is None:
                continue
        node_lost = any(e["type"] == "node-loss" for e in self.world.schedule.events)
        for g in groups.values():
            if g.typed is not None and backend_of_group(g.raw) == NATIVE:  # a delegated scheduler's stand-in ignores required levels
                for problem in _affinity_broken(snapshot, g):
                    if node_lost:
                        # A `to` replica lost with its node is replaced where there is room;
                        # the engine moves no running `from` replica to follow it.
                        self.exercised["affinity_stranded_by_node_loss"] = self.exercised.get("affinity_stranded_by_node_loss", 0) + 1
                    else:
                        self.violation("required-affinity", f"{g.name}: {problem}")
        writes = reconcile_once()
        self.delegated.end(snapshot, groups, settled=all(g.typed is None or g.settled() for g in groups.values()))
        if writes:
            self.violation("idempotent", f"a pass on the settled cluster wrote {writes} times")


def _placer(pod: dict[str, Any]) -> str:
    """Who chose the pod's node: tandem's engine (its hostname selector), a scheduler by name,
    or nobody (bound at creation, as the world's filler pods are)."""
    spec = pod.get("spec") or {}
    if (spec.get("nodeSelector") or {}).get(HOSTNAME_LABEL):
        return "tandem"
    if pod["metadata"].get("namespace") == "filler":
        return "filler"
    return spec.get("schedulerName") or "default-scheduler"


def _units_named(message: str) -> list[int]:
    """The units a message is about: `unit 3: ...`, or as events are folded, `units 0-2, 7 (4): ...`."""
    head = message.split(":", 1)[0].strip()
    if head.startswith("unit ") and head[5:].isdigit():
        return [int(head[5:])]
    if not head.startswith("units "):
        return []
    out: list[int] = []
    for part in head[6:].split(" (")[0].split(", "):
        low, _, high = part.partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            out += list(range(int(low), int(high or low) + 1))
    return out


def _affinity_broken(snapshot: Snapshot, g: GroupNow) -> list[str]:
    """Bound complete `from` replicas with no bound complete `to` replica of their unit in
    their Required rule's domain (the level's node label, read here without the engine)."""
    assert g.typed is not None
    rules = [a for a in g.typed.spec.affinity if a.mode == "Required"]
    if not rules:
        return []
    topology = next((t for t in snapshot.list("ClusterTopology") if t["metadata"]["name"] == g.typed.spec.topology_name), None)
    if topology is None:
        return []
    labels = {lv["name"]: lv["nodeLabel"] for lv in topology["spec"]["levels"]}
    nodes = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in snapshot.list("Node")}
    out = []
    for unit in range(g.typed.spec.replicas):
        replicas = g.replicas(unit)
        for rule in rules:
            label = labels.get(rule.level)
            if label is None:
                continue

            def domains(role: str) -> list[set[str]]:
                return [{nodes.get(p["spec"]["nodeName"], {}).get(label, "") for p in rep.members}
                        for rep in replicas.get(role, []) if rep.phase in ("Bound", "Ready")]

            near = set().union(*domains(rule.to)) if domains(rule.to) else set()
            for where in domains(rule.from_):
                if not where & near:
                    out.append(f"unit {unit}: a {rule.from_} replica in {rule.level} {sorted(where)} has no {rule.to} replica there")
    return out


def carries_template(pod: dict[str, Any], role: dict[str, Any] | None) -> bool:
    """The pod's containers are its role's template's as written (tandem may add environment
    variables and mounts, and change nothing else)."""
    if role is None:
        return False
    index = int(pod["metadata"]["labels"][POD_INDEX_LABEL])
    template = role.get("workerTemplate") if index > 0 and role.get("workerTemplate") else role["template"]
    have = {c["name"]: c for c in pod["spec"].get("containers", [])}
    for wanted in template["spec"]["containers"]:
        got = have.get(wanted["name"])
        if got is None:
            return False
        for key, value in wanted.items():
            if key in ("env", "volumeMounts"):
                if any(item not in got.get(key, []) for item in value):
                    return False
            elif got.get(key) != value:
                return False
    return True


def _broken(members: list[dict[str, Any]], size: int, was_whole: bool = False) -> bool:
    """A replica with a failed pod, with pods of two revisions, missing a worker while its
    leader (index 0) is there, or missing pods after it was seen whole (`was_whole`).
    One missing its leader and holding the highest indices, never seen whole, was cut short
    while being created: it is to be completed, not replaced. (Judged here without the
    controller's own code.)"""
    if was_whole and len(members) < size:
        return True
    if any(pod_failed(p) for p in members):
        return True
    if len({p["metadata"]["labels"].get(REVISION_LABEL, "") for p in members}) > 1:
        return True  # pods of two revisions: a replacement beside a pod whose delete failed
    indices = sorted(int(p["metadata"]["labels"][POD_INDEX_LABEL]) for p in members)
    if len(indices) >= size:
        return False
    return 0 in indices or indices != list(range(size - len(indices), size))


def pod_ready_node(node: dict[str, Any]) -> bool:
    return all(c.get("status") == "True" for c in (node.get("status") or {}).get("conditions", []) if c.get("type") == "Ready")


def _status_problems(g: GroupNow) -> list[str]:
    assert g.typed is not None
    status = g.raw.get("status") or {}
    problems = []
    generation = g.raw["metadata"].get("generation", 1)
    if status.get("observedGeneration") != generation:
        problems.append(f"observedGeneration {status.get('observedGeneration')} != generation {generation}")
    if status.get("functionalUnits") != g.functional():
        problems.append(f"functionalUnits {status.get('functionalUnits')} != {g.functional()} from the pods")
    ready = {r.name: 0 for r in g.typed.spec.roles}
    for unit in range(g.typed.spec.replicas):
        for role, replicas in g.replicas(unit).items():
            if role in ready:
                ready[role] += sum(1 for r in replicas if r.phase == "Ready")
    stored = {r.get("name"): r.get("readyReplicas") for r in status.get("roles") or []}
    if stored != ready:
        problems.append(f"readyReplicas {stored} != {ready} from the pods")
    return problems


def _summary(g: GroupNow) -> str:
    phases: dict[str, int] = {}
    for pod in g.pods:
        phase = "Failed" if pod_failed(pod) else "Ready" if pod_ready(pod) else "Bound" if pod["spec"].get("nodeName") else \
            "Placed" if assigned_node(pod) else "Waiting"
        phases[phase] = phases.get(phase, 0) + 1
    units = [(u.get("index"), u.get("state"), u.get("reason")) for u in (g.raw.get("status") or {}).get("units") or []]
    return f"pods {phases}, units {units}"


def fits(snapshot: Snapshot, groups: dict[str, GroupNow]) -> bool:
    """Whether every valid group, at its current spec, fits the healthy cluster with nothing
    running (the placement engine places every unit whole)."""
    manifests = [_manifest(g) for g in groups.values() if g.typed is not None]
    if not manifests:
        return True
    topologies, nodes = _cluster(snapshot)
    inputs = load([*topologies, *nodes, *manifests])
    cluster, _ = ClusterSnapshot.build(inputs.nodes, inputs.pods)
    views = {name: TopologyView.build(t, cluster) for name, t in inputs.topologies.items()}
    plan = place(cluster, views, units_from_groups(inputs.groups))
    return all(u.state == "Placed" for u in plan.units)


def fits_now(snapshot: Snapshot, groups: dict[str, GroupNow], units: set[tuple[str, int]]) -> set[tuple[str, int]]:
    """Which of `units` (group name, unit) the engine would place, whole or at their
    minimums, beside the pods every other unit runs now, on the healthy cluster."""
    topologies, nodes = _cluster(snapshot)
    pods = []
    for g in groups.values():
        for pod in g.pods:
            labels = pod["metadata"]["labels"]
            node = assigned_node(pod)
            if node is None or pod_failed(pod) or (g.name, int(labels[UNIT_LABEL])) in units:
                continue
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod["metadata"]["name"], "namespace": pod["metadata"]["namespace"]},
                         "spec": {"nodeName": node, "containers": pod["spec"]["containers"]}})
    manifests = [_manifest(g) for g in groups.values() if g.typed is not None and any(name == g.name for name, _ in units)]
    inputs = load([*topologies, *nodes, *pods, *manifests])
    cluster, _ = ClusterSnapshot.build(inputs.nodes, inputs.pods)
    views = {name: TopologyView.build(t, cluster) for name, t in inputs.topologies.items()}
    demands = [d for d in units_from_groups(inputs.groups) if (d.group, d.unit) in units]
    return {(u.unit.group, u.unit.unit) for u in place(cluster, views, demands).units if u.state != "Unschedulable"}


def _manifest(g: GroupNow) -> dict[str, Any]:
    return {"apiVersion": g.raw["apiVersion"], "kind": "InferenceGroup", "metadata": {"name": g.name, "namespace": g.raw["metadata"]["namespace"]},
            "spec": g.raw["spec"]}


def _cluster(snapshot: Snapshot) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ClusterTopologies and the Nodes, every node Ready (as after the faults heal)."""
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n["metadata"]["name"], "labels": n["metadata"].get("labels", {})},
              "spec": n.get("spec", {}), "status": {**n["status"], "conditions": [{"type": "Ready", "status": "True"}]}}
             for n in snapshot.list("Node")]
    topologies = [{"apiVersion": t["apiVersion"], "kind": t["kind"], "metadata": {"name": t["metadata"]["name"]}, "spec": t["spec"]}
                  for t in snapshot.list("ClusterTopology")]
    return topologies, nodes


def _skew_allowance(world: "World") -> float:
    """How far one replica's deadlines can sit from another's, in true seconds."""
    replicas = world.replicas
    if len(replicas) < 2:
        return 0.0
    horizon = world.schedule.fault_window + world.schedule.settle
    offsets = [r.offset for r in replicas]
    rates = [r.rate for r in replicas]
    return (max(offsets) - min(offsets)) + (max(rates) - min(rates)) * horizon
