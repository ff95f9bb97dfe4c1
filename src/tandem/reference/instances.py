"""Small seeded placement problems, and the scoring every policy is measured with.

Instances are built as manifests (the same Node, Pod, ClusterTopology and InferenceGroup
documents a user hands `tandem plan`) and loaded through `tandem.api.loading`, so every
instance is a valid input and can be dumped to a file to reproduce a result with the
CLI. They stay small (at most 32 nodes, a dozen units) so that the exact solver proves
optimality in seconds.

`score` evaluates any `Plan` against the promises of DESIGN.md §1 independently of who
made it: functional units, hard-constraint violations (capacity, replica gang, packs,
Required affinity), affinity satisfied, and GPUs held by units that are not functional.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import yaml

from tandem.api.naming import GPU_RESOURCE
from tandem.api.loading import load_texts
from tandem.placement import Plan, UnitDemand, units_from_groups
from tandem.placement.verify import check_plan
from tandem.topology import ClusterSnapshot, TopologyView
from tandem.topology.generate import generate_cluster

GPU = GPU_RESOURCE
NAMESPACE = "bench"
# Cluster shapes (broadest level first), at most 32 nodes of 8 GPUs.
SHAPES: tuple[tuple[tuple[str, int], ...], ...] = (
    (("block", 2), ("rack", 2), ("host", 2)),
    (("block", 2), ("rack", 2), ("host", 4)),
    (("block", 1), ("rack", 4), ("host", 4)),
    (("block", 2), ("rack", 4), ("host", 2)),
    (("block", 2), ("rack", 2), ("host", 8)),
    (("block", 4), ("rack", 2), ("host", 4)),
    (("block", 2), ("rack", 4), ("host", 4)),
)
_DEPTH = {"block": 1, "rack": 2, "host": 3}


# ----------------------------------------------------------------------------- manifests


def role(
    name: str,
    replicas: int,
    *,
    minimum: int | None = None,
    pods: int = 1,
    gpus: int = 8,
    required: str | None = None,
    preferred: str | None = None,
) -> dict[str, Any]:
    """An InferenceGroup role manifest; CPU and memory scale with the GPUs asked for."""
    requests = {GPU: str(gpus), "cpu": str(max(1, 4 * gpus)), "memory": f"{max(4, 16 * gpus)}Gi"}
    out: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "podsPerReplica": pods,
        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm", "resources": {"requests": requests}}]}},
    }
    if minimum is not None:
        out["minReplicas"] = minimum
    pack = {k: v for k, v in (("required", required), ("preferred", preferred)) if v is not None}
    if pack:
        out["topology"] = {"pack": pack}
    return out


def group(
    name: str,
    roles: Sequence[dict[str, Any]],
    *,
    units: int = 1,
    priority: int = 0,
    required: str | None = "block",
    preferred: str | None = None,
    affinity: Sequence[tuple[str, str, str, str]] = (),
    namespace: str = NAMESPACE,
) -> dict[str, Any]:
    """An InferenceGroup manifest; `affinity` is (from, to, level, mode) tuples."""
    pack = {k: v for k, v in (("required", required), ("preferred", preferred)) if v is not None}
    return {
        "apiVersion": "tandem.dev/v1alpha1",
        "kind": "InferenceGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": units,
            "priority": priority,
            "topology": {"pack": pack},
            "roles": list(roles),
            "affinity": [{"from": f, "to": t, "level": level, "mode": mode} for f, t, level, mode in affinity],
        },
    }


def busy_pod(name: str, node: str, gpus: int) -> dict[str, Any]:
    """A pod of someone else, bound to `node`: capacity already used."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "other"},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "busy", "resources": {"requests": {GPU: str(gpus), "cpu": str(4 * gpus)}}}],
        },
        "status": {"phase": "Running"},
    }


def cluster(
    shape: Sequence[tuple[str, int]], *, busy: Mapping[int, int] | None = None, cordoned: Sequence[int] = ()
) -> list[dict[str, Any]]:
    """ClusterTopology + Nodes (+ bound Pods using `busy[node index]` GPUs), 8 GPUs a node."""
    topology, nodes = generate_cluster(list(shape), gpus=8)
    for index in cordoned:
        nodes[index]["spec"]["unschedulable"] = True
    pods = [busy_pod(f"busy-{i}", nodes[i]["metadata"]["name"], g) for i, g in sorted((busy or {}).items()) if g > 0]
    return [topology, *nodes, *pods]


