"""Validating admission webhooks, called by the local API server over HTTPS: what a webhook is
sent, how its answers (allowed, denied, warnings) and failures (timeout, refused connection,
untrusted certificate) come back to the client under each failurePolicy, which writes go to
which webhook, and that the server's lock is not held while a webhook thinks."""

from __future__ import annotations

import threading
import time
from typing import Any, Iterator

import pytest

from apiserver.helpers import IG, NS, Client, group
from apiserver.webhook_server import Webhook, configuration, webhook

VWCS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
GROUPS = f"{IG}/namespaces/{NS}/inferencegroups"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@pytest.fixture
def hook() -> Iterator[Webhook]:
    with Webhook() as serving:
        yield serving


def register(client: Client, *hooks: dict[str, Any], name: str = "test") -> None:
    reply = client.post(VWCS, configuration(name, list(hooks)))
    assert reply.code == 201, reply.body


def deny(code: int | None = 422, message: str = "spec.replicas: too many", **more: Any):
    status = {"message": message, **more} if code is None else {"code": code, "reason": "Invalid", "message": message, **more}
    return lambda request: {"allowed": False, "status": status}


# ----------------------------------------------------------------------------- answers


def test_an_allowed_write_is_stored_and_the_webhook_sees_an_admission_review(client, hook):
    register(client, webhook("check.test.dev", hook.url, hook.ca_bundle))
    assert client.post(f"{GROUPS}?fieldManager=kubectl", group()).code == 201
    [request] = hook.requests
    assert request["path"] == "/validate?timeout=10s"
    assert request["operation"] == "CREATE" and request["name"] == "g" and request["namespace"] == NS
    assert request["kind"] == request["requestKind"] == {"group": "tandem.dev", "version": "v1alpha1", "kind": "InferenceGroup"}
    assert request["resource"] == {"group": "tandem.dev", "version": "v1alpha1", "resource": "inferencegroups"}
    assert request["userInfo"]["username"] == "tandem" and request["dryRun"] is False and request["oldObject"] is None
    assert request["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl"}
    assert request["object"]["spec"]["roles"][0]["podsPerReplica"] == 1, "the object as it will be stored: defaulted"
    assert "subResource" not in request and len(request["uid"]) == 36


def test_a_denial_is_the_webhooks_status_and_nothing_is_stored(client, hook):
    register(client, webhook("check.test.dev", hook.url, hook.ca_bundle))
    hook.answer = deny(422, "spec.replicas: too many\nspec.roles[0].name: taken")
    reply = client.post(GROUPS, group())
    assert reply.code == 422 and reply.body["reason"] == "Invalid"
    assert reply.body["message"] == 'admission webhook "check.test.dev" denied the request: spec.replicas: too many\nspec.roles[0].name: taken'
    assert client.get(f"{GROUPS}/g").code == 404


def test_a_denial_without_a_code_is_400_and_without_a_message_says_so(client, hook):
    register(client, webhook("check.test.dev", hook.url, hook.ca_bundle))
    hook.answer = deny(None, "no")
    reply = client.post(GROUPS, group())
    assert reply.code == 400 and reply.body["message"] == 'admission webhook "check.test.dev" denied the request: no'
    hook.answer = lambda request: {"allowed": False}
    assert client.post(GROUPS, group()).body["message"] == 'admission webhook "check.test.dev" denied the request without explanation'


def test_warnings_go_back_as_warning_headers_allowed_or_denied(client, hook):
    register(client, webhook("check.test.dev", hook.url, hook.ca_bundle))
    hook.answer = lambda request: {"allowed": True, "warnings": ["it will never fit × 2", "second\nline"]}
    reply = client.post(GROUPS, group())
    assert reply.code == 201 and reply.warnings == ["it will never fit × 2", "second line"]
    hook.answer = lambda request: {"allowed": False, "status": {"code": 403, "message": "no"}, "warnings": ["why"]}
    reply = client.post(GROUPS, group("h"))
    assert reply.code == 403 and reply.warnings == ["why"]


def test_several_webhooks_are_all_called_and_the_first_refusal_in_order_answers(client):
    with Webhook() as first, Webhook(deny(403, "second says no")) as second, Webhook(deny(422, "third says no")) as third:
        register(client, *(webhook(f"{n}.test.dev", h.url, h.ca_bundle) for n, h in (("a", first), ("b", second), ("c", third))))
        reply = client.post(GROUPS, group())
        assert reply.code == 403 and reply.body["message"] == 'admission webhook "b.test.dev" denied the request: second says no'
        assert [len(h.requests) for h in (first, second, third)] == [1, 1, 1]


