"""Locality as the topology-aware schedulers document it, whatever the nodes are called.

Each case is the shape of an upstream example, rebuilt in tandem's terms and planned
under three naming schemes: names that sort with the topology, names that sort against
it, and hashed names as cloud providers give them.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable

import pytest

from support.builders import bound_pod, group, role, world
from tandem.placement import place
from tandem.placement.verify import verify_plan

RACK = "network.tandem.dev/rack"
HOSTNAME = "kubernetes.io/hostname"
TOPOLOGY = {
    "apiVersion": "tandem.dev/v1alpha1",
    "kind": "ClusterTopology",
    "metadata": {"name": "default"},
    "spec": {"levels": [{"name": "rack", "nodeLabel": RACK}, {"name": "host", "nodeLabel": HOSTNAME}]},
}
NAMINGS: dict[str, Callable[[int, int], str]] = {
    "sorted": lambda i, n: f"n-{i:03d}",
    "reversed": lambda i, n: f"n-{n - 1 - i:03d}",
    "hashed": lambda i, n: "node-" + hashlib.sha1(f"tandem-{i}".encode()).hexdigest()[:10],
}


def cluster(racks: list[list[int]], naming: str, gpus: int = 8) -> tuple[list[dict[str, Any]], list[str]]:
    """Nodes of `gpus` GPUs, `racks[r][h]` of them already in use; (objects, names in rack order)."""
    total = sum(len(r) for r in racks)
    objects: list[dict[str, Any]] = [TOPOLOGY]
    names = []
    i = 0
    for r, hosts in enumerate(racks):
        for used in hosts:
            name = NAMINGS[naming](i, total)
            names.append(name)
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": {RACK: f"rack-{chr(65 + r)}", HOSTNAME: name}},
                    "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]},
                }
            )
            if used:
                objects.append(bound_pod(f"busy-{i}", name, used))
            i += 1
    return objects, names


def placed(objects: list[dict[str, Any]]):
    snapshot, views, units = world(objects)
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []
    (unit,) = plan.units
    labels = {o["metadata"]["name"]: o["metadata"]["labels"] for o in objects if o["kind"] == "Node"}
    return unit, [labels[pod.node] for _, pod in unit.pods()]


@pytest.mark.parametrize("naming", sorted(NAMINGS))
def test_kueue_best_fit_picks_the_node_that_holds_every_pod(naming):
    """Kueue TAS (KEP-2724, BestFit): when one node can accommodate all pods of the set,
    they all go there, rather than one pod on a tighter node and one on another."""
    # host 0 has room for one 4-GPU pod, host 1 for two.
    objects, names = cluster([[4, 0]], naming)
    unit, labels = placed(objects + [group("pair", [role("worker", 2, 2, gpus=4)], required="rack")])
    assert unit.state == "Placed"
    assert {label[HOSTNAME] for label in labels} == {names[1]}


@pytest.mark.parametrize("naming", sorted(NAMINGS))
def test_kai_fills_the_rack_with_most_room_first(naming):
    """KAI topology-aware scheduling: a gang that no rack holds whole is packed into as
    few racks as possible, the rack with the most room first (rack A: two pods, then one
    more in another rack): 3 pods on 2 racks."""
    objects, _ = cluster([[0, 0, 8], [0, 8, 8], [8, 8, 0]], naming)  # room: A 2 hosts, B 1, C 1
    unit, labels = placed(objects + [group("trio", [role("worker", 3, 3, gpus=8)])])
    racks = [label[RACK] for label in labels]
    assert unit.state == "Placed" and len(set(racks)) == 2 and racks.count("rack-A") == 2


@pytest.mark.parametrize("naming", sorted(NAMINGS))
def test_volcano_keeps_two_unconstrained_pods_in_one_tier1_hypernode(naming):
    """Volcano HyperNode bin-packing: pods without a network-topology constraint still
    go to one tier-1 HyperNode (one rack) when it can hold them."""
    objects, _ = cluster([[0, 0], [0, 0], [0, 0]], naming)
    unit, labels = placed(objects + [group("two", [role("worker", 2, 2, gpus=8)])])
    assert unit.state == "Placed" and len({label[RACK] for label in labels}) == 1
