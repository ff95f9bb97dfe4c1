"""Admission: the same checks as `tandem validate`, every problem on its own line with its
field path; warnings for a group that could never fit; 400 for anything malformed."""

from __future__ import annotations

import copy
import json
import ssl
import urllib.request
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.builders import group, role
from support.controller_world import design_group, settle, world
from support.fuzz import examples
from tandem.operator.admission import Malformed, review
from tandem.runtime.certs import make_certificates
from tandem.operator.webhook import serve_webhook


def request(obj, operation="CREATE", old=None, uid="u-1"):
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": uid, "kind": {"group": "tandem.dev", "version": "v1alpha1", "kind": obj.get("kind")}, "operation": operation, "object": obj, "oldObject": old},
    }
    return json.dumps(body).encode()


def test_a_valid_group_is_admitted_and_every_problem_of_a_bad_one_is_listed_with_its_path():
    store = world()
    good = design_group()
    verdict = review(request(good), store.snapshot())
    assert verdict.allowed and verdict.uid == "u-1" and verdict.response()["response"] == {"uid": "u-1", "allowed": True}
    bad = copy.deepcopy(good)
    bad["spec"]["roles"][0]["minReplicas"] = 9
    bad["spec"]["roles"][1]["topology"] = {"pack": {"required": "galaxy"}}
    bad["spec"]["replicas"] = -1
    verdict = review(request(bad), store.snapshot())
    assert not verdict.allowed
    assert any(p.startswith("spec.replicas") for p in verdict.problems)
    status = verdict.response()["response"]["status"]
    assert status["code"] == 422 and status["message"].count("\n") == len(verdict.problems) - 1
    cross = copy.deepcopy(good)
    cross["spec"]["roles"][0]["minReplicas"] = 9
    cross["spec"]["roles"][1]["topology"] = {"pack": {"required": "galaxy"}}
    verdict = review(request(cross), store.snapshot())
    assert [p.split(":")[0] for p in verdict.problems] == ["spec.roles[0].minReplicas", "spec.roles[1].topology.pack.required"]


def test_a_group_that_could_never_fit_is_admitted_with_a_warning():
    store = world(shape="block=1,rack=2,host=2")  # 4 nodes of 8 GPUs
    huge = group("huge", [role("prefill", 6, 6, gpus=8), role("decode", 1, 1, gpus=8)], required="block")
    verdict = review(request(huge), store.snapshot())
    assert verdict.allowed and len(verdict.warnings) == 1 and "even with every node empty" in verdict.warnings[0]
    small = group("small", [role("prefill", 1, 1, gpus=8)])
    assert review(request(small), store.snapshot()).warnings == ()


def test_counts_no_cluster_could_hold_are_refused_at_once_naming_the_bound():
    """The controller would build a unit (or try a replica) for each: refused at admission."""
    store = world(shape="block=1,rack=2,host=2")  # 4 nodes of 8 GPUs
    huge = group("huge", [role("prefill", 1, 1, gpus=8), role("decode", 1, 1, gpus=8)], required="block")
    huge["spec"]["replicas"] = 50_000
    huge["spec"]["roles"][0]["replicas"] = 20_000
    verdict = review(request(huge), store.snapshot())
    assert not verdict.allowed
    assert verdict.problems == (
        "spec.roles[0].replicas: 20,000 replicas of role prefill could never fit: all the cluster's nodes together hold at most 4 "
        "(nvidia.com/gpu); ask for at most 1,004",
        "spec.replicas: 50,000 units could never fit: all the cluster's nodes together hold at most 2 (nvidia.com/gpu); "
        "ask for at most 1,002",
    )
    huge["spec"]["replicas"] = 2_147_483_647
    assert review(request(huge), store.snapshot()).problems[0] == (
        "spec.replicas: 2,147,483,647 units is more than the controller plans (100,000)"), "one line per field, not two"
    huge["spec"]["replicas"], huge["spec"]["roles"][0]["replicas"] = 1002, 1004
    assert review(request(huge), store.snapshot()).allowed, "up to the margin beyond the bound: admitted (and Pending)"


