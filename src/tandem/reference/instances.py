"""Small seeded placement problems, and the scoring every policy is measured with.

Instances are built as manifests (the same Node, Pod, ClusterTopology and InferenceGroup
documents a user hands `tandem plan`) and loaded through `tandem.api.loading`, so every
instance is a valid input and can be dumped to a file to reproduce a result with the
CLI. They stay small (at most 32 nodes, a dozen units) so that the exact solver proves
optimality in seconds.

`score` evaluates any `Plan` against the promises of DESIGN.md §1 independently of who
made it: functional units, hard-constraint violations (capacity, replica gang, packs,
Required affinity), affinity satisfied, GPUs held by units that are not functional,
complete replicas placed and units `Placed`.

`fits_whole_instance` builds problems where every unit fits whole by construction (the
packing it built is kept, `whole_plan` turns it into a plan), for the goal "every unit
`Placed` where everything fits whole".
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import yaml

from tandem.api.loading import load_texts
from tandem.api.naming import GPU_RESOURCE
from tandem.placement import Plan, PodAssignment, PodShape, ReplicaAssignment, UnitDemand, UnitPlacement, units_from_groups
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
    placed: int = 0  # valid units the plan reports Placed (every desired replica; the verifier checks the state)
    desired: int = 0  # replicas every unit wants (the sum of desired counts)

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
            "placed": self.placed,
            "desiredReplicas": self.desired,
            "errors": list(self.errors),
        }


def score(instance: Instance, plan: Plan) -> Score:
    """Check `plan` against the instance (`tandem.placement.verify`) and measure it (see `Score`)."""
    snapshot = instance.snapshot
    violations = check_plan(plan, snapshot, instance.views, instance.units)
    errors = [v.message for v in violations if v.kind in _ERROR_KINDS]
    broken = {v.unit for v in violations if v.kind in _CONSTRAINT_KINDS}
    gpu = snapshot.resource_index.get(GPU)
    functional = valid = split = required_violations = satisfied = total = idle = replicas = placed = 0
    for placement in plan.units:
        unit = placement.unit
        if placement.state == "Unschedulable":
            if gpu is not None:
                idle += sum(int(snapshot.vector(_shape(unit, role, i).requests)[gpu]) for role, pod, i in _pods(placement))
            continue
        functional += 1
        placed += placement.state == "Placed" and unit.key not in broken
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
        placed=placed,
        desired=sum(role.desired for placement in plan.units for role in placement.unit.roles),
    )


# Broken promises no policy may break, and hard constraints a baseline may break (invalid unit).
_ERROR_KINDS = frozenset({"coverage", "naming", "capacity", "eligibility", "replica-gang", "unit-gang", "state"})
_CONSTRAINT_KINDS = frozenset({"unit-pack", "replica-pack", "affinity"})


def _pods(placement: UnitPlacement) -> Iterator[tuple[str, PodAssignment, int]]:
    """(role, pod, pod index within its replica) for every placed pod."""
    for name, replicas in placement.roles:
        for replica in replicas:
            for index, pod in enumerate(replica.pods):
                yield name, pod, index


def _shape(unit: UnitDemand, role: str, index: int) -> PodShape:
    demand = next(r for r in unit.roles if r.name == role)
    return demand.leader if index == 0 else demand.worker


# ----------------------------------------------------------------------------- everything fits whole


# A role's shape in a fits-whole group: (pods per replica, GPUs a pod, required pack, preferred pack).
_WholeShape = tuple[int, int, str | None, str | None]
# A role's replicas packed in a region: node numbers per replica.
_Packing = dict[str, list[tuple[int, ...]]]
# A fits-whole group's manifest, given its name.
_MakeGroup = Callable[[str], dict[str, Any]]

FITS_WHOLE_LEVELS = (("block", "rack", "host"), ("block", "subblock", "host"))
FITS_WHOLE_MAX_UNITS = 10


@dataclass(frozen=True)
class _Region:
    """Nodes carved out for one unit: a block, a middle domain (rack/subblock), or a run of either."""

    depth: int  # the narrowest level with one domain holding every node: 1 a block, 2 a middle domain
    nodes: tuple[int, ...]  # node numbers, in order
    signature: tuple  # (middle domain from the first, free GPUs) per node: equal ones are interchangeable


def fits_whole_instance(seed: int) -> Instance:
    """A seeded small problem where, by construction, every unit fits whole with its packs.

    The cluster (4-32 nodes, three levels: block/rack/host or block/subblock/host, 2-8
    GPUs a node, a few nodes partly used by other pods) is carved into disjoint regions:
    a block, a run of a block's middle-level domains (rack/subblock), a middle domain or a
    run of its hosts; some are left idle. A group is built on one region
    by packing replicas into it first-fit, role after role round robin (2-3 roles, 1-2 pods
    a replica, a replica pack when it has two pods), up to a random fill of 55-100% of
    the region's free GPUs; each role's desired count is what fitted, its minimum a random
    part of it. A group gets up to three units when as many interchangeable regions (same
    free GPUs node by node) are left, one unit per region. A Required affinity is only
    declared when the packing meets it (otherwise the rule is Preferred), so the packing
    keeps every hard constraint: every unit can be `Placed`. The unit's required level is
    its region's, or sometimes broader (the region is inside one such domain). Groups are
    then shuffled and named in that order, so placement order says nothing about regions.

    The packing is kept in `notes["packing"]` ({group: [unit's {role: [replica's nodes]}]});
    `whole_plan(instance)` turns it into a `Plan` (a certificate checked by `score`).
    """
    rng = random.Random(seed)
    levels = rng.choice(FITS_WHOLE_LEVELS)
    while True:
        counts = (rng.randint(1, 4), rng.randint(1, 4), rng.randint(1, 4))
        if 4 <= counts[0] * counts[1] * counts[2] <= 32:
            break
    shape = tuple(zip(levels, counts))
    blocks, mids, hosts = counts
    count = blocks * mids * hosts
    gpus = []
    for m in range(blocks * mids):
        kind = rng.choice((4, 8, 8, 8))
        gpus += [rng.choice((2, 4, 8)) if rng.random() < 0.15 else kind for _ in range(hosts)]
    busy = {n: rng.choice([g for g in (1, 2, 4) if g < gpus[n]]) for n in range(count) if rng.random() < 0.1 and gpus[n] > 1}
    free = [gpus[n] - busy.get(n, 0) for n in range(count)]
    topology, nodes = generate_cluster(list(shape), gpus=8)
    for node, g in zip(nodes, gpus):
        allocatable = {"cpu": str(16 * g), "memory": f"{256 * g}Gi", "pods": "110", GPU: str(g)}
        node["status"]["allocatable"] = allocatable
        node["status"]["capacity"] = dict(allocatable)
    names = [node["metadata"]["name"] for node in nodes]
    pods = [busy_pod(f"busy-{n}", names[n], g) for n, g in sorted(busy.items())]

    def region(depth: int, members: Sequence[int]) -> _Region:
        first = members[0] // hosts
        return _Region(depth, tuple(members), tuple((n // hosts - first, free[n]) for n in members))

    def chunks(items: Sequence[int], parts: int) -> list[list[int]]:
        cuts = sorted(rng.sample(range(1, len(items)), parts - 1))
        return [list(items[a:b]) for a, b in zip([0, *cuts], [*cuts, len(items)])]

    # Carve: a block whole, or its middle domains in 2-3 runs (units required at the
    # block), or each middle domain whole, split in two runs of hosts, or idle. Again
    # when no unit came out of it.
    groups: list[tuple[Callable[[str], dict[str, Any]], list[dict[str, list[tuple[int, ...]]]]]] = []
    while not groups:
        regions: list[_Region] = []
        for b in range(blocks):
            block_nodes = list(range(b * mids * hosts, (b + 1) * mids * hosts))
            draw = rng.random()
            if draw < 0.25:
                regions.append(region(1, block_nodes))
            elif draw < 0.5 and mids > 1:
                for run in chunks(range(mids), rng.randint(2, min(3, mids))):
                    regions.append(region(1, [n for n in block_nodes if (n // hosts) % mids in run]))
            else:
                for m in range(mids):
                    mid_nodes = block_nodes[m * hosts : (m + 1) * hosts]
                    draw = rng.random()
                    if draw < 0.15:
                        continue  # left idle
                    if draw < 0.35 and hosts > 1:
                        regions += [region(2, run) for run in chunks(mid_nodes, 2)]
                    else:
                        regions.append(region(2, mid_nodes))
        rng.shuffle(regions)

        units = 0
        while regions and units < FITS_WHOLE_MAX_UNITS:
            home = regions.pop()
            if rng.random() < 0.1:
                continue  # left idle
            twins = [r for r in regions if r.depth == home.depth and r.signature == home.signature]
            k, room = 1, FITS_WHOLE_MAX_UNITS - units
            if twins and room > 1 and rng.random() < 0.4:
                k = 1 + rng.randint(1, min(2, len(twins), room - 1))
            chosen = [home] + twins[: k - 1]
            for r in chosen[1:]:
                regions.remove(r)
            built = _whole_group(rng, levels, hosts, home, free)
            if built is None:
                continue
            make, packing = built
            # Interchangeable regions: the i-th node of one plays the i-th node of the other.
            position = {n: i for i, n in enumerate(home.nodes)}
            packings = [{role: [tuple(r.nodes[position[n]] for n in rep) for rep in reps] for role, reps in packing.items()} for r in chosen]
            groups.append((make(len(chosen), [r.depth for r in chosen]), packings))
            units += len(chosen)
    rng.shuffle(groups)
    manifests_groups: list[dict[str, Any]] = []
    packing_notes: dict[str, list[dict[str, list[list[str]]]]] = {}
    for i, (make_group, packings) in enumerate(groups):
        name = f"w{i}"
        manifests_groups.append(make_group(name))
        packing_notes[name] = [{role: [[names[n] for n in rep] for rep in reps] for role, reps in p.items()} for p in packings]
    free_gpus = sum(free)
    whole_gpus = sum(
        sum(_role_gpus(r) * r["replicas"] for r in m["spec"]["roles"]) * m["spec"]["replicas"] for m in manifests_groups
    )
    minimum_gpus = sum(
        sum(_role_gpus(r) * r.get("minReplicas", r["replicas"]) for r in m["spec"]["roles"]) * m["spec"]["replicas"]
        for m in manifests_groups
    )
    return Instance.of(
        f"fits-whole-{seed}",
        [topology, *nodes, *pods, *manifests_groups],
        seed=seed,
        shape=",".join(f"{n}={c}" for n, c in shape),
        free_gpus=free_gpus,
        minimum_gpus=minimum_gpus,
        whole_gpus=whole_gpus,
        packing=packing_notes,
    )


def _role_gpus(manifest: Mapping[str, Any]) -> int:
    """GPUs of one replica of a role manifest (every pod has the same requests here)."""
    requests = manifest["template"]["spec"]["containers"][0]["resources"]["requests"]
    return int(requests.get(GPU, 0)) * int(manifest.get("podsPerReplica", 1))


def _whole_group(
    rng: random.Random, levels: Sequence[str], hosts: int, home: _Region, free: Sequence[int]
) -> tuple[Callable[[int, Sequence[int]], _MakeGroup], _Packing] | None:
    """(make, packing) for a group built on `home`, or None when nothing fits after a few draws.

    `make(units, depths)(name)` is the group's manifest; `packing` is {role: [replica's
    node numbers]}. Node `n` is in middle domain `n // hosts`, so replica packs are
    checked on node numbers.
    """
    block, middle, host = levels
    most = max(free[n] for n in home.nodes)
    total = sum(free[n] for n in home.nodes)
    if most < 1:
        return None
    names = ["prefill", "decode"] + (["router"] if rng.random() < 0.25 else [])
    for _ in range(8):
        shapes = _whole_shapes(rng, names, levels, most, max(1, total // len(names)))
        packing = _whole_packing(rng, names, shapes, home, free, hosts, levels)
        if packing is not None:
            break
    else:
        return None

    affinity = []
    if rng.random() < 0.7:
        level = rng.choice((middle, host))
        met = _meets(packing, "prefill", "decode", level, levels, hosts)
        affinity.append(("prefill", "decode", level, "Required" if met and rng.random() < 0.6 else "Preferred"))
    if "router" in names and rng.random() < 0.5:
        affinity.append(("router", "prefill", middle, "Preferred"))
    roles = []
    for name in names:
        pods, gpus, required, preferred = shapes[name]
        desired = len(packing[name])
        minimum = rng.choice((1, 1, max(1, desired // 2), desired))
        roles.append(role(name, desired, minimum=minimum, pods=pods, gpus=gpus, required=required, preferred=preferred))
    draw, preferred_draw = rng.random(), rng.random()
    priority = rng.choice((0, 0, 0, 0, 1))

    def make(units: int, depths: Sequence[int]) -> _MakeGroup:
        if min(depths) == 1:
            unit_required = None if draw < 0.2 else block
        else:
            unit_required = None if draw < 0.05 else block if draw < 0.35 else middle
        narrower = [lv for lv in (middle, host) if unit_required is None or levels.index(lv) > levels.index(unit_required)]
        options = [*narrower, None, None]
        unit_preferred = options[int(preferred_draw * len(options))]
        # Role packs are the middle level or the host: never broader than the unit's.
        return lambda name: group(
            name, roles, units=units, priority=priority, required=unit_required, preferred=unit_preferred, affinity=affinity
        )

    return make, packing


def _whole_shapes(rng: random.Random, names: Sequence[str], levels: Sequence[str], most: int, share: int) -> dict[str, _WholeShape]:
    """{role: (pods per replica, GPUs a pod, required pack, preferred pack)}: a pod fits a
    node (`most` GPUs), a replica a role's share of the region."""
    _, middle, host = levels
    shapes: dict[str, _WholeShape] = {}
    for name in names:
        if name == "router":
            pods, gpus = 1, rng.choice((1, 2))
        else:
            pods = rng.choice((1, 1, 2))
            gpus = rng.choice((1, 2, 4, 8))
        bound = min(most, share // pods)
        gpus = max([g for g in (1, 2, 4, 8) if g <= min(gpus, bound)] or [1])
        pack_required = pack_preferred = None
        if pods > 1:
            pack_required = rng.choice([None, middle] + ([host] if pods * gpus <= most else []))
            if pack_required != host and pods * gpus <= most and rng.random() < 0.5:
                pack_preferred = host
        shapes[name] = (pods, gpus, pack_required, pack_preferred)
    return shapes


def _whole_packing(
    rng: random.Random,
    names: Sequence[str],
    shapes: Mapping[str, _WholeShape],
    home: _Region,
    free: Sequence[int],
    hosts: int,
    levels: Sequence[str],
) -> dict[str, list[tuple[int, ...]]] | None:
    """Replicas packed first-fit into `home`, role after role round robin, until a random
    fill (55-100% of its free GPUs) is reached or nothing more fits; None unless every
    role got a replica."""
    _, middle, host = levels
    left = {n: free[n] for n in home.nodes}
    total = sum(left.values())

    def domain_of(node: int, level: str | None) -> int:
        if level == host:
            return node
        if level == middle:
            return node // hosts
        return -1  # the unit's level: the whole region is inside one of its domains

    def place(name: str) -> tuple[int, ...] | None:
        pods, gpus, required, _ = shapes[name]
        by_domain: dict[int, list[int]] = {}
        for n in home.nodes:
            by_domain.setdefault(domain_of(n, required), []).append(n)
        for members in by_domain.values():
            trial = dict(left)
            chosen = []
            for _ in range(pods):
                spot = next((n for n in members if trial[n] >= gpus), None)
                if spot is None:
                    break
                trial[spot] -= gpus
                chosen.append(spot)
            if len(chosen) == pods:
                left.update(trial)
                return tuple(chosen)
        return None

    target = rng.uniform(0.55, 1.0) * total
    steps = {name: rng.choice((1, 1, 2)) for name in names}
    cap = {name: 2 if name == "router" else 6 for name in names}
    order = list(names)
    rng.shuffle(order)
    packing: dict[str, list[tuple[int, ...]]] = {name: [] for name in names}
    while total - sum(left.values()) < target:
        progress = False
        for name in order:
            for _ in range(steps[name]):
                if len(packing[name]) >= cap[name]:
                    break
                replica = place(name)
                if replica is None:
                    break
                packing[name].append(replica)
                progress = True
        if not progress:
            break
    return packing if all(packing.values()) else None


def _meets(packing: Mapping[str, Sequence[tuple[int, ...]]], source: str, target: str, level: str, levels: Sequence[str], hosts: int) -> bool:
    """Does every `source` replica of the packing share a `level` domain with a `target` pod?"""

    def at(node: int) -> int:
        return node if level == levels[2] else node // hosts

    near = {at(n) for rep in packing[target] for n in rep}
    return all(any(at(n) in near for n in rep) for rep in packing[source])


def whole_plan(instance: Instance) -> Plan:
    """The packing `fits_whole_instance` built, as a plan: every unit `Placed`."""
    packing = instance.notes["packing"]
    if not instance.units:
        return Plan(())
    view = instance.views[instance.units[0].topology]
    out = []
    for unit in instance.units:
        mine = packing[unit.group][unit.unit]
        roles = tuple(
            (
                r.name,
                tuple(
                    ReplicaAssignment(i, tuple(PodAssignment(unit.pod_name(r.name, i, p), node) for p, node in enumerate(nodes)))
                    for i, nodes in enumerate(mine[r.name])
                ),
            )
            for r in unit.roles
        )
        where = view.narrowest(np.array([instance.snapshot.node_index[n] for _, reps in mine.items() for rep in reps for n in rep]))
        out.append(UnitPlacement(unit, "Placed", "", roles, None if where is None else view.label(*where)))
    return Plan(tuple(out))
