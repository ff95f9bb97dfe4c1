"""The summary's affinity figure reads the group's own ClusterTopology, not the first one stored."""

from __future__ import annotations

import pytest

from tandem.api.naming import GROUP_LABEL, REPLICA_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.cluster.memory import MemoryStore
from tandem.sim.summary import _affinity


def _topology(name: str, levels: list[tuple[str, str]]) -> dict:
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": name},
            "spec": {"levels": [{"name": level, "nodeLabel": label} for level, label in levels]}}


def _pod(name: str, role: str, node: str) -> dict:
    labels = {GROUP_LABEL: "g", UNIT_LABEL: "0", ROLE_LABEL: role, REPLICA_LABEL: "0"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "serving", "labels": labels},
            "spec": {"nodeName": node, "containers": [{"name": "engine"}]}}


@pytest.mark.parametrize("order", [("default", "fabric"), ("fabric", "default")])
def test_the_affinity_figure_is_judged_on_the_topology_the_group_names(order):
    """Prefill on rack-1, decode on rack-2: a Required rack rule is not met, whichever
    topology is created first and whichever lists first ("default", which has no rack
    level at all, lists before "fabric")."""
    store = MemoryStore()
    for name in order:
        levels = [("rack", "example.com/rack"), ("host", "kubernetes.io/hostname")] if name == "fabric" else [("zone", "example.com/zone")]
        store.create(_topology(name, levels))
    store.create({"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "metadata": {"name": "g", "namespace": "serving"},
                  "spec": {"topologyName": "fabric", "affinity": [{"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}],
                           "roles": []}})
    store.create(_pod("g-0-prefill-0-0", "prefill", "n1"))
    store.create(_pod("g-0-decode-0-0", "decode", "n2"))
    nodes = {"n1": {"example.com/rack": "rack-1"}, "n2": {"example.com/rack": "rack-2"}}
    assert _affinity(store, nodes, "serving/g", None) == 0.0
    nodes["n2"]["example.com/rack"] = "rack-1"
    assert _affinity(store, nodes, "serving/g", None) == 1.0
