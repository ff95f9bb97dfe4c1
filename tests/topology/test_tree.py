"""The domain tree, capacity roll-ups, distances and unusable nodes."""

from __future__ import annotations

import numpy as np

from support.builders import bound_pod, cluster, load
from tandem.topology import ClusterSnapshot, TopologyView


def _view(objects):
    inputs = load(objects)
    snapshot, warnings = ClusterSnapshot.build(inputs.nodes, inputs.pods)
    return TopologyView.build(inputs.topologies["default"], snapshot), warnings


def test_domains_nest_and_roll_up_free_capacity():
    objects = cluster("block=2,rack=2,host=4") + [bound_pod("busy", "n-000", 3)]
    view, _ = _view(objects)
    assert view.level_names == ("cluster", "block", "rack", "host")
    assert [view.domain_count(d) for d in range(4)] == [1, 2, 4, 16]
    gpu = view.snapshot.resource_index["nvidia.com/gpu"]
    free = view.free_by_domain(view.snapshot.free, 2)[:, gpu]
    assert free.tolist() == [29, 32, 32, 32]
    assert view.free_by_domain(view.snapshot.free, 0)[0, gpu] == 16 * 8 - 3
    # every rack's ancestor block is the block of its nodes
    for rack in range(4):
        nodes = view.members(2, rack)
        assert {view.node_domain(int(n), 1) for n in nodes} == {int(view.ancestor[2][1][rack])}


def test_lowest_common_level_and_bandwidth():
    view, _ = _view(cluster("block=2,rack=2,host=4"))
    assert view.lowest_common_level("n-000", "n-000") == "host"
    assert view.lowest_common_level("n-000", "n-001") == "rack"
    assert view.bandwidth_gbps("n-000", "n-001") == 400.0
    assert view.lowest_common_level("n-000", "n-004") == "block"
    assert view.bandwidth_gbps("n-000", "n-004") == 200.0
    assert view.lowest_common_level("n-000", "n-015") == "cluster"
    assert view.bandwidth_gbps("n-000", "n-015") is None


def test_unusable_nodes_are_listed_with_their_reason():
    objects = cluster("block=1,rack=1,host=5")
    nodes = [o for o in objects if o["kind"] == "Node"]
    del nodes[0]["metadata"]["labels"]["network.tandem.dev/rack"]
    nodes[1]["spec"]["unschedulable"] = True
    nodes[2]["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    nodes[3]["spec"]["taints"] = [{"key": "gpu", "value": "broken", "effect": "NoSchedule"}]
    view, _ = _view(objects)
    assert dict(view.exclusions) == {
        "n-000": "missing label network.tandem.dev/rack (level rack)",
        "n-001": "cordoned (spec.unschedulable)",
        "n-002": "not Ready",
    }
    # a taint makes a node unusable only for pods that do not tolerate it
    assert view.usable.tolist() == [False, False, False, True, True]
    assert view.snapshot.eligible({}, ()).tolist() == [True, False, False, False, True]


def test_pods_on_unknown_nodes_are_reported_and_finished_pods_free_capacity():
    objects = cluster("block=1,rack=1,host=2") + [
        bound_pod("ghost", "n-999", 1),
        bound_pod("done", "n-000", 8, phase="Succeeded"),
        bound_pod("failed", "n-000", 8, phase="Failed"),
    ]
    view, warnings = _view(objects)
    assert len(warnings) == 1 and "n-999" in warnings[0]
    assert np.all(view.snapshot.used[:, view.snapshot.resource_index["nvidia.com/gpu"]] == 0)


def test_same_label_value_under_two_parents_is_two_domains():
    objects = cluster("block=2,rack=1,host=2")
    for node in objects[1:]:
        node["metadata"]["labels"]["network.tandem.dev/rack"] = "r1"
    view, _ = _view(objects)
    assert view.domain_count(2) == 2
    assert view.names[2] == ("block-0/r1", "block-1/r1")