# ----------------------------------------------------------------------------- instances


@dataclass(frozen=True, eq=False)
class Instance:
    """A placement problem: the manifests, and what the engine consumes made from them."""

    name: str
    manifests: tuple[dict[str, Any], ...]
    snapshot: ClusterSnapshot
    views: Mapping[str, TopologyView]
    units: tuple[UnitDemand, ...]
    notes: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, name: str, manifests: Sequence[dict[str, Any]], **notes: Any) -> "Instance":
        """Load manifests as `tandem plan` would (validation included) and derive the units."""
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(manifests)})
        inputs = load_texts([(name, text)])
        snapshot, _ = ClusterSnapshot.build(inputs.nodes, inputs.pods)
        names = sorted({g.spec.topology_name for g in inputs.groups})
        views = {n: TopologyView.build(inputs.topologies[n], snapshot) for n in names}
        return cls(name, tuple(manifests), snapshot, views, tuple(units_from_groups(inputs.groups)), dict(notes))

    @property
    def node_count(self) -> int:
        return len(self.snapshot.node_names)

    def yaml(self) -> str:
        return yaml.safe_dump_all(self.manifests, sort_keys=False)

    def dump(self, directory: str | Path) -> Path:
        """Write the manifests to `<directory>/<name>.yaml` (for `tandem plan FILE`)."""
        path = Path(directory) / f"{self.name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.yaml(), encoding="utf-8")
        return path


def random_instance(seed: int, *, contention: bool = False) -> Instance:
    """A seeded random small problem.

    1-4 InferenceGroups of prefill/decode (sometimes a router) with random counts, sizes,
    packs and affinity on a cluster of 8-32 nodes, some partly used by other pods and
    sometimes one cordoned. With `contention`, groups are added until the sum of all
    minimum gangs exceeds the free GPUs by at least a third.
    """
    rng = random.Random(seed)
    shape = rng.choice(SHAPES)
    count = int(np.prod([c for _, c in shape]))
    busy = {i: rng.choice((2, 4, 4, 6, 8)) for i in range(count) if rng.random() < 0.2}
    cordoned = [rng.randrange(count)] if rng.random() < 0.25 else []
    manifests = cluster(shape, busy=busy, cordoned=cordoned)
    free_gpus = 8 * count - sum(busy.values()) - sum(8 - busy.get(i, 0) for i in cordoned)
    groups: list[dict[str, Any]] = []
    wanted = rng.randint(1, 4)
    minimum_gpus = 0
    while len(groups) < wanted or (contention and minimum_gpus * 3 < free_gpus * 4):
        manifest, gpus = _random_group(rng, f"g{len(groups)}", shape)
        groups.append(manifest)
        minimum_gpus += gpus
        if len(groups) >= 12:
            break
    kind = "contention" if contention else "random"
    return Instance.of(
        f"{kind}-{seed}",
        manifests + groups,
        seed=seed,
        shape=",".join(f"{n}={c}" for n, c in shape),
        free_gpus=free_gpus,
        minimum_gpus=minimum_gpus,
    )


def _random_group(rng: random.Random, name: str, shape: Sequence[tuple[str, int]]) -> tuple[dict[str, Any], int]:
    """(manifest, GPUs of all its minimum gangs)."""
    unit_required = rng.choice(("block", "rack"))
    narrower = [lv for lv, _ in shape if _DEPTH[lv] > _DEPTH[unit_required]]
    unit_preferred = rng.choice([None, None, *narrower])
    names = ["prefill", "decode"] + (["router"] if rng.random() < 0.25 else [])
    roles = []
    minimum_gpus = 0
    for role_name in names:
        if role_name == "router":
            replicas, pods, gpus = rng.randint(1, 2), 1, rng.choice((1, 2))
        else:
            replicas, pods, gpus = rng.randint(1, 4), rng.choice((1, 1, 2)), rng.choice((1, 2, 4, 8))
        minimum = rng.randint(1, replicas)
        required = preferred = None
        if pods > 1:
            choices = [None, *[lv for lv, _ in shape if _DEPTH[lv] >= _DEPTH[unit_required]]]
            if pods * gpus > 8:
                choices.remove("host")
            required = rng.choice(choices)
            if pods * gpus <= 8 and required != "host" and rng.random() < 0.5:
                preferred = "host"
        roles.append(role(role_name, replicas, minimum=minimum, pods=pods, gpus=gpus, required=required, preferred=preferred))
        minimum_gpus += minimum * pods * gpus
    affinity = []
    if rng.random() < 0.75:
        affinity.append(("prefill", "decode", rng.choice(("rack", "host")), rng.choice(("Preferred", "Required"))))
    if "router" in names and rng.random() < 0.5:
        affinity.append(("router", "prefill", "rack", "Preferred"))
    units = rng.choice((1, 1, 1, 2, 2, 3))
    manifest = group(
        name,
        roles,
        units=units,
        priority=rng.choice((0, 0, 0, 1)),
        required=unit_required,
        preferred=unit_preferred,
        affinity=affinity,
    )
    return manifest, minimum_gpus * units