# ----------------------------------------------------------------------------- failures


def test_a_webhook_slower_than_its_timeout_fails_closed_or_open(client, hook):
    hook.answer = lambda request: (time.sleep(1.5), {"allowed": True})[1]
    register(client, webhook("slow.test.dev", hook.url, hook.ca_bundle, timeoutSeconds=1))
    started = time.monotonic()
    reply = client.post(GROUPS, group())
    assert time.monotonic() - started < 1.4
    assert reply.code == 500 and reply.body["reason"] == "InternalError"
    assert reply.body["message"] == (f'Internal error occurred: failed calling webhook "slow.test.dev": failed to call webhook: '
                                     f'Post "{hook.url}?timeout=1s": context deadline exceeded')
    assert client.get(f"{GROUPS}/g").code == 404
    assert client.patch(f"{VWCS}/test", {"webhooks": [webhook("slow.test.dev", hook.url, hook.ca_bundle, timeoutSeconds=1,
                                                              failurePolicy="Ignore")]}).code == 200
    assert client.post(GROUPS, group()).code == 201


def test_a_refused_connection_fails_closed_naming_the_webhook_or_open_with_ignore(client, hook):
    gone = "https://127.0.0.1:9/validate"
    register(client, webhook("gone.test.dev", gone, hook.ca_bundle))
    reply = client.post(GROUPS, group())
    assert reply.code == 500 and reply.body["message"] == ('Internal error occurred: failed calling webhook "gone.test.dev": failed to call webhook: '
                                                          'Post "https://127.0.0.1:9/validate?timeout=10s": dial tcp 127.0.0.1:9: connect: connection refused')
    assert reply.body["details"]["causes"] == [{"message": reply.body["message"].removeprefix("Internal error occurred: ")}]
    assert client.get(f"{GROUPS}/g").code == 404
    register(client, webhook("gone.test.dev", gone, hook.ca_bundle, failurePolicy="Ignore"), name="test2")
    assert client.delete(f"{VWCS}/test").code == 200
    assert client.post(GROUPS, group()).code == 201


def test_a_certificate_the_ca_bundle_does_not_vouch_for_is_a_failure_to_call(client, hook):
    with Webhook() as other:
        register(client, webhook("check.test.dev", hook.url, other.ca_bundle))
        reply = client.post(GROUPS, group())
    assert reply.code == 500 and reply.body["message"].endswith("tls: failed to verify certificate: x509: certificate signed by unknown authority")
    assert hook.requests == []


def test_a_service_reference_cannot_be_routed_and_fails_closed(client):
    register(client, {**webhook("svc.test.dev", "", ""), "clientConfig": {"service": {"namespace": "tandem-system", "name": "webhook"}}})
    reply = client.post(GROUPS, group())
    assert reply.code == 500 and 'failed calling webhook "svc.test.dev"' in reply.body["message"]
    assert 'service "tandem-system/webhook" cannot be reached from the local API server' in reply.body["message"]


def test_an_answer_for_another_request_is_a_failure_to_call(client, hook):
    register(client, webhook("check.test.dev", hook.url, hook.ca_bundle))
    hook.answer = lambda request: {"uid": "someone-else", "allowed": True}
    reply = client.post(GROUPS, group())
    assert reply.code == 500 and 'received invalid webhook response: expected response.uid="' in reply.body["message"]


# ----------------------------------------------------------------------------- matching


def test_only_webhooks_whose_rules_match_are_called(client, hook):
    register(client,
             webhook("configmaps.test.dev", hook.url, hook.ca_bundle, groups=("",), resources=("configmaps",)),
             webhook("status.test.dev", hook.url, hook.ca_bundle, resources=("inferencegroups/status",), operations=("*",)),
             webhook("deletes.test.dev", hook.url, hook.ca_bundle, operations=("DELETE",)),
             webhook("cluster.test.dev", hook.url, hook.ca_bundle, resources=("*",), scope="Cluster"))
    assert client.post(GROUPS, group()).code == 201
    assert hook.requests == [], "a webhook for another resource, operation, subresource or scope is not called"
    client.patch(f"{GROUPS}/g/status", {"status": {"observedGeneration": 1}})
    client.post(f"/api/v1/namespaces/{NS}/configmaps", {"metadata": {"name": "c"}, "data": {"a": "b"}})
    client.delete(f"{GROUPS}/g")
    client.post("/apis/tandem.dev/v1alpha1/clustertopologies", {"metadata": {"name": "t"}, "spec": {"levels": [{"name": "rack", "nodeLabel": "r"}]}})
    assert hook.operations() == [("UPDATE", "inferencegroups/status"), ("CREATE", "configmaps"), ("DELETE", "inferencegroups"),
                                 ("CREATE", "clustertopologies")]
    deleted = hook.requests[2]
    assert deleted["object"] is None and deleted["oldObject"]["metadata"]["name"] == "g" and deleted["options"]["kind"] == "DeleteOptions"


