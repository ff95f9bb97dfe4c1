"""The store's kind registry, per store: what the API server's CRDs need of it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tandem.cluster.memory import BUILT_IN, CLUSTER_SCOPED, STATUS_SUBRESOURCE, MemoryStore
from tandem.errors import Invalid, NotFound


def test_default_kinds_are_todays_plus_namespaces_and_crds():
    store = MemoryStore()
    assert STATUS_SUBRESOURCE == {"Pod", "Node", "InferenceGroup", "ClusterTopology"}
    assert CLUSTER_SCOPED == {"Node", "ClusterTopology", "Namespace", "CustomResourceDefinition"}
    namespace = store.create({"kind": "Namespace", "metadata": {"name": "serving"}})
    assert "namespace" not in namespace["metadata"] and store.is_cluster_scoped("Namespace")
    assert store.has_status("Pod") and not store.has_status("ConfigMap")


def test_a_registered_kind_gets_its_scope_and_status_subresource_in_that_store_only():
    store, other = MemoryStore(), MemoryStore()
    store.register_kind("Widget", cluster_scoped=True, status=True)
    widget = store.create({"kind": "Widget", "metadata": {"name": "w"}, "spec": {"a": 1}})
    assert "namespace" not in widget["metadata"] and store.snapshot().get("Widget", None, "w")["spec"] == {"a": 1}
    store.patch_status("Widget", None, "w", {"status": {"ok": True}})
    assert store.patch("Widget", None, "w", {"status": {"ok": False}})["status"] == {"ok": True}, "status only through the subresource"
    assert not other.is_cluster_scoped("Widget") and not other.has_status("Widget")
    with pytest.raises(NotFound):
        other.patch_status("Widget", None, "w", {"status": {}})
    with pytest.raises(Invalid):
        store.register_kind("Widget", cluster_scoped=False, status=True)  # objects exist: their keys depend on the scope
    store.register_kind("Widget", cluster_scoped=True, status=False)
    assert not store.has_status("Widget")


def test_a_kind_registered_qualified_is_keyed_apart_from_its_namesakes_in_other_groups():
    """`Topology.kai.scheduler` and `Topology.kueue.x-k8s.io`: one object key rule
    (`kind_keys.key_of`) for create, get, list, update, watch and delete; plain kinds unchanged."""
    store = MemoryStore()
    for key in ("Topology.kai.scheduler", "Topology.kueue.x-k8s.io"):
        store.register_kind(key, cluster_scoped=True, status=False)
    start = store.resource_version
    kai = store.create({"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "t"}, "spec": {"n": 1}})
    store.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"}, "spec": {"n": 2}})
    assert "namespace" not in kai["metadata"], "the qualified key's scope"
    assert store.key_of(kai) == "Topology.kai.scheduler" and store.key_of({"apiVersion": "v1", "kind": "Pod"}) == "Pod"
    assert [o["spec"] for o in store.list("Topology.kueue.x-k8s.io")] == [{"n": 2}]
    assert store.list("Topology") == [], "an unregistered plain name is no kind here"
    store.update({**kai, "spec": {"n": 3}})
    assert store.get("Topology.kai.scheduler", None, "t")["spec"] == {"n": 3}
    assert [(e.type, e.object["spec"]) for e in store.watch("Topology.kai.scheduler", start)] == [("ADDED", {"n": 1}), ("MODIFIED", {"n": 3})]
    store.delete("Topology.kueue.x-k8s.io", None, "t")
    assert [e.type for e in store.watch("Topology.kueue.x-k8s.io", start)] == ["ADDED", "DELETED"]
    assert store.get("Topology.kai.scheduler", None, "t")["spec"] == {"n": 3}


def test_a_store_serves_the_built_in_kinds_and_those_registered_until_forgotten():
    store = MemoryStore()
    assert store.served(("Pod", "PriorityClass", "InferenceGroup", "PodGroup.scheduling.volcano.sh")) == {"Pod", "PriorityClass", "InferenceGroup"}
    store.register_kind("PodGroup.scheduling.volcano.sh", cluster_scoped=False, status=True)
    assert store.served(("PodGroup.scheduling.volcano.sh", "PodGroup.scheduling.run.ai")) == {"PodGroup.scheduling.volcano.sh"}
    store.forget_kind("PodGroup.scheduling.volcano.sh")
    assert store.served(("PodGroup.scheduling.volcano.sh",)) == frozenset()
    store.forget_kind("Pod")
    assert store.served(("Pod",)) == {"Pod"}, "a built-in kind is not a CRD's to take away"


def test_the_api_servers_store_serves_a_crds_kind_while_the_crd_is_stored(client, server):
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "podgroups.scheduling.volcano.sh"},
        "spec": {"group": "scheduling.volcano.sh", "scope": "Namespaced", "names": {"kind": "PodGroup", "plural": "podgroups"},
                 "versions": [{"name": "v1beta1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
    }
    assert server.state.store.served(("PodGroup", "ServiceAccount")) == {"ServiceAccount"}
    assert client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).code == 201
    assert server.state.store.served(("PodGroup",)) == {"PodGroup"}, "keyed plain: no other group serves a PodGroup here"
    assert client.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/podgroups.scheduling.volcano.sh").code == 200
    assert server.state.store.served(("PodGroup",)) == frozenset()


CRD_KINDS = ("PodGroup.scheduling.volcano.sh", "PodGroup.scheduling.run.ai", "Workload.kueue.x-k8s.io", "Widget")


@given(st.lists(st.tuples(st.booleans(), st.sampled_from(CRD_KINDS))), st.sets(st.sampled_from((*CRD_KINDS, "Pod", "Lease"))))
def test_served_is_the_built_in_kinds_and_the_last_word_on_each_registered_one(steps, asked):
    """Whatever order kinds are registered and forgotten in, a kind is served iff it is built
    in or its last step registered it; and only kinds asked about are answered."""
    store, last = MemoryStore(), {}
    for register, kind in steps:
        if register:
            store.register_kind(kind, cluster_scoped=False, status=True)
        else:
            store.forget_kind(kind)
        last[kind] = register
    assert store.served(asked) == {k for k in asked if k in BUILT_IN or last.get(k, False)}
