"""A schedule: a small cluster, a few InferenceGroups, and timed events (user changes and
faults), all drawn from one seed and kept as plain JSON so a failing one can be saved,
read, edited and replayed.

Time is in seconds from the start of the run. Faults happen only inside the fault window
`[0, fault_window)`; at `fault_window` every node recovers, every dead operator replica
restarts, and the run settles (at most `settle` more seconds) so the eventual invariants
(status agrees with the pods, every group that fits is functional) can be checked.

Event types (`type`, then its fields):

| type | fields | what happens |
|---|---|---|
| `create` | group | the group (from `groups`) is created |
| `delete` | group | the group is deleted (its pods go by owner reference) |
| `scale` | group, replicas | `spec.replicas` (units) changes |
| `ratio` | group, replicas | each role's `replicas` changes ({role: count}; coordination scaling) |
| `template` | group, revision | every role's template gets `FAULT_REVISION=<revision>` (a rolling update) |
| `node-loss` | nodes, recover_after | nodes go NotReady and their pods fail; back after `recover_after` s (null: at the end of the window) |
| `flap` | node, down_for | a node is NotReady for `down_for` s; its pods are not Ready meanwhile, then Ready again |
| `bind-outage` | nodes, until | until then, no pod is bound to these nodes (kube-scheduler or the nodes' kubelets stuck): pods placed there wait, past their gang timeout |
| `startup-failures` | until, rate | until then, each pod that would become Ready fails at start-up with probability `rate` |
| `crash` | replica, after_writes, restart_after | the replica (an index, or `leader`) dies before its `after_writes`-th next write (between two writes) and restarts `restart_after` s later |
| `storm` | code, until, rate | until then, each API write (and Lease read) is answered `code` (409, 429, 500, 503, 504) with probability `rate`; `504-applied`: the write is applied, then 504 |
| `stale` | replica, until, lag | until then, the replica reads a snapshot `lag` s old (plus its own writes, as the adapter's informers give it) |
| `watch-cut` | | (HTTP) the server ends every open watch |
| `gone` | as_status | (HTTP) the server compacts its history and ends the watches: 410 Gone, as an ERROR event or as the answer |
| `list-errors` | code, until | (HTTP) until then, the informers' lists are answered `code` half the time |
| `failover` | graceful, restart_after | the leader is stopped (SIGTERM: it releases the Lease; else SIGKILL: it does not) and restarts `restart_after` s later (null: at the end of the window) |
| `fill` | until | every node's free GPUs are taken by pods of another namespace (bound: capacity already used) until then: a rolling update that follows has no room for its surge |
| `pod-delete` | which, pick | a pod of a group is deleted (eviction, preemption, `kubectl delete pod`): a `leader` (pod index 0 of a multi-pod replica, else of any) or a `worker`, the `pick`-th (modulo) of those alive, by name |
| `node-delete` | node, recover_after | the Node is deleted and its pods with it (pod GC); it comes back (a new Node of that name) `recover_after` s later, at the latest at the end of the window |
| `backend` | group, backend | `spec.scheduler.backend` changes (`native`, or a delegated scheduler): a new revision, handed over unit by unit (a rolling update) |
| `gang-edit` | group, edit, pick | one of the group's gang objects (the `pick`-th, modulo, by kind and name) changed by hand, as `kubectl` would: `delete`d, its `minMember` raised or lowered by one (`min-member`: Volcano, KAI, Koordinator; another kind has its annotation dropped instead), a tandem `label` or the `tandem.dev/rendered` `annotation` removed |
| `scheduler-stop` | backend, until | the backend's scheduler (its stand-in) is stopped until then: no binds, no admissions, no status writes; binds it sent before still land |
| `load` | group, level | (autoscaled groups) the load sent to the group's engines from now on, requests/s |
| `metrics-outage` | until | until then, the metrics source is down: every scrape of every pod fails |
| `scrape-missing` | group, pick, until | until then, one Ready replica leader of the group (the `pick`-th, modulo, by name) does not answer its scrapes |
| `series-stale` | group, pick, until | until then, that pod's series stop updating: counters and histograms frozen, gauges the staleness marker (NaN) |
| `counter-reset` | group, pick | that pod's engine restarts: its counters and histograms drop to 0 and count on |

Besides what the main draws give, each schedule draws, from a generator of its own (so
the rest of the schedule is what it was without them), `recovery: ReplaceMissingPod` for
some multi-pod roles and up to two pod or node deletions (`_replica_faults`); and, from
another (`_delegated`), a third of the groups handed to a delegated scheduler (Volcano,
KAI, Koordinator, Kueue; the Workload API where the world serves it) and sometimes a
change of a running group's backend; and from a third (`_backend_faults`), in schedules
with a delegated group, gang objects edited or deleted by hand and a scheduler stopped
for a while. And from a fourth (`_metrics`, in memory only), in some schedules,
`spec.autoscaling` on groups of prefill and decode (each policy), a scripted load and the
metric faults: the world then runs the operator's autoscaler loop (issue 29).
"""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.builders import cluster, group, role
from tandem.controller.validity import group_problems, topologies_of

