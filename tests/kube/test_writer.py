"""What the writer puts on the wire (seen by kmock): paths, merge patch content type, field
manager, the resourceVersion precondition inside the patch body, DeleteOptions, and the
aggregation of repeated events."""

from __future__ import annotations

import pytest

from tandem.cluster.ports import MERGE_PATCH, NotFound, ObjectRef
from tandem.errors import BadRequest
from tandem.kube.writer import KubeWriter, event_name

NS = "serving"
GROUPS = f"/apis/tandem.dev/v1alpha1/namespaces/{NS}/inferencegroups"


def group():
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "metadata": {"name": "g", "namespace": NS, "uid": "u-1"},
            "spec": {"replicas": 1}}


def writes(mock, method):
    return [r for r in mock.requests() if r.method.value == method]


def test_create_posts_to_the_collection_as_field_manager_tandem(mock, mock_rest):
    created = KubeWriter(mock_rest).create(group())
    assert created["metadata"]["name"] == "g" and isinstance(created, dict)
    [post] = writes(mock, "POST")
    assert post.url.path == GROUPS and post.params == {"fieldManager": "tandem"}
    assert post.headers["Content-Type"] == "application/json" and post.data == group()


def test_create_of_a_cluster_scoped_kind_and_a_namespaced_one_without_namespace(mock, mock_rest):
    writer = KubeWriter(mock_rest)
    writer.create({"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": "default"}, "spec": {}})
    writer.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    paths = [r.url.path for r in writes(mock, "POST")]
    assert paths == ["/apis/tandem.dev/v1alpha1/clustertopologies", "/api/v1/namespaces/default/configmaps"]


