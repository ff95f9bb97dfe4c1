"""The contract of the controller's ports (`tandem.cluster.ports`), written once and
run against every world (`conftest.WORLDS`): what the controller relies on an API server
to do, and nothing it does not."""

from __future__ import annotations

import pytest

from tandem.cluster.ports import AlreadyExists, ApiError, Conflict, Invalid, NotFound, ObjectRef
from tandem.errors import BadRequest, TandemError

NS = "serving"


def group(name="g", **meta):
    return {
        "apiVersion": "tandem.dev/v1alpha1",
        "kind": "InferenceGroup",
        "metadata": {"name": name, "namespace": NS, **meta},
        "spec": {"replicas": 1, "roles": [{"name": "prefill", "replicas": 2}]},
    }


def pod(name, labels=None, gated=True, owner=None, **spec):
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
        "spec": {"containers": [{"name": "engine", "image": "vllm"}], **spec},
    }
    if gated:
        obj["spec"]["schedulingGates"] = [{"name": "tandem.dev/placement"}]
    if owner is not None:
        meta = owner["metadata"]
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"], "controller": True}
        ]
    return obj


def names(objects):
    return [o["metadata"]["name"] for o in objects]


# ----------------------------------------------------------------------------- versions


def test_resource_versions_are_opaque_strings_that_change_on_every_write(world):
    created = world.create(group())
    first = created["metadata"]["resourceVersion"]
    assert isinstance(first, str) and first
    patched = world.patch("InferenceGroup", NS, "g", {"metadata": {"labels": {"team": "a"}}})
    assert isinstance(patched["metadata"]["resourceVersion"], str) and patched["metadata"]["resourceVersion"] != first
    assert world.snapshot().get("InferenceGroup", NS, "g")["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]


def test_a_patch_with_a_stale_resource_version_conflicts_and_changes_nothing(world):
    first = world.create(group())["metadata"]["resourceVersion"]
    world.patch("InferenceGroup", NS, "g", {"spec": {"replicas": 2}}, resource_version=first)
    with pytest.raises(Conflict) as caught:
        world.patch("InferenceGroup", NS, "g", {"spec": {"replicas": 3}}, resource_version=first)
    assert caught.value.retryable and caught.value.code == 409
    assert world.snapshot().get("InferenceGroup", NS, "g")["spec"]["replicas"] == 2
    with pytest.raises(Conflict):
        world.patch_status("InferenceGroup", NS, "g", {"status": {"revision": "x"}}, resource_version=first)
    assert "status" not in world.snapshot().get("InferenceGroup", NS, "g")


def test_create_of_an_existing_name_and_writes_to_missing_objects_fail_terminally(world):
    world.create(group())
    with pytest.raises(AlreadyExists) as exists:
        world.create(group())
    with pytest.raises(NotFound) as missing:
        world.patch("InferenceGroup", NS, "nope", {"spec": {"replicas": 2}})
    with pytest.raises(NotFound):
        world.snapshot().get("InferenceGroup", NS, "nope")
    with pytest.raises(NotFound):
        world.delete("InferenceGroup", NS, "nope")
    for error in (exists.value, missing.value):
        assert isinstance(error, TandemError) and isinstance(error, ApiError) and not error.retryable


# ----------------------------------------------------------------------------- merge patch


def test_merge_patch_merges_maps_replaces_lists_and_null_deletes(world):
    world.create(group(labels={"a": "1", "b": "2"}))
    out = world.patch(
        "InferenceGroup", NS, "g", {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"roles": [{"name": "decode", "replicas": 1}]}}
    )
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert out["spec"]["roles"] == [{"name": "decode", "replicas": 1}]
    assert out["spec"]["replicas"] == 1


# ----------------------------------------------------------------------------- status and generation


