"""What the in-memory store does as a world beyond the controller's ports (those are in
`tests/contract`): whole-object updates, watches, binding, copies."""

from __future__ import annotations

import pytest

from tandem.cluster.memory import MemoryStore
from tandem.cluster.selectors import matches
from tandem.errors import AlreadyExists, Conflict, Gone, Invalid, NotFound


def pod(name, labels=None, gated=True, owner=None, **spec):
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "serving", "labels": labels or {}},
        "spec": {"containers": [{"name": "e"}], **spec},
    }
    if gated:
        obj["spec"]["schedulingGates"] = [{"name": "tandem.dev/placement"}]
    if owner:
        obj["metadata"]["ownerReferences"] = [{"kind": owner["kind"], "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]
    return obj


def node(name):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": {"pods": "110"}}}


def group(name="g"):
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "metadata": {"name": name, "namespace": "serving"}, "spec": {"replicas": 1}}


@pytest.fixture
def store():
    clock = {"now": 0.0}
    s = MemoryStore(clock=lambda: clock["now"])
    s.clock = clock  # type: ignore[attr-defined]
    return s


def test_every_write_bumps_the_resource_version_and_stale_writes_conflict(store):
    created = store.create(group())
    first = created["metadata"]["resourceVersion"]
    created["spec"]["replicas"] = 2
    updated = store.update(created)
    assert int(updated["metadata"]["resourceVersion"]) > int(first)
    created["spec"]["replicas"] = 3  # still carries the old resourceVersion
    with pytest.raises(Conflict):
        store.update(created)
    with pytest.raises(Conflict):
        store.patch("InferenceGroup", "serving", "g", {"spec": {"replicas": 4}}, resource_version=first)
    with pytest.raises(AlreadyExists):
        store.create(group())
    with pytest.raises(NotFound):
        store.get("InferenceGroup", "serving", "nope")


def test_generation_counts_spec_changes_only_and_status_is_a_subresource(store):
    g = store.create(group())
    assert g["metadata"]["generation"] == 1
    g["status"] = {"observedGeneration": 1}
    g = store.update_status(g)
    assert g["metadata"]["generation"] == 1 and g["status"] == {"observedGeneration": 1}
    g["metadata"]["labels"] = {"team": "a"}
    g["status"] = {"observedGeneration": 99}  # ignored by update: status is a subresource
    g = store.update(g)
    assert g["metadata"]["generation"] == 1 and g["status"] == {"observedGeneration": 1}
    g = store.patch("InferenceGroup", "serving", "g", {"spec": {"replicas": 2}})
    assert g["metadata"]["generation"] == 2


def test_watch_from_a_resource_version_and_gone_when_too_old():
    s = MemoryStore(history=3)
    start = s.resource_version
    s.create(group("a"))
    s.create(group("b"))
    events = s.watch("InferenceGroup", since=start)
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("ADDED", "a"), ("ADDED", "b")]
    s.delete("InferenceGroup", "serving", "a")
    s.create(group("c"))
    s.create(group("d"))
    with pytest.raises(Gone):
        s.watch("InferenceGroup", since=start)
    latest = s.list_with_version("InferenceGroup")
    assert [o["metadata"]["name"] for o in latest.items] == ["b", "c", "d"]
    assert s.watch("InferenceGroup", since=latest.resource_version) == []





def test_scheduling_gates_and_binding(store):
    store.create(node("n-1"))
    store.create(pod("p"))
    with pytest.raises(Conflict):
        store.bind("serving", "p", "n-1")
    store.patch("Pod", "serving", "p", {"spec": {"nodeSelector": {"kubernetes.io/hostname": "n-1"}}})
    with pytest.raises(Invalid):
        store.patch("Pod", "serving", "p", {"spec": {"schedulingGates": [{"name": "a"}, {"name": "b"}]}})
    store.patch("Pod", "serving", "p", {"spec": {"schedulingGates": None}})
    with pytest.raises(Invalid):
        store.patch("Pod", "serving", "p", {"spec": {"nodeSelector": {"zone": "z"}}})
    bound = store.bind("serving", "p", "n-1")
    assert bound["spec"]["nodeName"] == "n-1"
    with pytest.raises(Conflict):
        store.bind("serving", "p", "n-1")
    with pytest.raises(NotFound):
        store.create(pod("q", gated=False)) and store.bind("serving", "q", "n-9")
    with pytest.raises(Invalid):
        store.create(pod("r", nodeName="n-1"))


def test_reads_are_copies(store):
    store.create(group())
    g = store.get("InferenceGroup", "serving", "g")
    g["spec"]["replicas"] = 99
    assert store.get("InferenceGroup", "serving", "g")["spec"]["replicas"] == 1


def test_label_selector_helpers():
    assert matches(None, {}) and not matches("a", {}) and matches("a,!b", {"a": "1"})
