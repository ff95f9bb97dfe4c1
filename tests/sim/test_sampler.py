"""The simulator's figures kept up to date from what changed equal a full recount.

The reference below is the sampler as it was before it followed changes: every pod of
every group counted again at every event time. Random writes are replayed against the
memory store; after each batch both must give the same sample.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings

from support.builders import cluster
from support.writes import OPS, Writer
from tandem.api.naming import GPU_RESOURCE, GROUP_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.api.quantity import MILLI, parse_quantity
from tandem.api.resources import InferenceGroup
from tandem.cluster.index import ClusterIndex
from tandem.cluster.memory import MemoryStore
from tandem.cluster.pods import assigned_node, pod_failed, pod_gpus
from tandem.cluster.replicas import is_functional, unit_replicas
from tandem.sim.runner import VIEWED_KINDS, Sample, _sample
from tandem.sim.sampler import Sampler


def recount(store: MemoryStore, at: float) -> Sample:
    reader = store.snapshot()
    pods = [p for p in reader.list("Pod") if not pod_failed(p)]
    by_group: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for pod in pods:
        owner = pod["metadata"].get("labels", {}).get(GROUP_LABEL)
        if owner is not None:
            by_group.setdefault((pod["metadata"].get("namespace", "default"), owner), []).append(pod)
    functional, partial, held, ready, desired, partially_placed = {}, {}, {}, {}, {}, []
    for raw in reader.list("InferenceGroup"):
        try:
            group = InferenceGroup.model_validate({k: v for k, v in raw.items() if k != "status"})
        except ValueError:
            continue
        key = f"{group.metadata.namespace}/{group.metadata.name}"
        mine = by_group.get((group.metadata.namespace, group.metadata.name), [])
        functional[key] = partial[key] = 0
        held[key] = sum(pod_gpus(p) for p in mine if p["spec"].get("nodeName"))
        ready[key] = {r.name: 0 for r in group.spec.roles}
        desired[key] = {r.name: r.replicas * group.spec.replicas for r in group.spec.roles}
        members_of: dict[int, list[dict[str, Any]]] = {}
        for pod in mine:
            members_of.setdefault(int(pod["metadata"]["labels"][UNIT_LABEL]), []).append(pod)
        for unit in range(group.spec.replicas):
            members = members_of.get(unit, [])
            replicas = unit_replicas(members, group)
            for role, rs in replicas.items():
                if role in ready[key]:
                    ready[key][role] += sum(1 for r in rs if r.phase == "Ready")
            functional[key] += is_functional(replicas, group)
            placed = True
            for role in group.spec.roles:
                mine_role = [p for p in members if p["metadata"]["labels"].get(ROLE_LABEL) == role.name]
                placed &= sum(1 for p in mine_role if assigned_node(p)) // role.pods_per_replica >= role.minimum
            if not placed and any(assigned_node(p) for p in members):
                partially_placed.append(f"{key}[{unit}]")
                partial[key] += sum(pod_gpus(p) for p in members if assigned_node(p))
    used: dict[str, int] = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if node:
            used[node] = used.get(node, 0) + pod_gpus(pod)
    over = [n["metadata"]["name"] for n in reader.list("Node")
            if used.get(n["metadata"]["name"], 0) > parse_quantity(n["status"]["allocatable"].get(GPU_RESOURCE, 0)) // MILLI]
    return Sample(at, functional, partial, sum(used.values()), over, partially_placed, ready, desired, held)


@settings(max_examples=40, deadline=None)
@given(OPS)
def test_the_sample_kept_up_to_date_equals_a_full_recount(batches):
    store = MemoryStore()
    for obj in cluster("rack=2,host=2", gpus=4):
        store.create(copy.deepcopy(obj))
    view, sampler, writer = ClusterIndex(), Sampler(), Writer(store)
    for step, batch in enumerate(batches):
        for op, n in batch:
            writer.apply(op, n)
        sampler.update(view.refresh(store.snapshot(), VIEWED_KINDS))
        assert _sample(view, sampler, float(step)) == recount(store, float(step))