def test_status_is_a_subresource_and_generation_counts_spec_changes_only(world):
    created = world.create(group())
    assert created["metadata"]["generation"] == 1
    out = world.patch("InferenceGroup", NS, "g", {"status": {"revision": "ignored"}, "metadata": {"labels": {"x": "y"}}})
    assert "status" not in out and out["metadata"]["generation"] == 1, "status is not written through the object"
    out = world.patch_status("InferenceGroup", NS, "g", {"status": {"observedGeneration": 1, "autoscaling": {"reason": "r"}}})
    assert out["status"] == {"observedGeneration": 1, "autoscaling": {"reason": "r"}} and out["metadata"]["generation"] == 1
    out = world.patch_status("InferenceGroup", NS, "g", {"spec": {"replicas": 9}, "status": {"revision": "abc"}})
    assert out["spec"]["replicas"] == 1, "a status patch never changes the spec"
    assert out["status"] == {"observedGeneration": 1, "autoscaling": {"reason": "r"}, "revision": "abc"}, "merged, not replaced"
    out = world.patch("InferenceGroup", NS, "g", {"spec": {"replicas": 2}})
    assert out["metadata"]["generation"] == 2 and out["status"]["revision"] == "abc"


def test_two_owners_merge_patching_their_own_status_keys_never_lose_each_others(world):
    world.create(group())
    world.patch_status("InferenceGroup", NS, "g", {"status": {"conditions": [{"type": "Available", "status": "True"}]}})
    world.patch_status("InferenceGroup", NS, "g", {"status": {"autoscaling": {"reason": "scaled"}}})
    world.patch_status("InferenceGroup", NS, "g", {"status": {"conditions": [{"type": "Available", "status": "False"}]}})
    status = world.snapshot().get("InferenceGroup", NS, "g")["status"]
    assert status == {"conditions": [{"type": "Available", "status": "False"}], "autoscaling": {"reason": "scaled"}}


# ----------------------------------------------------------------------------- delete


def test_delete_preconditions_on_uid_and_resource_version(world):
    created = world.create(pod("p"))
    meta = created["metadata"]
    with pytest.raises(Conflict):
        world.delete("Pod", NS, "p", uid="another-uid")
    with pytest.raises(Conflict):
        world.delete("Pod", NS, "p", resource_version="0" if meta["resourceVersion"] != "0" else "1")
    assert names(world.snapshot().list("Pod")) == ["p"]
    world.delete("Pod", NS, "p", uid=meta["uid"], resource_version=meta["resourceVersion"])
    assert world.snapshot().list("Pod") == []
    recreated = world.create(pod("p"))
    assert recreated["metadata"]["uid"] != meta["uid"], "a namesake is another object"
    with pytest.raises(Conflict):
        world.delete("Pod", NS, "p", uid=meta["uid"])


def test_finalizers_hold_deletion_until_removed(world):
    world.create(group(finalizers=["tandem.dev/cleanup"]))
    world.delete("InferenceGroup", NS, "g")
    held = world.snapshot().get("InferenceGroup", NS, "g")
    assert held["metadata"]["deletionTimestamp"].endswith("Z")
    with pytest.raises(Invalid):
        world.patch("InferenceGroup", NS, "g", {"metadata": {"finalizers": ["tandem.dev/cleanup", "other"]}})
    world.patch("InferenceGroup", NS, "g", {"metadata": {"finalizers": None}})
    with pytest.raises(NotFound):
        world.snapshot().get("InferenceGroup", NS, "g")


def test_owner_references_cascade_in_the_background_and_orphan_keeps_dependents(world):
    owner = world.create(group())
    world.create(pod("a", owner=owner))
    world.create(pod("b", owner=owner))
    world.create(pod("c"))
    world.delete("InferenceGroup", NS, "g", propagation="Background")
    assert names(world.snapshot().list("Pod")) == ["c"]
    owner = world.create(group("h"))
    world.create(pod("d", owner=owner))
    world.delete("InferenceGroup", NS, "h", propagation="Orphan")
    kept = world.snapshot().get("Pod", NS, "d")
    assert not kept["metadata"].get("ownerReferences"), "an orphan loses its reference to the deleted owner"