def scale_request(namespace, name, replicas, uid="u-scale"):
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name, "namespace": namespace}, "spec": {"replicas": replicas}}
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": uid, "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                    "resource": {"group": "tandem.dev", "version": "v1alpha1", "resource": "inferencegroups"},
                    "subResource": "scale", "operation": "UPDATE", "namespace": namespace, "name": name,
                    "object": scale, "oldObject": {**scale, "spec": {"replicas": 1}}},
    }
    return json.dumps(body).encode()


def test_a_scale_is_checked_as_the_group_it_would_make():
    store = world(shape="block=1,rack=2,host=2")  # 4 nodes of 8 GPUs
    store.create(group("g", [role("prefill", 1, 1, gpus=8), role("decode", 1, 1, gpus=8)], required="block"))
    refused = review(scale_request("serving", "g", 50_000), store.snapshot())
    assert not refused.allowed and refused.problems == (
        "spec.replicas: 50,000 units could never fit: all the cluster's nodes together hold at most 2 (nvidia.com/gpu); ask for at most 1,002",)
    assert review(scale_request("serving", "g", 3), store.snapshot()).allowed
    assert review(scale_request("serving", "missing", 50_000), store.snapshot()).allowed, "no such group: the server answers 404"
    assert review(scale_request("serving", "g", "many"), store.snapshot()).allowed, "not a count: the server's schema refuses it"


def test_pod_templates_are_checked_against_kubernetes_schema_at_their_paths():
    bad = design_group()
    engine = bad["spec"]["roles"][1]["template"]["spec"]["containers"][0]
    engine["resource"] = engine.pop("resources")
    engine["ports"] = [{"containerPort": 8000, "protocol": "HTTP"}]
    verdict = review(request(bad), world().snapshot())
    assert not verdict.allowed and verdict.problems == (
        "spec.roles[1].template.spec.containers[0].ports[0].protocol: unsupported value \"HTTP\": supported values: \"TCP\", \"UDP\", \"SCTP\"",
        "spec.roles[1].template.spec.containers[0].resource: unknown field",
    )


def test_a_missing_topology_is_a_warning_not_a_refusal():
    g = design_group()
    g["spec"]["topologyName"] = "later"
    verdict = review(request(g), world().snapshot())
    assert verdict.allowed and "spec.topologyName" in verdict.warnings[0]


def test_pods_per_replica_cannot_change_while_the_role_has_pods():
    store = world(design_group())
    settle(store, store)
    old = store.get("InferenceGroup", "serving", "llama")
    new = copy.deepcopy(old)
    new["spec"]["roles"][1]["podsPerReplica"] = 4
    verdict = review(request(new, "UPDATE", old), store.snapshot())
    assert not verdict.allowed and verdict.problems[0].startswith("spec.roles[1].podsPerReplica: cannot change from 2 to 4")
    new["spec"]["roles"][1]["podsPerReplica"] = 2
    new["spec"]["roles"][0]["replicas"] = 2
    assert review(request(new, "UPDATE", old), store.snapshot()).allowed, "other changes are fine"


def test_deletes_and_other_kinds_pass_and_a_topology_is_checked():
    store = world()
    assert review(request({"kind": "Pod", "metadata": {"name": "p"}}), store.snapshot()).allowed
    assert review(request(design_group(), "DELETE"), store.snapshot()).allowed
    topo = {"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": "t"}, "spec": {"levels": []}}
    verdict = review(request(topo), store.snapshot())
    assert not verdict.allowed and verdict.problems[0].startswith("spec.levels")


def test_a_topology_is_reviewed_as_tandem_validate_reviews_it_and_its_deletion_guarded():
    store = world(design_group())
    inverted = {"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": "t"},
                "spec": {"levels": [{"name": "host", "nodeLabel": "kubernetes.io/hostname"}, {"name": "rack", "nodeLabel": "r"}]}}
    verdict = review(request(inverted), store.snapshot())
    assert not verdict.allowed and verdict.problems[0].startswith("spec.levels[0].nodeLabel: kubernetes.io/hostname names a single node")
    used = store.get("ClusterTopology", None, "default")
    verdict = review(_delete(used), store.snapshot())
    assert not verdict.allowed and verdict.problems == (
        "ClusterTopology 'default' is used by 1 InferenceGroup(s): serving/llama; delete them or point their spec.topologyName elsewhere first",)
    spare = {**used, "metadata": {"name": "spare"}}
    assert review(_delete(spare), store.snapshot()).allowed


