"""The topology controller's pass (status only, no backend) in every world: what it needs of
the ports (a status subresource on ClusterTopology, finalizers, events) every world serves."""

from __future__ import annotations

from tandem.cluster.ports import NotFound
from tandem.topology_controller.ownership import FINALIZER
from tandem.topology_controller.reconcile import TopologyMemo, reconcile

import pytest


def _node(name, rack):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "net.example.com/rack": rack}},
            "status": {"allocatable": {"cpu": "8"}}}


def test_status_finalizer_and_deletion_waiting_for_the_group(world):
    world.create({"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": "default"},
                  "spec": {"levels": [{"name": "rack", "nodeLabel": "net.example.com/rack"}, {"name": "host", "nodeLabel": "kubernetes.io/hostname"}]}})
    for name, rack in (("n1", "r1"), ("n2", "r1"), ("n3", "r2")):
        world.create(_node(name, rack))
    world.create({"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "metadata": {"name": "g", "namespace": "serving"},
                  "spec": {"topologyName": "default", "roles": []}})
    memo = TopologyMemo()
    report = reconcile(world, 1.0, memo=memo)
    assert report.failures == 0 and report.status_patches == 1
    raw = world.snapshot().get("ClusterTopology", None, "default")
    assert raw["metadata"]["finalizers"] == [FINALIZER]
    assert (raw["status"]["domainCounts"], raw["status"]["usedBy"]) == ("2/3", ["serving/g"])
    assert reconcile(world, 2.0, memo=memo).writes == 0
    world.delete("ClusterTopology", None, "default")
    blocked = reconcile(world, 3.0, memo=memo)
    assert blocked.failures == 0 and any("DeletionBlocked" in line and "serving/g" in line for line in blocked.events)
    assert world.snapshot().get("ClusterTopology", None, "default")["metadata"]["finalizers"] == [FINALIZER]
    world.delete("InferenceGroup", "serving", "g")
    reconcile(world, 4.0, memo=memo)
    with pytest.raises(NotFound):
        world.snapshot().get("ClusterTopology", None, "default")