def contention_scenarios(seed: int = 0, random_count: int = 8) -> list[Instance]:
    """Hand-made scenarios with more minimum demand than capacity, then seeded random ones."""
    scenarios = [_orphan_prefill(), _fragmented_blocks(), _small_after_big(), _priority_mix()]
    scenarios += [random_instance(seed * 1000 + i, contention=True) for i in range(random_count)]
    return scenarios


def _orphan_prefill() -> Instance:
    """Three big units where two fit: a lone prefill of the third blocks two small units."""
    big = group(
        "big",
        [role("prefill", 1, gpus=8), role("decode", 1, pods=2, gpus=8, required="rack")],
        units=3,
        required="block",
        affinity=[("prefill", "decode", "rack", "Preferred")],
    )
    small = group(
        "small",
        [role("prefill", 1, gpus=4), role("decode", 1, gpus=4)],
        units=2,
        required="rack",
        affinity=[("prefill", "decode", "host", "Preferred")],
    )
    return Instance.of("contention-orphan-prefill", cluster((("block", 2), ("rack", 2), ("host", 2))) + [big, small])


def _fragmented_blocks() -> Instance:
    """Partly used blocks where per-role best fits scatter a unit's roles over blocks."""
    busy = {0: 8, 1: 8, 2: 8, 8: 4, 9: 4}
    manifests = cluster((("block", 2), ("rack", 2), ("host", 4)), busy=busy)
    a = group(
        "a",
        [role("prefill", 2, minimum=1, gpus=8), role("decode", 2, minimum=2, pods=2, gpus=4, required="rack")],
        units=3,
        required="block",
        preferred="rack",
        affinity=[("prefill", "decode", "rack", "Required")],
    )
    b = group(
        "b",
        [role("prefill", 3, minimum=2, gpus=4), role("decode", 2, minimum=1, gpus=8)],
        units=2,
        required="rack",
        affinity=[("prefill", "decode", "host", "Preferred")],
    )
    return Instance.of("contention-fragmented-blocks", manifests + [a, b])


def _small_after_big() -> Instance:
    """A big multi-node decode gang that does not fit, ahead of many small units."""
    manifests = cluster((("block", 2), ("rack", 2), ("host", 4)), busy={3: 8, 7: 8, 11: 8}, cordoned=[15])
    big = group(
        "big",
        [role("prefill", 4, minimum=4, gpus=8), role("decode", 2, minimum=2, pods=2, gpus=8, required="rack")],
        units=2,
        required="block",
        affinity=[("prefill", "decode", "rack", "Preferred")],
    )
    small = group(
        "small",
        [role("prefill", 2, minimum=1, gpus=2), role("decode", 2, minimum=1, gpus=4), role("router", 1, gpus=1)],
        units=3,
        required="rack",
        preferred="host",
        affinity=[("prefill", "decode", "host", "Required"), ("router", "prefill", "rack", "Preferred")],
    )
    return Instance.of("contention-small-after-big", manifests + [big, small])


def _priority_mix() -> Instance:
    """High-priority units with Required host affinity, low-priority ones competing for racks."""
    manifests = cluster((("block", 2), ("rack", 4), ("host", 2)), busy={1: 4, 6: 2, 12: 6})
    high = group(
        "high",
        [role("prefill", 2, minimum=2, gpus=2), role("decode", 2, minimum=1, gpus=4)],
        units=3,
        priority=1,
        required="rack",
        affinity=[("prefill", "decode", "host", "Required")],
    )
    low = group(
        "low",
        [role("prefill", 2, minimum=1, pods=2, gpus=4, required="rack"), role("decode", 3, minimum=2, gpus=8)],
        units=3,
        required="block",
        affinity=[("prefill", "decode", "rack", "Preferred")],
    )
    return Instance.of("contention-priority-mix", manifests + [high, low])