def test_namespace_and_object_selectors_pick_what_is_sent(client, hook):
    client.post("/api/v1/namespaces", {"metadata": {"name": "checked", "labels": {"admission": "on"}}})
    register(client, webhook("ns.test.dev", hook.url, hook.ca_bundle, groups=("",), resources=("configmaps",),
                             namespaceSelector={"matchLabels": {"admission": "on"}},
                             objectSelector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]}))
    for namespace, name, labels in (("checked", "a", {}), ("checked", "b", {"skip": "yes"}), (NS, "c", {})):
        client.post(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": name, "labels": labels}})
    assert [r["name"] for r in hook.requests] == ["a"]


def test_match_conditions_pick_what_is_sent_and_one_that_cannot_be_evaluated_fails_closed_or_open(client, hook):
    """As the operator's second webhook uses them: only HPAs whose scaleTargetRef names a
    tandem.dev kind are sent; an expression that errors refuses the write (Fail) or skips (Ignore)."""
    targets_tandem = {"name": "targets-tandem", "expression": "has(object.spec) && has(object.spec.scaleTargetRef) && "
                      "has(object.spec.scaleTargetRef.apiVersion) && object.spec.scaleTargetRef.apiVersion.startsWith('tandem.dev/')"}
    register(client, webhook("hpa.test.dev", hook.url, hook.ca_bundle, groups=("autoscaling",), resources=("horizontalpodautoscalers",),
                             matchConditions=[targets_tandem, {"name": "creates", "expression": "request.operation == 'CREATE'"}]))
    hpas = f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers"

    def hpa(name: str, api_version: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"scaleTargetRef": {"apiVersion": api_version, "kind": "X", "name": "x"}, "maxReplicas": 2}}

    assert client.post(hpas, hpa("web", "apps/v1")).code == 201
    assert client.post(hpas, hpa("units", "tandem.dev/v1alpha1")).code == 201
    assert client.patch(f"{hpas}/units", {"spec": {"maxReplicas": 3}}).code == 200, "an update: the second condition does not hold"
    assert [r["name"] for r in hook.requests] == ["units"], "only the write every condition holds for"

    register(client, webhook("broken.test.dev", hook.url, hook.ca_bundle, groups=("autoscaling",), resources=("horizontalpodautoscalers",),
                             matchConditions=[{"name": "broken", "expression": "object.nosuch.field == 1"}]), name="broken")
    refused = client.post(hpas, hpa("other", "apps/v1"))
    assert refused.code == 500 and 'failed calling webhook "broken.test.dev": failed to evaluate match condition broken:' in refused.body["message"]
    client.delete(f"{VWCS}/broken")
    register(client, webhook("lenient.test.dev", hook.url, hook.ca_bundle, groups=("autoscaling",), resources=("horizontalpodautoscalers",),
                             failurePolicy="Ignore", matchConditions=[{"name": "broken", "expression": "object.nosuch.field == 1"}]), name="lenient")
    assert client.post(hpas, hpa("other", "apps/v1")).code == 201 and [r["name"] for r in hook.requests] == ["units"]


def test_a_false_match_condition_skips_the_webhook_even_beside_one_that_cannot_be_evaluated(client, hook):
    """Kubernetes' order: any condition false skips the webhook; only when none is false does
    an error go to the failurePolicy (here Fail), whichever of the two comes first."""
    broken = {"name": "broken", "expression": "object.nosuch.field == 1"}
    tandem_only = {"name": "targets-tandem", "expression": "object.spec.scaleTargetRef.apiVersion.startsWith('tandem.dev/')"}
    register(client, webhook("hpa.test.dev", hook.url, hook.ca_bundle, groups=("autoscaling",), resources=("horizontalpodautoscalers",),
                             matchConditions=[broken, tandem_only]))
    hpas = f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers"

    def hpa(name: str, api_version: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"scaleTargetRef": {"apiVersion": api_version, "kind": "X", "name": "x"}, "maxReplicas": 2}}

    assert client.post(hpas, hpa("web", "apps/v1")).code == 201, "targets-tandem is false: skipped, the error beside it does not matter"
    refused = client.post(hpas, hpa("units", "tandem.dev/v1alpha1"))
    assert refused.code == 500 and "failed to evaluate match condition broken:" in refused.body["message"], "none false: the error fails closed"
    assert hook.requests == []