def test_patch_is_a_merge_patch_with_the_precondition_in_the_body(mock, mock_rest):
    writer = KubeWriter(mock_rest)
    writer.create(group())
    patch = {"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 2}}
    writer.patch("InferenceGroup", NS, "g", patch, resource_version="41")
    writer.patch("InferenceGroup", NS, "g", {"spec": {"replicas": 3}}, resource_version="42")
    writer.patch("InferenceGroup", NS, "g", {"spec": {"replicas": None}})
    first, second, third = writes(mock, "PATCH")
    for request in (first, second, third):
        assert request.url.path == f"{GROUPS}/g"
        assert request.headers["Content-Type"] == MERGE_PATCH == "application/merge-patch+json"
        assert request.params == {"fieldManager": "tandem"}
    assert first.data == {"metadata": {"labels": {"a": "1"}, "resourceVersion": "41"}, "spec": {"replicas": 2}}
    assert second.data == {"metadata": {"resourceVersion": "42"}, "spec": {"replicas": 3}}
    assert third.data == {"spec": {"replicas": None}}, "no precondition asked, none sent; null deletes"
    assert patch == {"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 2}}, "the caller's patch is not changed"


def test_status_patches_go_to_the_status_subresource(mock, mock_rest):
    writer = KubeWriter(mock_rest)
    writer.create(group())
    writer.patch_status("InferenceGroup", NS, "g", {"status": {"observedGeneration": 1}}, resource_version="7")
    [request] = writes(mock, "PATCH")
    assert request.url.path == f"{GROUPS}/g/status" and request.headers["Content-Type"] == MERGE_PATCH
    assert request.data == {"metadata": {"resourceVersion": "7"}, "status": {"observedGeneration": 1}}
    with pytest.raises(NotFound):
        writer.patch_status("ConfigMap", NS, "c", {"status": {}})  # no status subresource: refused before sending
    assert len(writes(mock, "PATCH")) == 1


def test_delete_sends_delete_options_with_preconditions_and_propagation(mock, mock_rest):
    writer = KubeWriter(mock_rest)
    writer.create(group())
    writer.delete("InferenceGroup", NS, "g", uid="u-1", resource_version="9", propagation="Foreground")
    writer.create(group())
    writer.delete("InferenceGroup", NS, "g")
    first, second = writes(mock, "DELETE")
    assert first.url.path == f"{GROUPS}/g" and first.headers["Content-Type"] == "application/json"
    assert first.data == {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground",
                          "preconditions": {"uid": "u-1", "resourceVersion": "9"}}
    assert second.data == {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}


def test_an_unknown_kind_fails_before_any_request(mock, mock_rest):
    with pytest.raises(BadRequest, match="PodGroup"):
        KubeWriter(mock_rest).patch("PodGroup", NS, "x", {})
    assert mock.requests() == []


def test_events_are_created_then_aggregated_by_patching_count(mock, mock_rest):
    clock = {"now": 1_764_003_217.6}
    writer = KubeWriter(mock_rest, clock=lambda: clock["now"], instance="op-0")
    ref = ObjectRef("InferenceGroup", NS, "g", "u-1", "tandem.dev/v1alpha1")
    writer.record_event(ref, "Warning", "Unschedulable", "unit 0: no rack fits")
    clock["now"] += 5
    writer.record_event(ref, "Warning", "Unschedulable", "unit 0: no rack fits")
    writer.record_event(ref, "Warning", "Unschedulable", "unit 1: no rack fits")
    posts, patches = writes(mock, "POST"), writes(mock, "PATCH")
    assert [p.url.path for p in posts] == [f"/api/v1/namespaces/{NS}/events"] * 2
    event = posts[0].data
    assert event["metadata"] == {"name": event_name(ref, "Warning", "Unschedulable", "unit 0: no rack fits"), "namespace": NS}
    assert event["involvedObject"] == {"kind": "InferenceGroup", "namespace": NS, "name": "g", "uid": "u-1", "apiVersion": "tandem.dev/v1alpha1"}
    assert (event["type"], event["reason"], event["message"], event["count"]) == ("Warning", "Unschedulable", "unit 0: no rack fits", 1)
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2025-11-24T16:53:37Z"
    assert event["source"] == {"component": "tandem"} and event["reportingComponent"] == "tandem" and event["reportingInstance"] == "op-0"
    [patch] = patches
    assert patch.url.path == f"/api/v1/namespaces/{NS}/events/{event['metadata']['name']}"
    assert patch.headers["Content-Type"] == MERGE_PATCH
    assert patch.data == {"count": 2, "lastTimestamp": "2025-11-24T16:53:42Z"}, "a remembered repeat is one patch, no read"


def test_a_repeat_this_writer_does_not_remember_is_counted_on_the_stored_event(mock, mock_rest):
    ref = ObjectRef("InferenceGroup", NS, "g", "u-1")
    name = event_name(ref, "Normal", "ScaledTo", "prefill 2 -> 4")
    exists = {"kind": "Status", "code": 409, "reason": "AlreadyExists", "message": f'events "{name}" already exists'}
    mock.on_loop(lambda h: h[f"post /api/v1/namespaces/{NS}/events"] << 409 << exists)  # another process (or leader) made it
    mock.on_loop(lambda h: h[f"patch /api/v1/namespaces/{NS}/events/{name}"] << {"metadata": {"name": name, "resourceVersion": "55"}, "count": 4})
    KubeWriter(mock_rest).record_event(ref, "Normal", "ScaledTo", "prefill 2 -> 4")
    requests = mock.requests()
    assert [r.method.value for r in requests] == ["POST", "PATCH", "PATCH"], "no GET: RBAC grants events create and patch"
    touch, count = requests[1], requests[2]
    assert set(touch.data) == {"lastTimestamp"} and count.url.path.endswith(f"/events/{name}")
    assert count.data["count"] == 5 and count.data["metadata"] == {"resourceVersion": "55"}, "counted with compare-and-swap"


def test_an_expired_event_is_created_again(mock, mock_rest):
    ref = ObjectRef("Node", None, "n-1", "u-9", "v1")
    writer = KubeWriter(mock_rest)
    writer.record_event(ref, "Warning", "Excluded", "no rack label")
    name = event_name(ref, "Warning", "Excluded", "no rack label")
    mock.on_loop(lambda h: h.objects.__delitem__(next(k for k in h.objects if k[2] == name)))  # the server expired it
    mock.on_loop(lambda h: h[f"patch /api/v1/namespaces/default/events/{name}"] << 404 << {"kind": "Status", "code": 404, "reason": "NotFound"})
    writer.record_event(ref, "Warning", "Excluded", "no rack label")
    assert [r.method.value for r in mock.requests()] == ["POST", "PATCH", "POST"]
    assert mock.requests()[-1].url.path == "/api/v1/namespaces/default/events", "cluster-scoped objects' events live in default"


def test_writers_that_never_met_count_on_the_same_event(api, api_rest):
    """A restart or a new leader keeps counting the stored Event (against a stateful API)."""
    ref = ObjectRef("InferenceGroup", NS, "g", "u-1")
    for writer in (KubeWriter(api_rest), KubeWriter(api_rest), KubeWriter(api_rest)):
        writer.record_event(ref, "Warning", "Stalled", "unit 0: step timed out")
        writer.record_event(ref, "Warning", "Stalled", "unit 0: step timed out")
    [event] = api.store.list("Event", NS)
    assert event["count"] == 6 and event["lastTimestamp"] >= event["firstTimestamp"]
    assert {r.method for r in api.requests} == {"POST", "PATCH"}