# ----------------------------------------------------------------------------- scoring


@dataclass(frozen=True)
class Score:
    """What a plan achieves on an instance, checked independently of who made it."""

    units: int
    functional: int  # units the plan reports Placed or MinimumPlaced
    valid: int  # functional units that also keep every hard constraint
    split: int  # functional units whose pods span more than one domain of the unit's required pack
    required_violations: int  # from-replicas of functional units missing a Required affinity
    affinity_satisfied: int  # from-replicas (functional units, every rule) sharing the rule's domain with a to-pod
    affinity_total: int
    idle_gpus: int  # GPUs held by pods of units that are not functional
    replicas: int  # complete replicas placed in functional units
    errors: tuple[str, ...]  # broken promises that no policy may break (capacity, eligibility, incomplete replicas)

    @property
    def affinity_fraction(self) -> float | None:
        return self.affinity_satisfied / self.affinity_total if self.affinity_total else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "functional": self.functional,
            "valid": self.valid,
            "split": self.split,
            "requiredAffinityViolations": self.required_violations,
            "affinity": None if self.affinity_fraction is None else round(self.affinity_fraction, 4),
            "affinitySatisfied": self.affinity_satisfied,
            "affinityTotal": self.affinity_total,
            "idleGpus": self.idle_gpus,
            "replicas": self.replicas,
            "errors": list(self.errors),
        }


def score(instance: Instance, plan: Plan) -> Score:
    """Check `plan` against the instance (`tandem.placement.verify`) and measure it (see `Score`)."""
    snapshot = instance.snapshot
    violations = check_plan(plan, snapshot, instance.views, instance.units)
    errors = [v.message for v in violations if v.kind in _ERROR_KINDS]
    broken = {v.unit for v in violations if v.kind in _CONSTRAINT_KINDS}
    gpu = snapshot.resource_index.get(GPU)
    functional = valid = split = required_violations = satisfied = total = idle = replicas = 0
    for placement in plan.units:
        unit = placement.unit
        if placement.state == "Unschedulable":
            if gpu is not None:
                idle += sum(int(snapshot.vector(_shape(unit, role, i).requests)[gpu]) for role, pod, i in _pods(placement))
            continue
        functional += 1
        valid += unit.key not in broken
        split += any(v.kind == "unit-pack" and v.unit == unit.key for v in violations)
        required_violations += sum(1 for v in violations if v.kind == "affinity" and v.unit == unit.key)
        replicas += sum(len(reps) for _, reps in placement.roles)
        view = instance.views[unit.topology]
        for rule in unit.affinity:
            depth = view.depth(rule.level)
            doms = view.dom[depth]
            near = {int(doms[snapshot.node_index[p.node]]) for rep in placement.replicas(rule.to_role) for p in rep.pods}
            for rep in placement.replicas(rule.from_role):
                total += 1
                satisfied += any(int(doms[snapshot.node_index[p.node]]) in near for p in rep.pods)
    return Score(
        units=len(plan.units),
        functional=functional,
        valid=valid,
        split=split,
        required_violations=required_violations,
        affinity_satisfied=satisfied,
        affinity_total=total,
        idle_gpus=idle,
        replicas=replicas,
        errors=tuple(errors),
    )


# Broken promises no policy may break, and hard constraints a baseline may break (invalid unit).
_ERROR_KINDS = frozenset({"coverage", "naming", "capacity", "eligibility", "replica-gang", "unit-gang", "state"})
_CONSTRAINT_KINDS = frozenset({"unit-pack", "replica-pack", "affinity"})


def _pods(placement):
    """(role, pod, pod index within its replica) for every placed pod."""
    for name, replicas in placement.roles:
        for replica in replicas:
            for index, pod in enumerate(replica.pods):
                yield name, pod, index


def _shape(unit: UnitDemand, role: str, index: int):
    demand = next(r for r in unit.roles if r.name == role)
    return demand.leader if index == 0 else demand.worker