def test_match_conditions_see_the_request_as_kubernetes_gives_it(client, hook):
    """`request` holds what the webhook is sent but its uid and objects: userInfo (Kubernetes'
    own documented example excludes the kubelet's writes by its groups), requestKind and
    requestResource; an empty subresource is left out, as the real server's JSON omits it."""
    conditions = [{"name": "not-kubelet", "expression": "!('system:nodes' in request.userInfo.groups)"},
                  {"name": "asked-at-v2", "expression": "request.requestResource.version == 'v2' && request.requestKind.kind == 'HorizontalPodAutoscaler'"},
                  {"name": "no-subresource", "expression": "!has(request.subResource) && request.namespace == '" + NS + "'"}]
    register(client, webhook("hpa.test.dev", hook.url, hook.ca_bundle, groups=("autoscaling",), resources=("horizontalpodautoscalers",),
                             matchConditions=conditions))
    body = {"metadata": {"name": "units"}, "spec": {"scaleTargetRef": {"apiVersion": "tandem.dev/v1alpha1", "kind": "X", "name": "x"}, "maxReplicas": 2}}
    assert client.post(f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers", body).code == 201
    assert [r["name"] for r in hook.requests] == ["units"], "every condition evaluated and true"


def test_an_update_shows_the_old_object_and_a_scale_shows_scales(client, hook):
    assert client.post(GROUPS, group()).code == 201
    register(client, webhook("check.test.dev", hook.url, hook.ca_bundle, resources=("inferencegroups", "inferencegroups/scale")))
    assert client.patch(f"{GROUPS}/g", {"spec": {"replicas": 2}}).code == 200
    assert client.patch(f"{GROUPS}/g/scale", {"spec": {"replicas": 3}}).code == 200
    update, scale = hook.requests
    assert update["operation"] == "UPDATE" and update["options"]["kind"] == "UpdateOptions"
    assert (update["oldObject"]["spec"]["replicas"], update["object"]["spec"]["replicas"]) == (1, 2)
    assert scale["subResource"] == "scale" and scale["kind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert (scale["oldObject"]["spec"]["replicas"], scale["object"]["spec"]["replicas"]) == (2, 3)


def test_a_dry_run_is_reviewed_as_one_and_not_stored(client, hook):
    register(client, webhook("check.test.dev", hook.url, hook.ca_bundle, sideEffects="NoneOnDryRun"))
    assert client.post(f"{GROUPS}?dryRun=All", group()).code == 201
    assert hook.requests[0]["dryRun"] is True and hook.requests[0]["options"]["dryRun"] == ["All"]
    assert client.get(f"{GROUPS}/g").code == 404


def test_equivalent_match_policy_sends_the_object_at_the_version_the_webhook_names(client, hook):
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "gizmos.example.com"},
           "spec": {"group": "example.com", "scope": "Cluster", "names": {"kind": "Gizmo", "plural": "gizmos"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema},
                                 {"name": "v2", "served": True, "storage": False, "schema": schema}]}}
    assert client.post(CRDS, crd).code == 201
    register(client, webhook("v1.test.dev", hook.url, hook.ca_bundle, groups=("example.com",), versions=("v1",), resources=("gizmos",)),
             webhook("exact.test.dev", hook.url, hook.ca_bundle, groups=("example.com",), versions=("v1",), resources=("gizmos",),
                     matchPolicy="Exact"))
    assert client.post("/apis/example.com/v2/gizmos", {"metadata": {"name": "z"}, "spec": {}}).code == 201
    [request] = hook.requests
    assert request["resource"]["version"] == "v1" and request["requestResource"]["version"] == "v2"
    assert request["kind"]["version"] == "v1" and request["object"]["apiVersion"] == "example.com/v1"


def test_webhook_configurations_are_never_sent_to_webhooks(client, hook):
    hook.answer = deny(403, "everything is refused")
    register(client, webhook("all.test.dev", hook.url, hook.ca_bundle, groups=("*",), versions=("*",), resources=("*",), operations=("*",)))
    assert client.post(f"/api/v1/namespaces/{NS}/configmaps", {"metadata": {"name": "c"}}).code == 403
    assert client.delete(f"{VWCS}/test").code == 200, "a webhook that refuses everything can still be removed"
    assert hook.operations() == [("CREATE", "configmaps")]


