"""One autoscaler per group, at the webhook: an HPA or KEDA ScaledObject on a group with
`spec.autoscaling` is refused, a group gaining `spec.autoscaling` while one targets it is
refused, each naming the other autoscaler in one line; what scales something else, or a
group tandem does not autoscale, is admitted, and so is a `kubectl scale` of units.

The ScaledObjects are shaped as KEDA's ScaledObject specification documents them
(https://keda.sh/docs/latest/reference/scaledobject-spec/): `spec.scaleTargetRef` with
`name` (mandatory, same namespace), `apiVersion` (default apps/v1) and `kind` (default
Deployment); a custom resource is scalable when it has a /scale subresource
(https://keda.sh/docs/2.8/concepts/scaling-deployments/). The examples under
examples/unit-autoscalers are run through the same rule."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml
from hypothesis import given
from hypothesis import strategies as st

from support.controller_world import world
from tandem.operator.admission import review

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PLAIN = yaml.safe_load((EXAMPLES / "llama-70b.yaml").read_text())  # no spec.autoscaling
AUTOSCALED = yaml.safe_load((EXAMPLES / "llama-70b-autoscaled.yaml").read_text())
HPA_EXAMPLE = yaml.safe_load((EXAMPLES / "unit-autoscalers" / "hpa.yaml").read_text())
KEDA_EXAMPLE = yaml.safe_load((EXAMPLES / "unit-autoscalers" / "keda-scaledobject.yaml").read_text())
KINDS = {"HorizontalPodAutoscaler": ("autoscaling", "v2"), "ScaledObject": ("keda.sh", "v1alpha1"), "InferenceGroup": ("tandem.dev", "v1alpha1")}


def request(obj, operation="CREATE", old=None, namespace="serving"):
    group, version = KINDS[obj["kind"]]
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": {"group": group, "version": version, "kind": obj["kind"]}, "operation": operation,
                        "namespace": namespace, "name": obj["metadata"]["name"], "object": obj, "oldObject": old}}
    return json.dumps(body).encode()


def scale_request(namespace, name, replicas):
    """`kubectl scale ig NAME --replicas N`, as the API server sends it to the webhook."""
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name, "namespace": namespace}, "spec": {"replicas": replicas}}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-scale", "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                        "resource": {"group": "tandem.dev", "version": "v1alpha1", "resource": "inferencegroups"},
                        "subResource": "scale", "operation": "UPDATE", "namespace": namespace, "name": name,
                        "object": scale, "oldObject": {**scale, "spec": {"replicas": 1}}}}
    return json.dumps(body).encode()


def hpa(name: str, target: str, api_version: str = "tandem.dev/v1alpha1", kind: str = "InferenceGroup") -> dict:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name, "namespace": "serving"},
            "spec": {"scaleTargetRef": {"apiVersion": api_version, "kind": kind, "name": target}, "minReplicas": 1, "maxReplicas": 4}}


def scaled_object(name: str, target: str, **ref: str) -> dict:
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": name, "namespace": "serving"},
            "spec": {"scaleTargetRef": {"name": target, **ref}, "minReplicaCount": 1, "maxReplicaCount": 4,
                     "triggers": [{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}]}}


def store_with(*objects: dict):
    store = world()
    store.register_kind("HorizontalPodAutoscaler", cluster_scoped=False, status=True)
    store.register_kind("ScaledObject", cluster_scoped=False, status=True)
    for obj in objects:
        store.create(copy.deepcopy(obj))
    return store


def named(group: dict, name: str) -> dict:
    out = copy.deepcopy(group)
    out["metadata"]["name"] = name
    return out


def test_an_hpa_on_a_group_tandem_autoscales_is_refused_naming_the_group_and_one_on_anything_else_is_admitted():
    store = store_with(named(PLAIN, "plain"), named(AUTOSCALED, "chat"))
    verdict = review(request(hpa("units", "chat")), store.snapshot())
    assert not verdict.allowed
    assert verdict.problems == (
        'spec.scaleTargetRef: InferenceGroup "chat" is scaled by tandem\'s own autoscaler (its spec.autoscaling sizes each role); '
        "one autoscaler per group: remove spec.autoscaling from the group first, or leave its scaling to tandem",)
    assert review(request(hpa("units", "plain")), store.snapshot()).allowed
    assert review(request(hpa("web", "chat", "apps/v1", "Deployment")), store.snapshot()).allowed, "a Deployment of the same name"
    assert review(request(hpa("later", "not-yet")), store.snapshot()).allowed, "no such group yet: the group is refused when it comes"
    other = {**hpa("elsewhere", "chat"), "metadata": {"name": "elsewhere", "namespace": "other"}}
    assert review(request(other, namespace="other"), store.snapshot()).allowed, "an HPA scales only in its own namespace"


def test_an_hpa_already_on_the_group_is_not_refused_again_but_one_turning_to_it_is():
    store = store_with(named(AUTOSCALED, "chat"), named(PLAIN, "plain"))
    before = hpa("units", "chat")
    assert review(request({**before, "spec": {**before["spec"], "maxReplicas": 8}}, "UPDATE", before), store.snapshot()).allowed, (
        "a pairing made before the webhook (KEDA updating its HPA): the autoscaler pass reports it; the update makes nothing worse")
    moved = hpa("units", "chat")
    assert not review(request(moved, "UPDATE", hpa("units", "plain")), store.snapshot()).allowed


def test_a_keda_scaledobject_on_a_group_tandem_autoscales_is_refused():
    ref = {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup"}
    store = store_with(named(AUTOSCALED, "chat"), named(PLAIN, "plain"))
    refused = review(request(scaled_object("queue", "chat", **ref)), store.snapshot())
    assert not refused.allowed and refused.problems[0].startswith('spec.scaleTargetRef: InferenceGroup "chat" is scaled by tandem')
    assert review(request(scaled_object("queue", "plain", **ref)), store.snapshot()).allowed
    assert review(request(scaled_object("web", "chat")), store.snapshot()).allowed, "KEDA's defaults: apps/v1 Deployment chat, not the group"


def test_a_group_gaining_spec_autoscaling_while_an_hpa_or_scaledobject_targets_it_is_refused_naming_each():
    store = store_with(named(PLAIN, "chat"), hpa("keda-hpa-queue", "chat"),
                       scaled_object("queue", "chat", apiVersion="tandem.dev/v1alpha1", kind="InferenceGroup"), hpa("other", "elsewhere"))
    gaining = named(PLAIN, "chat")
    gaining["spec"]["autoscaling"] = copy.deepcopy(AUTOSCALED["spec"]["autoscaling"])
    gaining["spec"]["roles"] = copy.deepcopy(AUTOSCALED["spec"]["roles"])
    verdict = review(request(gaining, "UPDATE", named(PLAIN, "chat")), store.snapshot())
    assert not verdict.allowed
    assert [p for p in verdict.problems if p.startswith("spec.autoscaling")] == [
        'spec.autoscaling: the group\'s units are scaled by HorizontalPodAutoscaler "keda-hpa-queue", ScaledObject "queue" '
        "(spec.scaleTargetRef); one autoscaler per group: delete them first, or leave spec.autoscaling out"]
    created = named(AUTOSCALED, "chat")
    del created["metadata"]["namespace"]  # a create names its namespace in the request
    refused = review(request(created), store.snapshot())
    assert not refused.allowed and any(p.startswith("spec.autoscaling: the group's units are scaled by") for p in refused.problems)


def test_a_group_keeping_or_dropping_spec_autoscaling_and_a_scale_of_its_units_are_admitted():
    """A group made before the webhook with both: edits that leave spec.autoscaling as it was
    are not refused on that account (the condition says what to fix), nor is removing it, nor a
    `kubectl scale` (units, which tandem's policies never write)."""
    chat = named(AUTOSCALED, "chat")
    store = store_with(chat, hpa("units", "chat"))
    relabelled = copy.deepcopy(chat)
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert review(request(relabelled, "UPDATE", chat), store.snapshot()).allowed
    dropped = copy.deepcopy(chat)
    del dropped["spec"]["autoscaling"]
    assert review(request(dropped, "UPDATE", chat), store.snapshot()).allowed
    changed = copy.deepcopy(chat)
    changed["spec"]["autoscaling"]["intervalSeconds"] = 30
    assert not review(request(changed, "UPDATE", chat), store.snapshot()).allowed, "changing tandem's policy while an HPA scales the group"
    assert review(scale_request("serving", "chat", 2), store.snapshot()).allowed


def test_the_examples_are_admitted_on_a_plain_group_and_refused_on_an_autoscaled_one():
    for example in (HPA_EXAMPLE, KEDA_EXAMPLE):
        assert example["spec"]["scaleTargetRef"]["name"] == PLAIN["metadata"]["name"]
        assert review(request(example), store_with(PLAIN).snapshot()).allowed, example["kind"]
        autoscaled = named(AUTOSCALED, PLAIN["metadata"]["name"])
        verdict = review(request(example), store_with(autoscaled).snapshot())
        assert not verdict.allowed and len(verdict.problems) == 1 and verdict.problems[0].startswith("spec.scaleTargetRef: "), example["kind"]
        gaining = review(request(autoscaled), store_with(example).snapshot())
        assert not gaining.allowed and f'{example["kind"]} "{example["metadata"]["name"]}"' in " ".join(gaining.problems)


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=12), lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)
TARGET_FIELD = st.one_of(JSONISH, st.sampled_from(["tandem.dev/v1alpha1", "tandem.dev/v1", "tandem.dev", "apps/v1", "InferenceGroup", "Deployment", "chat", "plain"]))


@given(kind=st.sampled_from(["HorizontalPodAutoscaler", "ScaledObject"]),
       ref=st.one_of(JSONISH, st.fixed_dictionaries({}, optional={"apiVersion": TARGET_FIELD, "kind": TARGET_FIELD, "name": TARGET_FIELD})))
def test_any_scale_target_gets_a_verdict_and_only_an_autoscaled_group_is_refused(kind, ref):
    """Whatever `scaleTargetRef` holds, the review answers; it refuses exactly when the
    reference names (in tandem.dev, kind InferenceGroup) the group tandem autoscales."""
    store = STORE_FOR_PROPERTIES
    obj = {**(hpa("x", "chat") if kind == "HorizontalPodAutoscaler" else scaled_object("x", "chat")), "spec": {"scaleTargetRef": ref}}
    verdict = review(request(obj), store.snapshot())
    names_chat = (isinstance(ref, dict) and ref.get("name") == "chat" and ref.get("kind") == "InferenceGroup"
                  and isinstance(ref.get("apiVersion"), str) and ref["apiVersion"].startswith("tandem.dev/"))
    assert verdict.allowed is not names_chat


STORE_FOR_PROPERTIES = store_with(named(PLAIN, "plain"), named(AUTOSCALED, "chat"))