# ----------------------------------------------------------------------------- pods


def test_pod_spec_is_immutable_but_for_gate_removal_and_node_selector_while_gated(world):
    world.create(pod("p"))
    world.patch("Pod", NS, "p", {"spec": {"nodeSelector": {"kubernetes.io/hostname": "n-1"}}})
    with pytest.raises(Invalid):
        world.patch("Pod", NS, "p", {"spec": {"schedulingGates": [{"name": "tandem.dev/placement"}, {"name": "other"}]}})
    with pytest.raises(Invalid):
        world.patch("Pod", NS, "p", {"spec": {"nodeSelector": {"kubernetes.io/hostname": "n-2"}}})
    with pytest.raises(Invalid):
        world.patch("Pod", NS, "p", {"spec": {"containers": [{"name": "engine", "image": "sglang"}]}})
    world.patch("Pod", NS, "p", {"spec": {"schedulingGates": None}})
    with pytest.raises(Invalid):
        world.patch("Pod", NS, "p", {"spec": {"nodeSelector": {"zone": "z"}}})
    assert world.snapshot().get("Pod", NS, "p")["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "n-1"}
    with pytest.raises(Invalid):
        world.create(pod("bound", nodeName="n-1"))


# ----------------------------------------------------------------------------- selectors


def test_label_selectors(world):
    world.create(pod("p1", {"tandem.dev/role": "prefill", "tandem.dev/unit": "0"}))
    world.create(pod("d1", {"tandem.dev/role": "decode", "tandem.dev/unit": "0"}))
    world.create(pod("r1", {"tandem.dev/role": "router"}))
    reader = world.snapshot()

    def listed(selector):
        return names(reader.list("Pod", NS, labels=selector))

    assert listed("tandem.dev/role=prefill") == ["p1"]
    assert listed("tandem.dev/role in (prefill, decode)") == ["d1", "p1"]
    assert listed("tandem.dev/role notin (prefill),tandem.dev/unit") == ["d1"]
    assert listed("!tandem.dev/unit") == ["r1"]
    assert listed({"tandem.dev/role": "router"}) == ["r1"]
    assert listed("tandem.dev/role!=router") == ["d1", "p1"]
    assert names(reader.list("Pod", "elsewhere")) == []
    with pytest.raises(BadRequest):
        reader.list("Pod", NS, labels="role in prefill")


def test_field_selectors_on_node_name_phase_and_name(world):
    world.create(pod("bound", gated=False))
    world.create(pod("waiting"))
    world.create(pod("failed", gated=False))
    world.patch_status("Pod", NS, "failed", {"status": {"phase": "Failed"}})
    world.patch_status("Pod", NS, "bound", {"status": {"phase": "Running"}})
    reader = world.snapshot()
    assert names(reader.list("Pod", fields="status.phase=Failed")) == ["failed"]
    assert names(reader.list("Pod", fields="status.phase!=Failed")) == ["bound", "waiting"]
    assert names(reader.list("Pod", fields="metadata.name=waiting")) == ["waiting"]
    assert names(reader.list("Pod", fields="spec.nodeName=")) == ["bound", "failed", "waiting"], "none bound"
    assert names(reader.list("Pod", fields={"metadata.name": "bound"}, labels="!x")) == ["bound"]
    with pytest.raises(BadRequest):
        reader.list("Pod", fields="status.phase")


# ----------------------------------------------------------------------------- snapshots


def test_a_snapshot_is_consistent_while_the_world_moves_on(world):
    world.create(group())
    world.create(pod("a"))
    reader = world.snapshot()
    world.create(pod("b"))
    world.patch("InferenceGroup", NS, "g", {"spec": {"replicas": 3}})
    world.delete("Pod", NS, "a")
    assert names(reader.list("Pod")) == ["a"]
    assert reader.get("InferenceGroup", NS, "g")["spec"]["replicas"] == 1
    later = world.snapshot()
    assert names(later.list("Pod")) == ["b"] and later.get("InferenceGroup", NS, "g")["spec"]["replicas"] == 3


# ----------------------------------------------------------------------------- events


def test_events_are_recorded_against_their_object_and_repeats_aggregate(world):
    owner = world.create(group())
    ref = ObjectRef.of(owner)
    world.record_event(ref, "Warning", "Unschedulable", "unit 0: no rack has 8 free GPUs")
    world.record_event(ref, "Warning", "Unschedulable", "unit 0: no rack has 8 free GPUs")
    world.record_event(ref, "Warning", "Unschedulable", "unit 1: no rack has 8 free GPUs")
    world.record_event(ref, "Normal", "Scaled", "prefill 2 -> 4")
    events = world.snapshot().list("Event", NS)
    seen = sorted((e["reason"], e["message"], e["count"], e["type"]) for e in events)
    assert seen == [
        ("Scaled", "prefill 2 -> 4", 1, "Normal"),
        ("Unschedulable", "unit 0: no rack has 8 free GPUs", 2, "Warning"),
        ("Unschedulable", "unit 1: no rack has 8 free GPUs", 1, "Warning"),
    ]
    for event in events:
        assert event["involvedObject"]["uid"] == owner["metadata"]["uid"]
        assert event["involvedObject"]["kind"] == "InferenceGroup" and event["involvedObject"]["name"] == "g"
        assert event["lastTimestamp"] >= event["firstTimestamp"]


# ----------------------------------------------------------------------------- kinds

KAI, KUEUE = "Topology.kai.scheduler", "Topology.kueue.x-k8s.io"  # one kind name in two groups


def topology(api_version, name, levels):
    return {"apiVersion": api_version, "kind": "Topology", "metadata": {"name": name}, "spec": {"levels": levels}}


def test_one_kind_name_in_two_groups_is_two_kinds_created_listed_watched_and_deleted_apart(world):
    start, _ = world.snapshot().changes_since(None)
    kai = world.create(topology("kai.scheduler/v1alpha1", "default", ["rack"]))
    kueue = world.create(topology("kueue.x-k8s.io/v1beta2", "default", ["block", "rack"]))
    assert kai["metadata"]["uid"] != kueue["metadata"]["uid"], "the same name in each group: two objects"
    with pytest.raises(AlreadyExists):
        world.create(topology("kai.scheduler/v1alpha1", "default", ["host"]))
    reader = world.snapshot()
    assert [(o["apiVersion"], o["spec"]["levels"]) for o in reader.list(KAI)] == [("kai.scheduler/v1alpha1", ["rack"])]
    assert [(o["apiVersion"], o["spec"]["levels"]) for o in reader.list(KUEUE)] == [("kueue.x-k8s.io/v1beta2", ["block", "rack"])]
    assert reader.get(KAI, None, "default")["metadata"]["uid"] == kai["metadata"]["uid"]
    cursor, changed = reader.changes_since(start)
    assert changed is not None and {k for k in changed if k[0].startswith("Topology")} == {(KAI, "", "default"), (KUEUE, "", "default")}

    world.patch(KUEUE, None, "default", {"spec": {"levels": ["rack"]}})
    _, changed = world.snapshot().changes_since(cursor)
    assert changed is not None and {k for k in changed if k[0].startswith("Topology")} == {(KUEUE, "", "default")}, "a patch of one is not a change of the other"
    assert world.snapshot().get(KAI, None, "default")["spec"]["levels"] == ["rack"]

    world.delete(KAI, None, "default", uid=kai["metadata"]["uid"])
    later = world.snapshot()
    assert later.list(KAI) == [] and [o["spec"]["levels"] for o in later.list(KUEUE)] == [["rack"]]
    with pytest.raises(NotFound):
        later.get(KAI, None, "default")
    with pytest.raises(NotFound):
        world.delete(KAI, None, "default")
    world.delete(KUEUE, None, "default")
    assert world.snapshot().list(KUEUE) == []