VERSION = 1
EPOCH = 1_764_000_000.0  # true time zero, as seconds since the epoch (timestamps look real)
GPUS_PER_NODE = 8
STORM_CODES = (409, 429, 500, 503, 504, "504-applied")
# The schedulers a group may be handed to, per world: the memory world registers every
# delegated kind; the local API server serves the CRDs installed from ../shared/schemas
# (it has no Workload API), or none when they are absent.
MEMORY_BACKENDS = ("volcano", "kai", "koordinator", "kueue", "workload-api")
SCHEMAS = Path(__file__).resolve().parents[3] / ".." / "shared" / "schemas"
HTTP_BACKENDS = ("volcano", "kai", "koordinator", "kueue")
DELEGATED_SHARE = 1 / 3  # of the groups, named a delegated backend
BACKEND_CHANGE = 0.4  # of the schedules with a group to change, a change of backend


def world_backends(world: str) -> tuple[str, ...]:
    """The delegated backends `world` serves (and its operator replicas enable)."""
    if world == "memory":
        return MEMORY_BACKENDS
    return HTTP_BACKENDS if SCHEMAS.is_dir() else ()


@dataclass
class Schedule:
    seed: int
    shape: str
    groups: dict[str, dict[str, Any]]  # name -> InferenceGroup manifest
    events: list[dict[str, Any]]
    replicas: int = 1  # operator replicas (leader election between them)
    clocks: list[dict[str, float]] = field(default_factory=list)  # per replica: offset (s) and rate
    fault_window: float = 120.0
    settle: float = 900.0
    resync: float = 30.0
    lease: dict[str, float] = field(default_factory=lambda: {"duration": 15.0, "renew_deadline": 10.0, "renew_every": 2.0})
    world: str = "memory"  # or "http"
    metrics: dict[str, Any] | None = None  # the autoscaler's metrics source ({"window": s}); None: no group is autoscaled

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "seed": self.seed,
            "world": self.world,
            "shape": self.shape,
            "replicas": self.replicas,
            "clocks": self.clocks,
            "fault_window": self.fault_window,
            "settle": self.settle,
            "resync": self.resync,
            "lease": self.lease,
            "groups": self.groups,
            "events": self.events,
        } | ({"metrics": self.metrics} if self.metrics is not None else {})

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Schedule":
        if data.get("version") != VERSION:
            raise ValueError(f"schedule version {data.get('version')!r}, this campaign reads {VERSION}")
        return cls(
            seed=int(data["seed"]),
            shape=data["shape"],
            groups=data["groups"],
            events=data["events"],
            replicas=int(data.get("replicas", 1)),
            clocks=data.get("clocks") or [{"offset": 0.0, "rate": 1.0}] * int(data.get("replicas", 1)),
            fault_window=float(data["fault_window"]),
            settle=float(data.get("settle", 900.0)),
            resync=float(data.get("resync", 30.0)),
            lease=data.get("lease") or {"duration": 15.0, "renew_deadline": 10.0, "renew_every": 2.0},
            world=data.get("world", "memory"),
            metrics=data.get("metrics"),
        )

    def save(self, path: Path, **extra: Any) -> None:
        path.write_text(json.dumps({**self.to_json(), **extra}, indent=1, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: Path) -> "Schedule":
        return cls.from_json(json.loads(path.read_text()))

    def cluster_objects(self) -> list[dict[str, Any]]:
        return cluster(self.shape, GPUS_PER_NODE)

    def kinds(self) -> list[str]:
        """The event types, in order (for summaries)."""
        return [e["type"] for e in self.events]


# ----------------------------------------------------------------------------- drawing


def generate(seed: int, *, world: str = "memory", size: float = 1.0, backends: tuple[str, ...] | None = None, metrics: bool = True) -> Schedule:
    """The schedule of `seed`: the same seed always gives the same schedule. `size` scales
    the fault window (smaller schedules, the same mixture). `backends`: the delegated
    schedulers its groups may name (by default, those `world` serves). `metrics` False: no
    group autoscaled (the schedule as it was before issue 29's metric faults)."""
    rng = random.Random(f"tandem-faults-{seed}")
    racks, hosts = rng.choice([2, 3]), rng.choice([2, 3, 4])
    shape = f"block=1,rack={racks},host={hosts}"
    nodes = [o["metadata"]["name"] for o in cluster(shape, GPUS_PER_NODE) if o["kind"] == "Node"]
    rack_of = {o["metadata"]["name"]: o["metadata"]["labels"]["network.tandem.dev/rack"] for o in cluster(shape) if o["kind"] == "Node"}
    window = float(round(rng.uniform(90, 180) * size))
    replicas = 2 if rng.random() < 0.5 else 1
    clocks = [{"offset": 0.0, "rate": 1.0}]
    if replicas == 2:
        clocks.append({"offset": round(rng.uniform(-4.0, 4.0), 3), "rate": round(rng.uniform(0.999, 1.001), 6)})
    groups = _groups(rng, racks, hosts)
    events: list[dict[str, Any]] = []
    for name in groups:
        events.append({"at": float(rng.randint(0, 15)), "type": "create", "group": name})
    changed = _user_changes(rng, groups, window, events)
    faults = rng.randint(1, 5)
    kinds = ["node-loss", "rack-loss", "flap", "bind-outage", "startup-failures", "crash", "storm"] + (["failover"] if replicas == 2 else [])
    weights = [3, 2, 2, 2, 2, 3, 4] + ([3] if replicas == 2 else [])
    if world == "http":  # the adapter's informers lag as they lag; the server cuts and compacts
        kinds, weights = kinds + ["watch-cut", "gone", "list-errors"], weights + [3, 3, 2]
    else:
        kinds, weights = kinds + ["stale"], weights + [2]
    for kind in rng.choices(kinds, weights, k=faults):
        events.append(_fault(rng, kind, window, nodes, rack_of, replicas, changed, world))
    _full_domain_update(seed, groups, window, events)
    events += _replica_faults(random.Random(f"tandem-faults-{seed}-replicas"), groups, window, nodes)
    events += _delegated(random.Random(f"tandem-faults-{seed}-backends"), groups, window, world_backends(world) if backends is None else backends,
                         shape, events)
    events += _backend_faults(random.Random(f"tandem-faults-{seed}-backend-faults"), groups, window, events)
    source = None
    if world == "memory" and metrics:
        source = _metrics(random.Random(f"tandem-faults-{seed}-metrics"), groups, window, events, racks * hosts * GPUS_PER_NODE, hosts * GPUS_PER_NODE)
    events.sort(key=lambda e: (e["at"], _ORDER.index(e["type"])))
    return Schedule(seed, shape, groups, events, replicas, clocks, window, world=world, metrics=source)


def _full_domain_update(seed: int, groups: dict[str, dict[str, Any]], window: float, events: list[dict[str, Any]]) -> None:
    """Full domains during updates (issue 25): in one schedule in five, every node's free
    room is filled, then a group's template changes, so its surge has no room until the
    fill ends (before the end of the window, or at it); and in those, one group in three
    is given a Required prefill→decode affinity at the rack. Drawn from a generator of its
    own, so the other schedules are what they were, and the rest of these too."""
    rng = random.Random(f"tandem-faults-full-{seed}")
    if rng.random() >= 0.2:
        return
    for manifest in groups.values():
        if rng.random() < 1 / 3 and {r["name"] for r in manifest["spec"]["roles"]} >= {"prefill", "decode"}:
            manifest["spec"]["affinity"] = [{"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}]
    at = float(rng.randint(30, max(31, int(window) - 30)))
    until = rng.choice([min(at + rng.randint(60, 150), window), None])
    revision = 100 + sum(1 for e in events if e["type"] == "template")
    events.append({"at": at, "type": "fill", "until": until})
    events.append({"at": at + 1.0, "type": "template", "group": rng.choice(sorted(groups)), "revision": revision})


_ORDER = ["create", "scale", "ratio", "template", "delete", "node-loss", "flap", "bind-outage", "startup-failures", "crash", "storm", "stale",
          "failover", "watch-cut", "gone", "list-errors", "fill", "pod-delete", "node-delete", "backend", "gang-edit", "scheduler-stop",
          "load", "metrics-outage", "scrape-missing", "series-stale", "counter-reset"]
GANG_EDITS = ("delete", "min-member", "label", "annotation")
GANG_EDIT_SHARE = 0.6  # of the schedules with a delegated group, those whose gang objects are edited by hand
SCHEDULER_STOP_SHARE = 0.4  # of those, the ones where a scheduler stops for a while
USER_CHANGES_STARTING = ("create", "scale", "ratio", "template", "backend")  # changes after which pods wait for their scheduler


def _groups(rng: random.Random, racks: int, hosts: int) -> dict[str, dict[str, Any]]:
    """One to three groups. Most schedules leave room: the groups' largest size (after any
    scaling the schedule may do, and a rolling update's surge) fits in half the cluster.
    Two in five are tight, up to 85% of it: there a lost node or rack leaves units without
    room, partially placed until their gang timeout releases them."""
    capacity = racks * hosts * GPUS_PER_NODE
    rack = hosts * GPUS_PER_NODE
    tight = rng.random() < 0.4
    budget = capacity * (85 if tight else 50) // 100
    out: dict[str, dict[str, Any]] = {}
    for index in range(rng.randint(1, 3)):
        for _ in range(20):  # draw until it fits what is left
            manifest = _group(rng, f"g{index}")
            need = _gpus(manifest, grow=0 if tight else 1)
            per_unit = need // manifest["spec"]["replicas"]
            pack = (manifest["spec"].get("topology") or {}).get("pack", {}).get("required")
            domain = rack if pack == "rack" else capacity
            if need <= budget and per_unit <= domain * (3 if tight else 2) // 4:
                out[manifest["metadata"]["name"]] = manifest
                budget -= need
                break
    if not out:
        out["g0"] = group("g0", [role("prefill", 1, 1, gpus=2), role("decode", 1, 1, gpus=2)])
    return out


def _group(rng: random.Random, name: str) -> dict[str, Any]:
    roles = []
    for role_name, most in (("prefill", 3), ("decode", 2)):
        replicas = rng.randint(1, most)
        minimum = rng.choice([None, 1, replicas] if replicas > 1 else [None, 1])
        roles.append(role(role_name, replicas, minimum, gpus=rng.choice([1, 2, 4, 8]), pods=rng.choice([1, 1, 2])))
    if rng.random() < 0.3:  # a third role, sometimes
        roles.append(role("router", 1, rng.choice([None, 0, 1]), gpus=rng.choice([1, 2])))
    manifest = group(name, roles, replicas=rng.randint(1, 2), required=rng.choice(["rack", "block", None]))
    spec = manifest["spec"]
    spec["scheduler"] = {"gangTimeoutSeconds": rng.choice([20, 40, 60])}
    coordination: dict[str, Any] = {
        "rollout": {"progression": rng.choice(["OrderScheduled", "OrderReady"]), "stepTimeoutSeconds": rng.choice([60, 120, 600])},
        "scaling": {"maxSkew": rng.choice([1, 2, "50%"]), "progression": rng.choice(["OrderScheduled", "OrderReady"])},
    }
    surge = rng.choice([0, 1, 1])
    coordination["rollingUpdate"] = {"maxSurge": surge, "maxUnavailable": rng.choice([1]) if surge == 0 else rng.choice([0, 0, 1]),
                                     "maxSkew": rng.choice([1, "50%"])}
    if rng.random() < 0.4:
        coordination["rollout"]["steps"] = {"prefill": rng.randint(1, 2), "decode": 1}
    spec["coordination"] = coordination
    return manifest


def _gpus(manifest: dict[str, Any], grow: int = 0) -> int:
    """GPUs of the whole group, each role `grow` replicas larger (scaling, a surge)."""
    per_unit = sum((r["replicas"] + grow) * r.get("podsPerReplica", 1) * _role_gpus(r) for r in manifest["spec"]["roles"])
    return per_unit * (manifest["spec"]["replicas"] + grow)


def _role_gpus(r: dict[str, Any]) -> int:
    return sum(int(c["resources"]["requests"].get("nvidia.com/gpu", 0)) for c in r["template"]["spec"]["containers"])


def _user_changes(rng: random.Random, groups: dict[str, dict[str, Any]], window: float, events: list[dict[str, Any]]) -> list[float]:
    """Up to three changes inside the window (scale, ratio, template, delete and re-create);
    returns when rollouts start (creates and template changes), for a failover to hit one."""
    starts = [e["at"] for e in events]
    names = sorted(groups)
    revision = 0
    for _ in range(rng.randint(0, 3)):
        name = rng.choice(names)
        manifest = groups[name]
        at = float(rng.randint(25, max(26, int(window) - 25)))
        kind = rng.choice(["scale", "ratio", "template", "template", "delete"])
        if kind == "scale":
            units = manifest["spec"]["replicas"]
            events.append({"at": at, "type": "scale", "group": name, "replicas": units + 1 if units == 1 else units - 1})
        elif kind == "ratio":  # new counts for every role: coordination scaling within maxSkew
            counts = {r["name"]: max(1, r["replicas"] + rng.choice([-1, 1, 1, 2])) for r in manifest["spec"]["roles"]}
            events.append({"at": at, "type": "ratio", "group": name, "replicas": counts})
        elif kind == "template":
            revision += 1
            events.append({"at": at, "type": "template", "group": name, "revision": revision})
            starts.append(at)
        else:
            events.append({"at": at, "type": "delete", "group": name})
            if rng.random() < 0.6:
                back = at + rng.randint(5, 30)
                events.append({"at": float(min(back, window - 1)), "type": "create", "group": name})
                starts.append(back)
    return starts


def _fault(
    rng: random.Random, kind: str, window: float, nodes: list[str], rack_of: dict[str, str], replicas: int, starts: list[float], world: str
) -> dict[str, Any]:
    at = float(rng.randint(5, int(window) - 10))
    if kind == "watch-cut":
        return {"at": at, "type": "watch-cut"}
    if kind == "gone":
        return {"at": at, "type": "gone", "as_status": rng.random() < 0.5}
    if kind == "list-errors":
        return {"at": at, "type": "list-errors", "code": rng.choice([500, 503, 504]), "until": min(at + rng.randint(3, 15), window)}
    if kind == "node-loss":
        return {"at": at, "type": "node-loss", "nodes": [rng.choice(nodes)], "recover_after": rng.choice([None, None, 20.0, 40.0, 80.0])}
    if kind == "rack-loss":
        rack = rng.choice(sorted(set(rack_of.values())))
        lost = [n for n in nodes if rack_of[n] == rack]
        return {"at": at, "type": "node-loss", "nodes": lost, "rack": rack, "recover_after": rng.choice([None, 30.0, 60.0])}
    if kind == "flap":  # mostly short; some long enough to outlast a gang timeout
        return {"at": at, "type": "flap", "node": rng.choice(nodes), "down_for": float(rng.choice([rng.randint(2, 15), rng.randint(20, 90)]))}
    if kind == "bind-outage":  # every node, or some: then a unit binds in part
        stuck = nodes if rng.random() < 0.4 else rng.sample(nodes, max(1, len(nodes) // 3))
        if starts and rng.random() < 0.6:
            at = float(min(rng.choice(starts), window - 10))
        return {"at": at, "type": "bind-outage", "nodes": sorted(stuck), "until": min(at + rng.randint(20, 90), window)}
    if kind == "startup-failures":
        return {"at": at, "type": "startup-failures", "until": min(at + rng.randint(20, 60), window), "rate": rng.choice([0.2, 0.4, 0.6])}
    if kind == "crash":
        if starts and rng.random() < 0.6:  # mid-rollout, when a pass has many writes to make
            at = float(min(rng.choice(starts) + rng.randint(0, 10), window - 5))
        return {"at": at, "type": "crash", "replica": "leader", "after_writes": rng.randint(0, 12), "restart_after": float(rng.randint(1, 10))}
    if kind == "storm":  # over HTTP too: the local API server's fault hook commits a write, then answers 504
        code = rng.choice(STORM_CODES)
        return {"at": at, "type": "storm", "code": code, "until": min(at + rng.randint(5, 30), window), "rate": rng.choice([0.3, 0.6, 0.9])}
    if kind == "stale":
        # Two replicas: a lag below leaseDuration - renewDeadline (5 s), so a new leader's
        # cache holds the old leader's last writes (docs/reliability.md, assumptions).
        lag = float(rng.randint(1, 4 if replicas == 2 else 8))
        return {"at": at, "type": "stale", "replica": rng.randrange(replicas), "until": min(at + rng.randint(10, 40), window), "lag": lag}
    # failover, mid-rollout: shortly after a create or a template change
    start = rng.choice(starts) if starts else at
    at = float(min(start + rng.randint(2, 20), window - 5))
    return {"at": at, "type": "failover", "graceful": rng.random() < 0.4, "restart_after": rng.choice([None, 5.0, 20.0])}


def _replica_faults(rng: random.Random, groups: dict[str, dict[str, Any]], window: float, nodes: list[str]) -> list[dict[str, Any]]:
    """Replicas losing pods: on multi-pod roles, mostly a required pack (rack: what a lost
    pod must not break) and sometimes `recovery: ReplaceMissingPod`; up to two deletions of
    a leader, a worker or a node (with its pods)."""
    for manifest in groups.values():
        for r in manifest["spec"]["roles"]:
            if r.get("podsPerReplica", 1) > 1:
                if rng.random() < 0.7:
                    r["topology"] = {"pack": {"required": "rack"}}
                if rng.random() < 0.4:
                    r["recovery"] = "ReplaceMissingPod"
    events: list[dict[str, Any]] = []
    for kind in rng.choices(["leader", "worker", "node"], [3, 3, 2], k=rng.choice([0, 1, 1, 2])):
        at = float(rng.randint(20, int(window) - 10))
        if kind == "node":
            events.append({"at": at, "type": "node-delete", "node": rng.choice(nodes), "recover_after": rng.choice([None, 20.0, 60.0])})
        else:
            events.append({"at": at, "type": "pod-delete", "which": kind, "pick": rng.randrange(1000)})
    return events


def _delegated(rng: random.Random, groups: dict[str, dict[str, Any]], window: float, backends: tuple[str, ...], shape: str,
               events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A share of the groups named a delegated backend (spread over those of `backends` that
    accept the group, as written and after each of its ratio changes), and in some schedules
    a change of one group's backend while it runs: delegated to native or to another
    scheduler, native to a delegated one (the rolling hand-over)."""
    if not backends:
        return []
    topologies, _ = topologies_of([o for o in cluster(shape) if o["kind"] == "ClusterTopology"])
    for name, manifest in sorted(groups.items()):
        if rng.random() < DELEGATED_SHARE:
            fitting = [b for b in backends if _accepts(manifest, b, [e for e in events if e.get("group") == name], topologies)]
            if fitting:
                manifest["spec"].setdefault("scheduler", {})["backend"] = rng.choice(fitting)
    if rng.random() >= BACKEND_CHANGE:
        return []
    name = rng.choice(sorted(groups))
    now = groups[name]["spec"].get("scheduler", {}).get("backend", "native")
    at = float(rng.randint(25, max(26, int(window) - 25)))
    later = [e for e in events if e.get("group") == name]
    targets = [b for b in ("native", *backends) if b != now and _accepts(groups[name], b, later, topologies)]
    return [{"at": at, "type": "backend", "group": name, "backend": rng.choice(targets)}] if targets else []


def _backend_faults(rng: random.Random, groups: dict[str, dict[str, Any]], window: float, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Faults of the delegated schedulers' side (issue 27), in schedules where some group is
    delegated (as written or after a change of backend): one or two of its gang objects
    edited or deleted by hand, and its scheduler stopped for 15–200 s (past a step's
    timeout, often; the window's end ends it), mostly just after a change that leaves pods waiting for it, then
    started again."""
    delegated: dict[str, tuple[str, float]] = {}  # group -> its (first) delegated backend, and from when
    for name, manifest in sorted(groups.items()):
        backend = manifest["spec"].get("scheduler", {}).get("backend", "native")
        if backend != "native":
            delegated[name] = (backend, 0.0)
    for e in events:
        if e["type"] == "backend" and e["backend"] != "native":
            delegated.setdefault(e["group"], (e["backend"], float(e["at"])))
    if not delegated:
        return []
    out: list[dict[str, Any]] = []
    if rng.random() < GANG_EDIT_SHARE:
        for _ in range(rng.choice([1, 1, 2])):
            name = rng.choice(sorted(delegated))
            at = float(rng.randint(int(max(20.0, delegated[name][1] + 15)), max(21, int(window) - 10)))
            out.append({"at": min(at, window - 1), "type": "gang-edit", "group": name, "edit": rng.choice(GANG_EDITS), "pick": rng.randrange(1000)})
    if rng.random() < SCHEDULER_STOP_SHARE:
        name = rng.choice(sorted(delegated))
        backend, since = delegated[name]
        starts = [float(e["at"]) for e in events if e.get("group") == name and e["type"] in USER_CHANGES_STARTING and float(e["at"]) >= since]
        if starts and rng.random() < 0.7:  # as its pods wait for it: a create, a change, a hand-over
            at = float(min(rng.choice(starts) + rng.randint(0, 5), window - 5))
        else:
            at = float(min(rng.randint(int(max(10.0, since + 5)), max(11, int(window) - 20)), window - 5))
        out.append({"at": at, "type": "scheduler-stop", "backend": backend, "until": min(at + rng.choice([rng.randint(15, 60), rng.randint(60, 200)]), window)})
    return out


def _accepts(manifest: dict[str, Any], backend: str, changes: list[dict[str, Any]], topologies: dict[str, Any]) -> bool:
    """Whether `backend` accepts the group as written and after each of its ratio changes (a
    group its scheduler cannot honour is not accepted: not what these schedules test)."""
    candidate = copy.deepcopy(manifest)
    candidate["spec"].setdefault("scheduler", {})["backend"] = backend
    for change in [None, *sorted((e for e in changes if e["type"] == "ratio"), key=lambda e: e["at"])]:
        if change is not None:
            for r in candidate["spec"]["roles"]:
                if r["name"] in change["replicas"]:
                    r["replicas"] = int(change["replicas"][r["name"]])
                    if r.get("minReplicas") is not None:
                        r["minReplicas"] = min(r["minReplicas"], r["replicas"])
        _, problems = group_problems(candidate, topologies)
        if problems:
            return False
    return True


def patched_template(manifest: dict[str, Any], revision: int) -> dict[str, Any]:
    """The group's roles with `FAULT_REVISION=<revision>` in every container: a new revision."""
    roles = copy.deepcopy(manifest["spec"]["roles"])
    for r in roles:
        for key in ("template", "workerTemplate"):
            if key not in r:
                continue
            for container in r[key]["spec"]["containers"]:
                env = [e for e in container.get("env", []) if e.get("name") != "FAULT_REVISION"]
                container["env"] = [*env, {"name": "FAULT_REVISION", "value": str(revision)}]
    return {"spec": {"roles": roles}}


# ----------------------------------------------------------------------------- autoscaling and metric faults (issue 29)

METRICS_SHARE = 0.4  # of the in-memory schedules, those with autoscaled groups and metric faults
LOAD_LEVELS = (0.0, 1.0, 3.0, 6.0, 10.0, 16.0)  # requests/s sent to a group (a replica serves 4)
METRIC_FAULTS = ("metrics-outage", "scrape-missing", "series-stale", "counter-reset")
TARGETS = {  # what PreferredBand and Independent may size each role on (engines.py's model)
    "prefill": [{"metric": "queueDepth", "value": 2}, {"metric": "tokensPerSecond", "value": 6000}, {"metric": "kvUtilization", "value": 0.3}],
    "decode": [{"metric": "kvUtilization", "value": 0.6}, {"metric": "tokensPerSecond", "value": 1500}, {"metric": "queueDepth", "value": 2},
               {"metric": "busyFraction", "value": 0.8}],
}
BANDS = [None, {"prefill": {"minPercent": 20, "maxPercent": 60}, "decode": {"minPercent": 40, "maxPercent": 80}},
         {"prefill": {"minPercent": 30, "maxPercent": 50}, "decode": {"minPercent": 50, "maxPercent": 70}},
         {"prefill": {"minPercent": 40, "maxPercent": 60}, "decode": {"minPercent": 40, "maxPercent": 60}}]
RATIOS = ({"prefill": 1, "decode": 1}, {"prefill": 1, "decode": 2}, {"prefill": 2, "decode": 1})


def _metrics(rng: random.Random, groups: dict[str, dict[str, Any]], window: float, events: list[dict[str, Any]], capacity: int,
             rack: int) -> dict[str, Any] | None:
    """Issue 29: in some schedules, `spec.autoscaling` on native groups with prefill and
    decode (those two managed; a router is left alone, and runs `vllm-router`; a policy each, bounds the cluster holds), a load that steps up and down,
    and 1–4 metric faults. Their `ratio` changes are dropped: a count a person writes
    outside the ratio would be held by the windows, not an autoscaler's decision (the
    invariants judge the autoscaler's). The source's window (20 or 30 s) is returned."""
    if rng.random() >= METRICS_SHARE:
        return None
    changed = {e["group"] for e in events if e["type"] == "backend"}
    eligible = [name for name, m in sorted(groups.items()) if {r["name"] for r in m["spec"]["roles"]} >= {"prefill", "decode"}
                and m["spec"].get("scheduler", {}).get("backend", "native") == "native" and name not in changed]
    chosen = [name for name in eligible if rng.random() < 0.7] or eligible[:1]
    chosen = [name for name in chosen if _autoscale(rng, name, groups, events, capacity, rack)]
    if not chosen:
        return None
    events[:] = [e for e in events if not (e["type"] == "ratio" and e["group"] in chosen)]
    for name in chosen:
        events.append({"at": 0.0, "type": "load", "group": name, "level": rng.choice(LOAD_LEVELS[1:4])})
        for _ in range(rng.randint(2, 4)):
            events.append({"at": float(rng.randint(20, max(21, int(window) - 15))), "type": "load", "group": name, "level": rng.choice(LOAD_LEVELS)})
    for kind in rng.choices(METRIC_FAULTS, [3, 3, 3, 2], k=rng.randint(1, 4)):
        at = float(rng.randint(10, max(11, int(window) - 10)))
        name = rng.choice(chosen)
        if kind == "metrics-outage":
            events.append({"at": at, "type": kind, "until": min(at + rng.randint(10, 50), window)})
            if rng.random() < 0.5:  # the load drops as the source goes down: a scale-down to get wrong
                events.append({"at": at, "type": "load", "group": name, "level": 0.0})
        elif kind == "counter-reset":
            events.append({"at": at, "type": kind, "group": name, "pick": rng.randrange(1000)})
        else:
            events.append({"at": at, "type": kind, "group": name, "pick": rng.randrange(1000), "until": min(at + rng.randint(5, 60), window)})
    return {"window": float(rng.choice([20, 30]))}


def _autoscale(rng: random.Random, name: str, groups: dict[str, dict[str, Any]], events: list[dict[str, Any]], capacity: int, rack: int) -> bool:
    """Give the group `spec.autoscaling` (whether it got it): counts inside the policy's
    ratio or bands, bounds 1..max with the group at its largest (a unit more where the
    schedule scales it, a surge replica per role) and the others as written within 85% of
    the cluster, a unit within 3/4 of its required domain."""
    manifest = groups[name]
    spec = manifest["spec"]
    policy = rng.choice(["FixedRatio", "FixedRatio", "PreferredBand", "PreferredBand", "SLO", "Independent"])
    ratio = rng.choice(RATIOS)
    start = dict(ratio) if policy == "FixedRatio" else {"prefill": 1, "decode": 1}
    roles = {r["name"]: r for r in spec["roles"]}
    per_replica = {n: r.get("podsPerReplica", 1) * _role_gpus(r) for n, r in roles.items()}
    scaled = any(e["type"] == "scale" and e["group"] == name for e in events)
    units = spec["replicas"] + (1 if scaled else 0)
    others = sum(_gpus(m) for n, m in groups.items() if n != name)
    domain = rack if (spec.get("topology") or {}).get("pack", {}).get("required") == "rack" else capacity

    fixed = sum((r["replicas"] + 1) * per_replica[n] for n, r in roles.items() if n not in start)  # a router

    def fits(most: dict[str, int]) -> bool:
        per_unit = fixed + sum((most[n] + 1) * per_replica[n] for n in most)
        return others + units * per_unit <= capacity * 85 // 100 and per_unit <= domain * 3 // 4

    most = dict(start)
    if not fits(most):
        return False
    for _ in range(6):
        grown = False
        for n in ("decode", "prefill"):
            bigger = {**most, n: most[n] + 1}
            if most[n] < 5 and fits(bigger):
                most, grown = bigger, True
        if not grown:
            break
    if most == start:
        return False
    for n in start:
        roles[n]["replicas"] = start[n]
        roles[n]["minReplicas"] = 1
    for n in set(roles) - set(start):  # a router runs a router, not an engine the metrics read
        for container in roles[n]["template"]["spec"]["containers"]:
            container["command"] = ["vllm-router", "--port", "8000"]
    targets = {n: rng.choice(TARGETS[n]) for n in ("prefill", "decode")}
    autoscaling: dict[str, Any] = {
        "policy": policy,
        "intervalSeconds": rng.choice([2, 3, 5]),
        "roles": {n: {"minReplicas": 1, "maxReplicas": most[n]} for n in ("prefill", "decode")},
        "stabilization": {"scaleUpSeconds": rng.choice([0, 0, 5]), "scaleDownSeconds": rng.choice([0, 10, 30])},
        "panic": {"thresholdPercent": rng.choice([150, 200, 400]), "windowSeconds": rng.choice([10, 30])},
        "ratioEnforcement": rng.choice(["keepTotal", "raiseShort"]),
        "fixedRatio": {"ratio": ratio, "decodeTokensPerSecondPerReplica": 1400},
        "preferredBand": {"targets": targets, "costWeight": rng.choice([0.0, 0.5, 1.0])},
        "slo": {"ttftSeconds": 0.5, "itlSeconds": 0.05, "prefillTokensPerSecondPerReplica": 6000, "decodeTokensPerSecondPerReplica": 1500},
        "independent": {"targets": targets, "tolerancePercent": 10},
    }
    bands = rng.choice(BANDS)
    if bands is not None:
        autoscaling["preferredBand"]["bands"] = bands
    spec["autoscaling"] = autoscaling
    return True
