"""The controller's settings and the kinds it watches."""

from __future__ import annotations

from tandem.topology_controller.kinds import BACKEND_KINDS
from tandem.topology_controller.reconcile import TopologySettings, check_settings, watched_kinds


def test_kai_and_kueue_together_are_accepted():
    assert check_settings(TopologySettings(("kai", "kueue"))) == []
    assert check_settings(TopologySettings(("kai", "kueue", "volcano", "koordinator"))) == []
    assert check_settings(TopologySettings(("kueue",))) == []


def test_unknown_backend_is_refused():
    problems = check_settings(TopologySettings(("volcano", "slurm")))
    assert len(problems) == 1 and "slurm" in problems[0].message


def test_watched_kinds_are_the_base_kinds_and_each_enabled_backends():
    assert watched_kinds(TopologySettings()) == ("ClusterTopology", "InferenceGroup", "Node")
    assert watched_kinds(TopologySettings(("volcano", "kueue"))) == ("ClusterTopology", "InferenceGroup", "Node", "Topology.kueue.x-k8s.io", "ResourceFlavor", "HyperNode")
    assert watched_kinds(TopologySettings(("kai", "kueue"))) == (
        "ClusterTopology", "InferenceGroup", "Node", "Topology.kai.scheduler", "Topology.kueue.x-k8s.io", "ResourceFlavor")


def test_backend_kinds_are_cluster_scoped_with_their_groups():
    table = {name: [(k.key, k.api_version, k.plural, k.namespaced, k.owned) for k in kinds] for name, kinds in BACKEND_KINDS.items()}
    assert table == {
        "volcano": [("HyperNode", "topology.volcano.sh/v1alpha1", "hypernodes", False, True)],
        "kai": [("Topology.kai.scheduler", "kai.scheduler/v1alpha1", "topologies", False, True)],
        "kueue": [("Topology.kueue.x-k8s.io", "kueue.x-k8s.io/v1beta2", "topologies", False, True),
                  ("ResourceFlavor", "kueue.x-k8s.io/v1beta2", "resourceflavors", False, False)],
        "koordinator": [("ClusterNetworkTopology", "scheduling.koordinator.sh/v1alpha1", "clusternetworktopologies", False, True)],
    }
