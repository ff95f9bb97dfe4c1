"""What must hold for delegated groups (issue 27), checked against the true store after every
step beside `invariants.Checker`'s own checks:

- `delegated-pod`: a pod made for a delegated scheduler never carries tandem's hostname
  `nodeSelector` (tandem's engine does not place it), nor, once coordination admitted it
  (`tandem.dev/admitted`), tandem's scheduling gate. At once: both are written in one
  write (`delegation.admission_patch`).
- `gang-object`: every admitted pod's gang object (the one its scheduler's label or
  annotation names) exists, and no gang object asks for more pods than coordination
  admitted to it (Volcano, KAI and Koordinator `minMember`, the Workload API's
  `gang.minCount`); a Kueue Workload keeps the count its pods were made for (the base pod
  group's minimum: `kueue.x-k8s.io/pod-group-total-count`, which Kueue waits for) and never
  has more pods than it counts. A pass writes gang objects before its pods and a crash or a
  refused write can part them: a mismatch is a violation once it outlasts one resync (plus
  the time the control plane could not act and the clock skew). The counts are judged on
  the objects of the group's current backend: a backend the group is leaving keeps its
  objects as they are while its pods remain (a hand-over slowed by a stopped scheduler
  outlasts a resync), and one of them deleted by hand is not made again.
- `hand-over`: once a group whose backend changed runs complete (every replica of the
  current revision Ready), no pod and no gang object of another backend remains (allowed one
  resync, as above; at the end, once settled, none at all).
- `gang-restored`: a gang object changed by hand (the `gang-edit` fault) is put back within
  one resync (plus the time the control plane could not act and the skew): one edited is
  gone, made again, or carries tandem's digest (`tandem.dev/rendered`) with what tandem had
  written before the edit (its spec fields, its labels) or with another digest (rendered
  anew since, a whole patch); one deleted exists again while its group still has live
  admitted pods of its backend in its unit (of its replica, for one made per replica).
  Kinds their scheduler keeps immutable (Kueue's Workload, the Workload API's) are never
  given a spec edit: their API refuses one (Kueue's webhook, the Workload API's validation);
  their labels and annotations removed are judged once no pod of their unit is bound: the
  controller patches them back while their spec is still what it renders, but leaves an
  immutable gang in use whose rendering has moved on (a step, a rolling update) as it is,
  and replaces it once its unit lets it go.
  An object of a backend its group has left (a hand-over going on) is not judged: tandem
  keeps it as it is while its pods remain, and `hand-over` judges that it goes.
- `queued-released`: while a group's scheduler is stopped (the `scheduler-stop` fault), the
  controller deletes none of its pods that wait for that scheduler (admitted, not bound, not
  failed, in a replica none of whose pods is bound) unless for a reason that holds whatever the scheduler does (the group gone or of
  another revision, beyond the spec's counts, a broken replica, a partial unit past its
  gang timeout): a step timeout does not run while a scheduler queues (`decide._queue_time`).

Read here without the controller's code, from the schedulers' own labels and annotations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from tandem.api.naming import ADMITTED, BACKEND_LABEL, GATE, GPU_RESOURCE, HOSTNAME_LABEL, REPLICA_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.api.quantity import MILLI, parse_quantity
from tandem.backends import kai, koordinator, kueue, volcano
from tandem.backends.delegated_kinds import DELEGATED_KINDS
from tandem.cluster.memory import Snapshot
from tandem.cluster.pods import pod_failed, pod_gpus
from tandem.controller.delegation import IMMUTABLE_KEYS, RENDERED_ANNOTATION

if TYPE_CHECKING:
    from support.faults.invariants import Checker, GroupNow

NATIVE = "native"
Pod = Mapping[str, Any]


def _annotation(name: str) -> Callable[[Pod], str | None]:
    return lambda pod: (pod["metadata"].get("annotations") or {}).get(name)


def _label(name: str) -> Callable[[Pod], str | None]:
    return lambda pod: (pod["metadata"].get("labels") or {}).get(name)


def _scheduling_group(pod: Pod) -> str | None:
    return ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")


def _key(backend: str, kind: str) -> str:
    return next(k.key for k in DELEGATED_KINDS[backend] if k.kind == kind)


# backend -> (the kind of the gang object a pod joins, how the pod names it)
GANG_OF: dict[str, tuple[str, Callable[[Pod], str | None]]] = {
    "volcano": (_key("volcano", "PodGroup"), _annotation(volcano.GROUP_ANNOTATION)),
    "kai": (_key("kai", "PodGroup"), _annotation(kai.GROUP_ANNOTATION)),
    "koordinator": (_key("koordinator", "PodGroup"), _label(koordinator.POD_GROUP_LABEL)),
    "kueue": (_key("kueue", "Workload"), _label(kueue.GROUP_LABEL)),
    "workload-api": (_key("workload-api", "PodGroup"), _scheduling_group),
}


def backend_of_pod(pod: Pod) -> str:
    return (pod["metadata"].get("labels") or {}).get(BACKEND_LABEL, NATIVE)


def backend_of_group(raw: Mapping[str, Any]) -> str:
    return ((raw.get("spec") or {}).get("scheduler") or {}).get("backend") or NATIVE


def backend_of_key(key: str) -> str:
    return next(b for b, kinds in DELEGATED_KINDS.items() if any(k.key == key for k in kinds))


def _minimum(key: str, obj: Mapping[str, Any]) -> int | None:
    """How many pods the gang object asks to be placed together (None: a kind with no such count here)."""
    spec = obj.get("spec") or {}
    if key == GANG_OF["workload-api"][0]:
        return int((((spec.get("schedulingPolicy") or {}).get("gang")) or {}).get("minCount") or 0)
    if key in (GANG_OF["volcano"][0], GANG_OF["kai"][0], GANG_OF["koordinator"][0]):
        return int(spec.get("minMember") or 0)
    return None


def _live(pod: Pod) -> bool:
    return not pod_failed(pod) and not pod["metadata"].get("deletionTimestamp")


def _admitted(pod: Pod) -> bool:
    return (pod["metadata"].get("annotations") or {}).get(ADMITTED) == "true"


class DelegatedChecks:
    """The delegated invariants; `checker` holds the world, the clocks and the violations."""

    def __init__(self, checker: "Checker"):
        self.checker = checker
        self.keys = tuple(k.key for b in checker.world.delegation.backends for k in DELEGATED_KINDS[b])
        self._since: dict[tuple[str, ...], list[float]] = {}  # a mismatch -> [seen since, impaired seconds]
        self._seen: str | None = None  # the store's version at the last look
        self._edits: list[Edit] = []  # gang objects changed by hand, not yet seen put back
        self._deleted_by_hand: set[tuple[str, str | None, str]] = set()  # (key, namespace, name)

    def gang_edited(self, key: str, before: Mapping[str, Any], edit: str) -> None:
        """The world changed a gang object by hand (`before`: as tandem had left it)."""
        self._edits.append(Edit(key, before, edit, self.checker.world.t))
        if edit == "delete":
            self._deleted_by_hand.add((key, before["metadata"].get("namespace"), before["metadata"]["name"]))
        self.checker.exercised["gang_edits"] = self.checker.exercised.get("gang_edits", 0) + 1

    def step(self, snapshot: Snapshot, groups: dict[str, "GroupNow"]) -> None:
        if not self.keys or (snapshot.resource_version == self._seen and not self._since and not self._edits):
            return  # nothing changed, and no mismatch is being timed
        self._seen = snapshot.resource_version
        objects = {key: snapshot.list(key) for key in self.keys}
        now: set[tuple[str, ...]] = set()
        for g in groups.values():
            for pod in g.pods:
                self._pod_as_made(g, pod)
            for key, detail in self._gang_mismatches(g, objects):
                now.add(key)
                self._persisting("gang-object", key, detail)
            for key, detail in self._left_after_hand_over(g, objects):
                now.add(key)
                self._persisting("hand-over", key, detail)
        edits = []
        for edit in self._edits:
            detail = self._not_restored(edit, objects, groups)
            if detail is not None:
                key = ("restored", edit.key, edit.before["metadata"]["uid"], str(edit.at))
                now.add(key)
                self._persisting("gang-restored", key, detail)
                edits.append(edit)
        self._edits = edits
        self._since = {k: v for k, v in self._since.items() if k in now}

    def _not_restored(self, edit: "Edit", objects: Mapping[str, list[Mapping[str, Any]]], groups: dict[str, "GroupNow"]) -> str | None:
        """What is still as the hand left it (None: put back, or no longer wanted)."""
        meta = edit.before["metadata"]
        owner = next((g for g in groups.values() if _owned_by(edit.before, g.uid)), None)
        if owner is None or backend_of_group(owner.raw) != backend_of_key(edit.key):
            return None  # its group is gone, or handed to another scheduler: kept as it is while its pods remain (`hand-over`)
        if edit.edit != "delete" and edit.key in IMMUTABLE_KEYS and self._in_use(edit, owner):
            return None  # an immutable gang in use whose rendering moved on is left as it is (until its unit lets it go)
        name, namespace = meta["name"], meta.get("namespace")
        now = next((o for o in objects.get(edit.key, []) if o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace), None)
        what = f"{edit.key} {name} ({edit.edit} by hand at t={edit.at:.0f})"
        if edit.edit == "delete":
            if now is not None or not self._still_wanted(edit, groups):
                return None
            return f"{what} is not back"
        if now is None or now["metadata"].get("uid") != meta["uid"]:
            return None  # deleted, or made again, since
        digest = (now["metadata"].get("annotations") or {}).get(RENDERED_ANNOTATION)
        if digest is None:
            return f"{what} still has no {RENDERED_ANNOTATION}"
        if digest != (meta.get("annotations") or {}).get(RENDERED_ANNOTATION):
            return None  # rendered anew since: patched whole
        labels = now["metadata"].get("labels") or {}
        lost = sorted(k for k, v in (meta.get("labels") or {}).items() if labels.get(k) != v)
        if lost:
            return f"{what} still lacks labels {lost}"
        if not covers(now.get("spec"), edit.before.get("spec")):
            return f"{what} still has spec {now.get('spec')}, tandem wrote {edit.before.get('spec')}"
        return None

    def _in_use(self, edit: "Edit", owner: "GroupNow") -> bool:
        """Whether a live pod of the object's backend in its unit (its group, for one of no
        unit) is bound: what makes the controller leave an immutable gang as it is."""
        unit = (edit.before["metadata"].get("labels") or {}).get(UNIT_LABEL)
        backend = backend_of_key(edit.key)
        return any(backend_of_pod(p) == backend and _live(p) and (p.get("spec") or {}).get("nodeName")
                   and (unit is None or (p["metadata"].get("labels") or {}).get(UNIT_LABEL) == unit) for p in owner.pods)

    def _still_wanted(self, edit: "Edit", groups: dict[str, "GroupNow"]) -> bool:
        """Whether the group still has live admitted pods of the object's backend in its
        unit (of its replica, for an object made per replica): tandem keeps gang objects
        only for those."""
        meta = edit.before["metadata"]
        owner = next((g for g in groups.values() if _owned_by(edit.before, g.uid)), None)
        if owner is None:
            return False
        labels = meta.get("labels") or {}
        backend = backend_of_key(edit.key)
        for pod in owner.pods:
            theirs = pod["metadata"].get("labels") or {}
            if backend_of_pod(pod) != backend or not _live(pod) or not _admitted(pod):
                continue
            if all(theirs.get(k) == labels[k] for k in (UNIT_LABEL, ROLE_LABEL, REPLICA_LABEL) if k in labels):
                return True
        return False

    def judge_release(self, pod: Pod, reason: str | None, whole_waits: bool) -> None:
        """A controller delete of `pod`, with the reason the checker found for it
        (`Checker._why`, not excusing a pod for being unbound): while its scheduler is stopped,
        a pod of a replica that waits whole for it (none of its pods bound: what the
        controller counts as queued) is deleted only for a reason that holds whatever the
        scheduler does. A pod completing a replica beside its bound pods is timed as a step
        (made again after the step's backoff), so not judged here."""
        backend = backend_of_pod(pod)
        if backend == NATIVE or backend not in self.checker.world.kubelet.paused or not whole_waits:
            return
        if not _live(pod) or not _admitted(pod) or (pod.get("spec") or {}).get("nodeName"):
            return
        self.checker.exercised["released_while_stopped"] = self.checker.exercised.get("released_while_stopped", 0) + 1
        if reason is None:
            self.checker.violation("queued-released", f"pod {pod['metadata']['name']} deleted while it waits for {backend}, "
                                                      f"which is stopped (nothing but its scheduler keeps it)")

    def end(self, snapshot: Snapshot, groups: dict[str, "GroupNow"], settled: bool) -> None:
        """At the end, no Kueue Workload with pods waits for pods that will never come (Kueue
        admits a pod group only once every pod it counts exists); settled, nothing of an
        old backend remains (one more pass would not remove it)."""
        if not self.keys:
            return
        objects = {key: snapshot.list(key) for key in self.keys}
        workloads = GANG_OF["kueue"][0]
        for g in groups.values():
            named: dict[str, list[Pod]] = {}
            for pod in g.pods:
                if backend_of_pod(pod) == "kueue" and _live(pod):
                    named.setdefault(GANG_OF["kueue"][1](pod) or "", []).append(pod)
            for obj in objects.get(workloads, []):
                name = obj["metadata"]["name"]
                count = sum(int(s.get("count") or 0) for s in (obj.get("spec") or {}).get("podSets") or [])
                waiting = [p for p in named.get(name, []) if not (p.get("spec") or {}).get("nodeName")]
                if _owned_by(obj, g.uid) and waiting and len(named[name]) < count:
                    self.checker.violation("gang-object", f"{g.name}: Workload {name} counts {count} pods and only {len(named[name])} name it, "
                                                          f"so Kueue never admits it: {', '.join(sorted(p['metadata']['name'] for p in waiting))} wait for ever")
        if not settled:
            self._unfinished(snapshot, groups)
            return
        for g in groups.values():
            for _, detail in self._left_after_hand_over(g, objects):
                self.checker.violation("hand-over", f"settled, and still {detail}")

    # ------------------------------------------------------------------ the checks

    def _unfinished(self, snapshot: Snapshot, groups: dict[str, "GroupNow"]) -> None:
        """`convergence`, for delegated groups: the run did not settle, and a delegated group
        misses replicas whose pods fit the free GPUs of the healthy nodes one by one (first
        fit, as the stand-ins place; they ignore topology levels, so the room is the room)."""
        free: dict[str, int] = {}
        for node in snapshot.list("Node"):
            free[node["metadata"]["name"]] = parse_quantity(node["status"]["allocatable"].get(GPU_RESOURCE, 0)) // MILLI
        for pod in snapshot.list("Pod"):
            where = (pod.get("spec") or {}).get("nodeName")
            if where in free and _live(pod):
                free[where] -= pod_gpus(pod)
        for g in groups.values():
            if g.typed is None or backend_of_group(g.raw) == NATIVE or g.complete():
                continue
            missing: list[int] = []
            for unit in range(g.typed.spec.replicas):
                replicas = g.replicas(unit)
                for r in g.typed.spec.roles:
                    have = sum(1 for x in replicas[r.name] if x.revision == g.revision and x.phase in ("Bound", "Ready"))
                    gpus = _raw_gpus(g, r.name)
                    missing += [gpus] * (max(r.replicas - have, 0) * r.pods_per_replica)
            room = dict(free)
            for need in sorted(missing, reverse=True):
                node = next((n for n in sorted(room) if room[n] >= need), None)
                if node is None:
                    break
                room[node] -= need
            else:
                states = [(u.get("index"), u.get("state"), u.get("reason")) for u in (g.raw.get("status") or {}).get("units") or []]
                self.checker.violation("convergence", f"{g.name} ({backend_of_group(g.raw)}) is not complete at the end though the "
                                                      f"{len(missing)} pods it misses fit the free GPUs: units {states}")

    def _pod_as_made(self, g: "GroupNow", pod: Pod) -> None:
        if backend_of_pod(pod) == NATIVE or not _live(pod):
            return
        spec, name = pod.get("spec") or {}, pod["metadata"]["name"]
        if (spec.get("nodeSelector") or {}).get(HOSTNAME_LABEL):
            self.checker.violation("delegated-pod", f"{g.name}: pod {name} of backend {backend_of_pod(pod)} carries tandem's "
                                                    f"nodeSelector {HOSTNAME_LABEL}={spec['nodeSelector'][HOSTNAME_LABEL]}",
                                   once=("selector", pod["metadata"]["uid"]))
        if _admitted(pod) and any(gate.get("name") == GATE for gate in spec.get("schedulingGates") or []):
            self.checker.violation("delegated-pod", f"{g.name}: pod {name} of backend {backend_of_pod(pod)} is admitted and still gated by tandem",
                                   once=("gate", pod["metadata"]["uid"]))

    def _gang_mismatches(self, g: "GroupNow", objects: Mapping[str, list[Mapping[str, Any]]]) -> list[tuple[tuple[str, ...], str]]:
        out: list[tuple[tuple[str, ...], str]] = []
        namespace = g.raw["metadata"]["namespace"]
        current = backend_of_group(g.raw)
        members: dict[tuple[str, str], list[Pod]] = {}
        for pod in g.pods:
            backend = backend_of_pod(pod)
            if backend == NATIVE or backend not in GANG_OF or not _live(pod) or not _admitted(pod):
                continue
            key, name_of = GANG_OF[backend]
            gang = name_of(pod)
            members.setdefault((key, gang or ""), []).append(pod)
            if key not in objects:
                continue  # not served here: the group is not accepted (`liveness` judges that)
            if backend != current and (key, namespace, gang) in self._deleted_by_hand:
                continue  # a backend the group is leaving: tandem makes none of its objects again (`hand-over` judges the rest)
            if gang is None or not any(o["metadata"]["name"] == gang and o["metadata"].get("namespace") == namespace for o in objects[key]):
                out.append((("missing", pod["metadata"]["uid"], key, gang or ""),
                            f"{g.name}: admitted pod {pod['metadata']['name']} names {key} {gang!r}, which does not exist"))
        for key, listed in objects.items():
            for obj in listed:
                if not _owned_by(obj, g.uid) or backend_of_key(key) != current:
                    continue  # another backend's, kept as it is while its pods remain during a hand-over (`hand-over`)
                name = obj["metadata"]["name"]
                admitted = members.get((key, name), [])
                minimum = _minimum(key, obj)
                if key == GANG_OF["workload-api"][0] and not admitted and (obj.get("spec") or {}).get("parentCompositePodGroupName"):
                    continue  # a replica's PodGroup below the highest admitted index: its parent's count judges it
                if minimum is not None and minimum > len(admitted):
                    out.append((("minimum", obj["metadata"]["uid"], str(minimum), str(len(admitted))),
                                f"{g.name}: {key} {name} asks for {minimum} pods, {len(admitted)} admitted"))
                if key == GANG_OF["kai"][0]:
                    for leaf in (obj.get("spec") or {}).get("subGroups") or []:
                        wanted = int(leaf.get("minMember") or 0)
                        having = sum(1 for p in admitted if (p["metadata"].get("labels") or {}).get(kai.SUBGROUP_LABEL) == leaf.get("name"))
                        if "parent" in leaf and wanted > having:
                            out.append((("kai-leaf", obj["metadata"]["uid"], str(leaf.get("name")), str(wanted), str(having)),
                                        f"{g.name}: KAI PodGroup {name} sub-group {leaf.get('name')} asks for {wanted} pods, {having} admitted"))
                if key == COMPOSITE:
                    wanted = int((((obj.get("spec") or {}).get("schedulingPolicy") or {}).get("gang") or {}).get("minGroupCount") or 0)
                    # a `basic` child always counts as met (the Workload API's rule): a role
                    # with nothing admitted yet is rendered so, and holds nothing back
                    having = sum(1 for child in _children(objects, g.uid, name) if _basic(child[1]) or _has_pods(objects, g.uid, child, members))
                    if wanted > having:
                        out.append((("composite", obj["metadata"]["uid"], str(wanted), str(having)),
                                    f"{g.name}: CompositePodGroup {name} asks for {wanted} groups, {having} have admitted pods"))
                if key == GANG_OF["kueue"][0]:
                    count = sum(int(s.get("count") or 0) for s in (obj.get("spec") or {}).get("podSets") or [])
                    totals = {(p["metadata"].get("annotations") or {}).get(kueue.TOTAL_ANNOTATION) for p in admitted}
                    if len(admitted) > count or totals - {str(count)}:
                        out.append((("kueue", obj["metadata"]["uid"], str(count), str(len(admitted))),
                                    f"{g.name}: Workload {name} counts {count} pods; {len(admitted)} admitted name it, made for {sorted(map(str, totals))}"))
        return out

    def _left_after_hand_over(self, g: "GroupNow", objects: Mapping[str, list[Mapping[str, Any]]]) -> list[tuple[tuple[str, ...], str]]:
        if g.typed is None or not g.settled():
            return []
        current = backend_of_group(g.raw)
        out: list[tuple[tuple[str, ...], str]] = []
        for pod in g.pods:
            if backend_of_pod(pod) != current:
                out.append((("pod", pod["metadata"]["uid"]), f"{g.name} runs complete on {current} beside pod {pod['metadata']['name']} of {backend_of_pod(pod)}"))
        for key, listed in objects.items():
            if backend_of_key(key) == current:
                continue
            for obj in listed:
                if _owned_by(obj, g.uid):
                    out.append((("object", obj["metadata"]["uid"]), f"{g.name} runs complete on {current} beside {key} {obj['metadata']['name']}"))
        return out

    def _persisting(self, invariant: str, key: tuple[str, ...], detail: str) -> None:
        world = self.checker.world
        clock = self._since.setdefault(key, [world.t, 0.0])
        if world.leaderless or world.storm_now() or world.stale_now():
            clock[1] += 1.0
        allowed = world.schedule.resync + SLACK_S + clock[1] + self.checker.skew
        if world.t - clock[0] > allowed:
            self.checker.violation(invariant, f"{detail} (since t={clock[0]:.0f}, {world.t - clock[0]:.0f}s > {allowed:.0f}s allowed)", once=key)


SLACK_S = 3.0


@dataclass(frozen=True)
class Edit:
    """A gang object changed by hand: its kind's key, the object before, what was done, when."""

    key: str
    before: Mapping[str, Any]
    edit: str
    at: float


def covers(have: Any, want: Any) -> bool:
    """Whether `have` holds every field of `want` as `want` has it (the server and the
    scheduler may add fields of their own: defaults, a status)."""
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(covers(have.get(k), v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(have) == len(want) and all(covers(h, w) for h, w in zip(have, want))
    return bool(have == want)


COMPOSITE = _key("workload-api", "CompositePodGroup")


def _children(objects: Mapping[str, list[Mapping[str, Any]]], uid: str, parent: str) -> list[tuple[str, Mapping[str, Any]]]:
    """The Workload API objects of the group whose parent is the CompositePodGroup `parent`."""
    return [(key, o) for key in (COMPOSITE, GANG_OF["workload-api"][0]) for o in objects.get(key, [])
            if _owned_by(o, uid) and (o.get("spec") or {}).get("parentCompositePodGroupName") == parent]


def _has_pods(objects: Mapping[str, list[Mapping[str, Any]]], uid: str, child: tuple[str, Mapping[str, Any]],
              members: Mapping[tuple[str, str], list[Pod]]) -> bool:
    key, obj = child
    name = obj["metadata"]["name"]
    if key != COMPOSITE:
        return bool(members.get((key, name)))
    return any(_has_pods(objects, uid, c, members) for c in _children(objects, uid, name))


def _basic(obj: Mapping[str, Any]) -> bool:
    return "basic" in ((obj.get("spec") or {}).get("schedulingPolicy") or {})


def _raw_gpus(g: "GroupNow", role: str) -> int:
    written = next(r for r in g.raw["spec"]["roles"] if r["name"] == role)
    return sum(int(c["resources"]["requests"].get(GPU_RESOURCE, 0)) for c in written["template"]["spec"]["containers"])


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])