def _delete(old):
    """A DELETE review as the API server sends it: no object, the stored one as oldObject."""
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-2", "kind": {"group": "tandem.dev", "version": "v1alpha1", "kind": "ClusterTopology"},
                        "operation": "DELETE", "object": None, "oldObject": old}}
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"[]", b'{"kind": "AdmissionReview"}', json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}).encode(), b"[" * 100_000],
)
def test_malformed_reviews_are_refused_as_such(body):
    with pytest.raises(Malformed):
        review(body, world().snapshot())


@settings(max_examples=examples(60), deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8), lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=30))
def test_any_spec_gets_a_verdict_or_malformed_never_a_crash(spec):
    obj = {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "metadata": {"name": "g", "namespace": "serving"}, "spec": spec}
    verdict = review(request(obj), world().snapshot())
    assert not verdict.allowed, "a random spec is never a valid group"
    assert verdict.problems and all(p.startswith("spec") for p in verdict.problems), verdict.problems


def test_the_webhook_answers_over_https_and_refuses_malformed_bodies(tmp_path):
    certs = make_certificates(["localhost"], datetime.now(timezone.utc))
    certs.write(tmp_path)
    store = world()
    server = serve_webhook(store.snapshot, tmp_path, 0, host="127.0.0.1")
    try:
        port = server.server_address[1]
        context = ssl.create_default_context(cadata=certs.ca_pem.decode())

        def post(data: bytes):
            req = urllib.request.Request(f"https://localhost:{port}/validate", data=data, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, context=context, timeout=10) as response:
                    return response.status, json.loads(response.read())
            except urllib.error.HTTPError as exc:
                return exc.code, json.loads(exc.read())

        code, answer = post(request(design_group()))
        assert code == 200 and answer["response"]["allowed"] is True
        code, answer = post(b"{nope")
        assert code == 400 and "not JSON" in answer["message"]
    finally:
        server.shutdown()


def test_a_group_may_not_newly_name_a_topology_being_deleted():
    """Its deletion waits for the groups naming it; a group arriving meanwhile would be left
    naming nothing once the last one goes. One already naming it is still admitted."""
    cluster = world()
    cluster.patch("ClusterTopology", None, "default", {"metadata": {"finalizers": ["tandem.dev/topology-in-use"]}})
    cluster.delete("ClusterTopology", None, "default")
    assert cluster.get("ClusterTopology", None, "default")["metadata"].get("deletionTimestamp")
    g = design_group()
    verdict = review(request(g), cluster.snapshot())
    assert not verdict.allowed and verdict.problems == ("spec.topologyName: ClusterTopology 'default' is being deleted; name another topology",)
    scaled = copy.deepcopy(g)
    scaled["spec"]["replicas"] = 2
    assert review(request(scaled, "UPDATE", old=g), cluster.snapshot()).allowed, "a group already naming it may change"
    moved = copy.deepcopy(g)
    moved["spec"]["topologyName"] = "default"
    elsewhere = copy.deepcopy(g)
    elsewhere["spec"]["topologyName"] = "other"
    assert not review(request(moved, "UPDATE", old=elsewhere), cluster.snapshot()).allowed, "nor move onto it"


def _koordinator_group() -> dict:
    g = group("koord", [role("prefill", 2, 1, gpus=8), role("decode", 1, 1, gpus=8)], required="rack")  # prefill has an extra
    g["spec"]["scheduler"] = {"backend": "koordinator"}
    return g


