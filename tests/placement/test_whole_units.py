"""Whole units: the domain is chosen for every role at its desired count (issue 10).

Cluster dumps shaped as GKE and kwok print them (blocks of subblocks of hosts, node
names that say nothing about where a node is) with `pack: {required: block, preferred:
subblock}` used to end every unit `MinimumPlaced` in one block and leave another idle.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from support.builders import container, group, role, world
from tandem.placement import place
from tandem.placement.verify import verify_plan

BLOCK, SUBBLOCK = "cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock"
HOSTNAME = "kubernetes.io/hostname"


def gke_cluster(blocks: int, subblocks: int, hosts: int, gpus: int = 8, seed: int = 0, sizes: list[int] | None = None) -> list[dict[str, Any]]:
    """Nodes named as GKE names them (a pool and a hash), in shuffled order, and their topology.

    `sizes` gives the GPUs of each block's nodes (default: `gpus` everywhere).
    """
    nodes = []
    for b in range(blocks):
        for s in range(subblocks):
            for h in range(hosts):
                name = "gke-a3-pool-" + hashlib.sha1(f"{seed}-{b}-{s}-{h}".encode()).hexdigest()[:8]
                count = sizes[b] if sizes else gpus
                nodes.append(
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": name, "labels": {BLOCK: f"b{b:03x}", SUBBLOCK: f"sb{s}", HOSTNAME: name}},
                        "status": {
                            "allocatable": {"cpu": "200", "memory": "1800Gi", "nvidia.com/gpu": str(count), "pods": "110"},
                            "conditions": [{"type": "Ready", "status": "True"}],
                        },
                    }
                )
    random.Random(seed).shuffle(nodes)
    topology = {
        "apiVersion": "tandem.dev/v1alpha1",
        "kind": "ClusterTopology",
        "metadata": {"name": "default"},
        "spec": {
            "levels": [
                {"name": "block", "nodeLabel": BLOCK},
                {"name": "subblock", "nodeLabel": SUBBLOCK},
                {"name": "host", "nodeLabel": HOSTNAME},
            ]
        },
    }
    return [topology, *nodes]


def _blocks_used(plan, views) -> list[set[str]]:
    view = views["default"]
    index = view.snapshot.node_index
    return [{view.domain_name(1, view.node_domain(index[pod.node], 1)) for _, pod in u.pods()} for u in plan.units]


def test_issue_example_one_unit_per_subblock_and_no_block_idle():
    # 2 blocks x 2 subblocks x 8 hosts of 8 GPUs; 4 units of 4 prefill x 8 GPUs + 2 decode x 2 pods x 8 GPUs.
    g = group(
        "llama",
        [role("prefill", 4, 2, gpus=8), role("decode", 2, 1, gpus=8, pods=2)],
        replicas=4,
        required="block",
        preferred="subblock",
    )
    snapshot, views, units = world(gke_cluster(2, 2, 8) + [g])
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []
    assert [u.state for u in plan.units] == ["Placed"] * 4
    # Each unit fills one subblock (64 GPUs), so each unit's domain is its subblock.
    assert sorted(u.domain for u in plan.units) == ["subblock/b000/sb0", "subblock/b000/sb1", "subblock/b001/sb0", "subblock/b001/sb1"]


def test_issue_example_two_units_per_block_none_idle():
    # 3 blocks x 3 subblocks x 4 hosts; 6 units of 6 x 4-GPU prefill + 3 x 8-GPU decode (48 GPUs):
    # no subblock (32 GPUs) holds a unit, a block (96) holds exactly two.
    g = group("mix", [role("prefill", 6, gpus=4), role("decode", 3, gpus=8)], replicas=6, required="block", preferred="subblock")
    snapshot, views, units = world(gke_cluster(3, 3, 4, seed=1) + [g])
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []
    assert [u.state for u in plan.units] == ["Placed"] * 6
    blocks = _blocks_used(plan, views)
    assert all(len(b) == 1 for b in blocks)
    assert sorted(b for used in blocks for b in used) == ["b000", "b000", "b001", "b001", "b002", "b002"]
    # Pods of one unit span two subblocks of its block: its domain is the block, not a subblock.
    assert all(u.domain and u.domain.startswith("block/") for u in plan.units)


def test_domain_is_the_narrowest_domain_holding_every_pod():
    # One unit of 3 hosts on subblocks of 2 hosts: the pods span two subblocks.
    g = group("three", [role("prefill", 3, gpus=8)], required="block", preferred="subblock")
    snapshot, views, units = world(gke_cluster(1, 2, 2) + [g])
    (unit,) = place(snapshot, views, units).units
    assert unit.state == "Placed" and unit.domain == "block/b000"
    # A single-pod unit is on one host: its domain is that host.
    g = group("one", [role("prefill", 1, gpus=8)], required="block", preferred="subblock")
    snapshot, views, units = world(gke_cluster(1, 2, 2) + [g])
    (unit,) = place(snapshot, views, units).units
    assert unit.domain == f"host/{unit.pods()[0][1].node}"


def test_a_unit_that_fits_whole_in_a_smaller_block_leaves_the_larger_one_whole():
    # Block 0 has 8-GPU hosts (64 GPUs), block 1 4-GPU hosts (32 GPUs). The small unit goes
    # first and fits whole in either; the tightest whole fit keeps block 0 for the big one.
    small = group("small", [role("p", 4, gpus=4), role("d", 2, gpus=4)], required="block", priority=1)
    big = group("big", [role("p", 4, gpus=8), role("d", 2, gpus=8, pods=2)], required="block")
    snapshot, views, units = world(gke_cluster(2, 1, 8, sizes=[8, 4], seed=3) + [small, big])
    plan = place(snapshot, views, units)
    assert [u.state for u in plan.units] == ["Placed", "Placed"]


def test_required_affinity_impossible_on_any_host_is_unresolvable():
    # Hosts of 8 GPUs; prefill and decode of 6 GPUs each must share a host: never possible.
    g = group(
        "far",
        [role("prefill", 1, gpus=6), role("decode", 1, gpus=6)],
        required="block",
        affinity=[{"from": "prefill", "to": "decode", "level": "host", "mode": "Required"}],
    )
    snapshot, views, units = world(gke_cluster(1, 1, 4) + [g])
    (unit,) = place(snapshot, views, units).units
    assert unit.state == "Unschedulable" and unit.code == "UnschedulableAndUnresolvable"
    # The identical demand as a pack at host was always reported so.
    g = group("packed", [role("prefill", 1, gpus=6), role("decode", 1, gpus=6)], required="host")
    snapshot, views, units = world(gke_cluster(1, 1, 4) + [g])
    (unit,) = place(snapshot, views, units).units
    assert unit.code == "UnschedulableAndUnresolvable"


# ----------------------------------------------------------------------------- properties


@st.composite
def fitting_worlds(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Clusters and groups where every unit fits whole by construction.

    Each block gets its own host size; each unit is carved out of one block (decode on
    whole hosts, prefill in halves or quarters of the hosts left), so giving every unit
    its own block places everything. Units, groups and nodes are then shuffled.
    """
    blocks = draw(st.integers(1, 4))
    subblocks = draw(st.integers(1, 3))
    hosts = draw(st.integers(1, 4))
    sizes = [draw(st.sampled_from([4, 8])) for _ in range(blocks)]
    preferred = draw(st.sampled_from([None, "subblock"]))
    groups = []
    for b, size in enumerate(sizes):
        per_block = subblocks * hosts
        decode_pods = draw(st.integers(1, 2)) if per_block > 1 else 1
        decode = draw(st.integers(0, (per_block - 1) // decode_pods)) if per_block > 1 else 0
        left = per_block - decode * decode_pods
        part = draw(st.sampled_from([1, 2, 4]))
        prefill = draw(st.integers(1, max(1, left * part)))
        roles = [role("prefill", prefill, draw(st.integers(1, prefill)), gpus=size // part)]
        if decode:
            roles.append(role("decode", decode, draw(st.integers(1, decode)), gpus=size, pods=decode_pods))
        groups.append(group(f"g{b}", roles, required="block", preferred=preferred, priority=draw(st.integers(0, 2))))
    seed = draw(st.integers(0, 2**16))
    random.Random(seed).shuffle(groups)
    return gke_cluster(blocks, subblocks, hosts, sizes=sizes, seed=seed) + groups


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fitting_worlds())
def test_every_unit_is_placed_where_a_whole_unit_packing_exists(objects):
    snapshot, views, units = world(objects)
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []
    assert [u.state for u in plan.units] == ["Placed"] * len(units), [u.message for u in plan.units]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fitting_worlds(), st.data())
def test_alone_on_an_empty_cluster_a_unit_that_fails_is_unresolvable(objects, data):
    """Planned alone on an empty cluster, a failure is never 'may fit later'."""
    # Make the units harder than the cluster: scale one group's counts up.
    objects = [dict(o) for o in objects]
    groups = [o for o in objects if o["kind"] == "InferenceGroup"]
    g = data.draw(st.sampled_from(groups))
    factor = data.draw(st.integers(1, 4))
    for r in g["spec"]["roles"]:
        r["replicas"] *= factor
        r["minReplicas"] = r["replicas"]
    objects = [o for o in objects if o["kind"] != "InferenceGroup"] + [g]
    snapshot, views, units = world(objects)
    (unit,) = place(snapshot, views, units).units
    assert unit.state != "Unschedulable" or unit.code == "UnschedulableAndUnresolvable", unit.message


def test_codes_on_a_busy_cluster_say_it_may_fit_later():
    g = group("later", [role("prefill", 2, 2, gpus=8)], required="block")
    busy = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "other", "namespace": "x"},
        "status": {"phase": "Running"},
    }
    objects = gke_cluster(1, 1, 2)
    node = next(o for o in objects if o["kind"] == "Node")["metadata"]["name"]
    busy["spec"] = {"nodeName": node, "containers": [container(8)]}
    snapshot, views, units = world(objects + [busy, g])
    (unit,) = place(snapshot, views, units).units
    assert unit.state == "Unschedulable" and unit.code == "Unschedulable"
    assert np.all(snapshot.used.sum(axis=0) >= 0)


def test_where_no_domain_holds_the_unit_whole_it_goes_where_most_of_it_fits():
    # Block 0 holds 4 replicas of 4 GPUs, block 1 holds 8; the unit wants 10 (min 2), so
    # no block holds it whole. The tightest block would leave it at 4 of 10.
    g = group("wide", [role("p", 10, 2, gpus=4)], required="block")
    snapshot, views, units = world(gke_cluster(2, 1, 4, sizes=[4, 8], seed=5) + [g])
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []
    (unit,) = plan.units
    assert unit.state == "MinimumPlaced" and len(unit.replicas("p")) == 8
    assert _blocks_used(plan, views) == [{"b001"}]