def test_webhook_configurations_are_checked_and_defaulted_as_the_real_server_does(client, hook):
    bad = webhook("short", "http://127.0.0.1/validate", hook.ca_bundle, timeoutSeconds=31)
    del bad["sideEffects"]
    reply = client.post(VWCS, configuration("bad", [bad]))
    assert reply.code == 422 and [c["field"] for c in reply.body["details"]["causes"]] == [
        "webhooks[0].name", "webhooks[0].clientConfig.url", "webhooks[0].sideEffects", "webhooks[0].timeoutSeconds"]
    register(client, webhook("check.test.dev", hook.url, hook.ca_bundle))
    stored = client.get(f"{VWCS}/test").body["webhooks"][0]
    assert (stored["failurePolicy"], stored["matchPolicy"], stored["timeoutSeconds"], stored["rules"][0]["scope"]) == ("Fail", "Equivalent", 10, "*")
    assert stored["namespaceSelector"] == stored["objectSelector"] == {}


# ----------------------------------------------------------------------------- no lock held


def test_the_server_answers_other_requests_while_a_webhook_thinks(client, hook, server):
    """A webhook that reads this server before answering (as tandem's operator reads its
    informers) gets its answer: the write's lock is not held during the call."""
    seen: list[int] = []

    def reads_the_server(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(Client(server.url).get(f"{GROUPS}").code)
        return {"allowed": True}

    hook.answer = reads_the_server
    register(client, webhook("reader.test.dev", hook.url, hook.ca_bundle, timeoutSeconds=5))
    assert client.post(GROUPS, group()).code == 201 and seen == [200]


def test_a_watch_sees_other_writes_while_a_webhook_is_slow(client, hook):
    release = threading.Event()
    hook.answer = lambda request: (release.wait(5), {"allowed": True})[1]
    register(client, webhook("slow.test.dev", hook.url, hook.ca_bundle, timeoutSeconds=10))
    outcome: list[int] = []
    writer = threading.Thread(target=lambda: outcome.append(client.post(GROUPS, group()).code))
    writer.start()
    while not hook.requests:
        time.sleep(0.01)
    assert client.post(f"/api/v1/namespaces/{NS}/configmaps", {"metadata": {"name": "meanwhile"}}).code == 201
    release.set()
    writer.join(10)
    assert outcome == [201]


def test_an_object_changed_while_its_webhook_answered_is_updated_again_or_conflicts(client, hook, server):
    """As GuaranteedUpdate: without a resourceVersion the update is applied to the new object
    (and reviewed again); with one, the precondition fails with 409."""
    assert client.post(GROUPS, group()).code == 201
    interfered: list[int] = []

    def interferes_once(request: dict[str, Any]) -> dict[str, Any]:
        if request["operation"] == "UPDATE" and not interfered:
            interfered.append(0)  # the interfering patch is reviewed too: only once
            labels = {"meanwhile": str(len(hook.requests))}
            interfered[0] = Client(server.url).patch(f"{GROUPS}/g", {"metadata": {"labels": labels}}).code
        return {"allowed": True}

    hook.answer = interferes_once
    register(client, webhook("check.test.dev", hook.url, hook.ca_bundle))
    assert client.patch(f"{GROUPS}/g", {"spec": {"replicas": 2}}).code == 200
    stored = client.get(f"{GROUPS}/g").body
    assert interfered == [200] and stored["metadata"]["labels"] == {"meanwhile": "1"} and stored["spec"]["replicas"] == 2
    assert len(hook.requests) == 3, "the patch, the interfering patch, the patch again"

    interfered.clear()
    current = client.get(f"{GROUPS}/g").body
    reply = client.put(f"{GROUPS}/g", {**current, "spec": {**current["spec"], "replicas": 3}})
    assert reply.code == 409 and "the object has been modified" in reply.body["message"]


def test_a_binding_is_reviewed_as_a_create_of_pods_binding(client, hook):
    client.post(f"/api/v1/namespaces/{NS}/pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    register(client, webhook("bind.test.dev", hook.url, hook.ca_bundle, groups=("",), resources=("pods/binding",), operations=("CREATE",)))
    assert client.post(f"/api/v1/namespaces/{NS}/pods/p/binding", {"target": {"name": "n-000"}}).code == 201
    [request] = hook.requests
    assert (request["subResource"], request["name"], request["kind"]["kind"], request["object"]["kind"]) == ("binding", "p", "Binding", "Binding")
    assert client.get(f"/api/v1/namespaces/{NS}/pods/p").body["spec"]["nodeName"] == "n-000"
