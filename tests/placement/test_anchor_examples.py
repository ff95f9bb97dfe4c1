"""Cases taken from the anchor projects' documented examples."""

from __future__ import annotations

from support.builders import group, role, world
from tandem.placement import place
from tandem.placement.verify import verify_plan

TOPOLOGY = {
    "apiVersion": "tandem.dev/v1alpha1",
    "kind": "ClusterTopology",
    "metadata": {"name": "default"},
    "spec": {
        "levels": [
            {"name": "block", "nodeLabel": "cloud.provider.com/topology-block"},
            {"name": "rack", "nodeLabel": "cloud.provider.com/topology-rack"},
            {"name": "host", "nodeLabel": "kubernetes.io/hostname"},
        ]
    },
}


def _node(name: str, labels: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64"}},
    }


def kueue_documented_nodes() -> list[dict]:
    """Kueue TAS concepts page: node-1 block-1/rack-1, node-2 block-1/rack-2,
    node-3 block-2/rack-1, node-4 block-2/rack-3 — rack-1 exists in two blocks."""
    rows = [("node-1", "block-1", "rack-1"), ("node-2", "block-1", "rack-2"), ("node-3", "block-2", "rack-1"), ("node-4", "block-2", "rack-3")]
    return [_node(n, {"cloud.provider.com/topology-block": b, "cloud.provider.com/topology-rack": r}) for n, b, r in rows]


def _place(objects):
    snapshot, views, units = world(objects)
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []
    return plan


def test_kueue_hierarchy_same_rack_label_in_two_blocks_is_two_racks():
    # Two 8-GPU pods that must share a rack: the two nodes labelled rack-1 are in
    # different blocks, so no rack holds both.
    g = group("pair", [role("worker", 1, 1, gpus=8, pods=2, required="rack")], required="block")
    plan = _place([TOPOLOGY, *kueue_documented_nodes(), g])
    assert plan.units[0].state == "Unschedulable"
    assert plan.units[0].message.startswith("no block has room for 1 worker replica (2 pods × 8 nvidia.com/gpu within one rack)")
    assert plan.units[0].code == "UnschedulableAndUnresolvable"


def test_kueue_hierarchy_block_pack_uses_both_racks_of_a_block():
    g = group("pair", [role("worker", 1, 1, gpus=8, pods=2, required="block")], required="block")
    plan = _place([TOPOLOGY, *kueue_documented_nodes(), g])
    nodes = sorted(p.node for _, p in plan.units[0].pods())
    assert nodes in (["node-1", "node-2"], ["node-3", "node-4"])


def test_kai_required_placement_never_uses_nodes_lacking_the_label():
    # KAI's topology docs: with a required placement the scheduler does not place the
    # workload on nodes lacking the label. tandem goes further: such a node is excluded
    # with a reason for every group using the topology.
    nodes = kueue_documented_nodes()
    unlabelled = _node("node-5", {"cloud.provider.com/topology-block": "block-1"})
    g = group("solo", [role("worker", 5, 1, gpus=8)], required="block")
    snapshot, views, units = world([TOPOLOGY, *nodes, unlabelled, g])
    plan = place(snapshot, views, units)
    assert "node-5" not in {p.node for _, p in plan.units[0].pods()}
    assert dict(views["default"].exclusions)["node-5"] == "missing label cloud.provider.com/topology-rack (level rack)"