def test_what_the_backend_only_approximates_comes_back_as_warnings_worded_as_tandem_validate_words_them():
    from tandem.api.resources import ClusterTopology, InferenceGroup
    from tandem.backends.registry import get_backend

    store = world(shape="block=1,rack=2,host=4")
    g = _koordinator_group()
    verdict = review(request(g), store.snapshot())
    topology = ClusterTopology.model_validate(store.get("ClusterTopology", None, "default"))
    expected = [str(p) for p in get_backend("koordinator").warnings(InferenceGroup.model_validate(g), topology)]
    assert verdict.allowed and expected
    assert list(verdict.warnings) == expected
    assert verdict.response()["response"]["warnings"] == expected
    assert [w.split(": ")[0] for w in expected] == ["spec.roles[0].replicas"]  # minimums before extras


def test_koordinator_refuses_dra_claims_and_the_mnnvl_annotation_with_their_paths():
    store = world(shape="block=1,rack=2,host=4")
    g = _koordinator_group()
    g["spec"]["roles"][0]["template"]["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
    g["spec"]["roles"][1]["template"]["metadata"] = {"annotations": {"grove.io/auto-mnnvl": "enabled"}}
    verdict = review(request(g), store.snapshot())
    assert not verdict.allowed
    assert [p.split(": ")[0] for p in verdict.problems] == [
        "spec.roles[0].template.spec.resourceClaims",
        'spec.roles[1].template.metadata.annotations["grove.io/auto-mnnvl"]',
    ]
    g["spec"]["scheduler"] = {"backend": "kai"}
    assert review(request(g), store.snapshot()).allowed


def test_a_qos_class_for_another_backend_is_refused_at_its_path():
    store = world(shape="block=1,rack=2,host=4")
    g = _koordinator_group()
    g["spec"]["scheduler"] = {"backend": "volcano", "qosClass": "LS", "queue": "team-a"}
    verdict = review(request(g), store.snapshot())
    assert [p.split(": ")[0] for p in verdict.problems] == ["spec.scheduler.qosClass"]


def test_a_change_of_backend_is_admitted_with_a_warning_that_it_is_a_rolling_hand_over():
    store = world(shape="block=1,rack=2,host=4")
    old = group("llama", [role("prefill", 1, 1, gpus=8), role("decode", 1, 1, gpus=8)])
    new = copy.deepcopy(old)
    new["spec"]["scheduler"] = {"backend": "volcano"}
    verdict = review(request(new, "UPDATE", old), store.snapshot())
    handed = [w for w in verdict.warnings if w.startswith("spec.scheduler.backend")]
    assert verdict.allowed and len(handed) == 1
    assert "'native' to 'volcano'" in handed[0] and "rolling update" in handed[0]
    assert not [w for w in review(request(new, "UPDATE", new), store.snapshot()).warnings if w.startswith("spec.scheduler.backend")]


def test_a_groups_metrics_source_is_admitted_and_its_mistakes_refused_as_tandem_validate_refuses_them():
    store = world()
    good = design_group()
    good["spec"]["autoscaling"] = {
        "policy": "FixedRatio", "roles": {"prefill": {"maxReplicas": 8}, "decode": {"maxReplicas": 4}},
        "fixedRatio": {"ratio": {"prefill": 2, "decode": 1}, "decodeTokensPerSecondPerReplica": 3000},
        "metrics": {"source": "prometheus", "names": {"waiting": "tgi_queue_size"}, "pods": {"port": "http"},
                    "prometheus": {"url": "http://prometheus.monitoring:9090", "queries": {"busy": "max by (pod) (x{$selector})"}}},
    }
    assert review(request(good), store.snapshot()).allowed
    bad = copy.deepcopy(good)
    bad["spec"]["autoscaling"]["metrics"] = {"source": "prometheus", "names": {"queue": "q", "running": "9lives"},
                                             "prometheus": {"url": "ftp://prometheus", "queries": {"busy": "max(x)"}}}
    verdict = review(request(bad), store.snapshot())
    assert not verdict.allowed
    assert sorted(p.split(": ")[0] for p in verdict.problems) == [
        "spec.autoscaling.metrics.names.queue", "spec.autoscaling.metrics.names.running",
        "spec.autoscaling.metrics.prometheus.queries.busy", "spec.autoscaling.metrics.prometheus.url"]
