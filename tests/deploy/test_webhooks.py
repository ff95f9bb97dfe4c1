"""Each install's admission webhook reaches the process that serves it: the configuration is
the one that process registers itself (name, webhook, rules, fail closed), its Service
selects that Deployment's pods and routes to the port `--webhook-port` opens, the
certificate directory `--webhook-cert-dir` is the mount of the webhook's own Secret, the
NetworkPolicy lets the API server in on that port, and with cert-manager the Certificate
fills that Secret for the Service's name and its CA is injected into that configuration."""

from __future__ import annotations

import json

import pytest

from support.deploy import needs_kubectl, render
from tandem.operator.process import REGISTRATION as OPERATOR
from tandem.runtime.webhook_config import Registration
from tandem.topology_controller.process import REGISTRATION as TOPOLOGY

NAMESPACE = "tandem-system"
OPERATOR_WEBHOOK = ("tandem-operator", "tandem-webhook-tls", OPERATOR)
TOPOLOGY_WEBHOOK = ("tandem-topology-controller", "tandem-topology-webhook-tls", TOPOLOGY)
INSTALLS = [
    ("deploy", *OPERATOR_WEBHOOK),
    ("deploy/overlays/operator-only", *OPERATOR_WEBHOOK),
    ("deploy/overlays/namespaced", *OPERATOR_WEBHOOK),
    ("deploy/overlays/cert-manager", *OPERATOR_WEBHOOK),
    ("deploy/overlays/topology-only", *TOPOLOGY_WEBHOOK),
    ("deploy/overlays/topology-only-cert-manager", *TOPOLOGY_WEBHOOK),
]


def _one(objects: list[dict], kind: str, name: str) -> dict:
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _flag(args: list[str], flag: str) -> str:
    [value] = [a.split("=", 1)[1] for a in args if a.startswith(f"{flag}=")]
    return value


@needs_kubectl
@pytest.mark.parametrize(("target", "deployment", "secret", "registration"), INSTALLS, ids=[i[0] for i in INSTALLS])
def test_the_webhook_configuration_reaches_the_process_that_serves_it(target: str, deployment: str, secret: str, registration: Registration):
    objects = render(target)
    [config] = [o for o in objects if o["kind"] == "ValidatingWebhookConfiguration"]
    assert config["metadata"]["name"] == registration.name, "one configuration, named as the serving process names its own"
    webhooks = config["webhooks"]
    assert [{k: w[k] for k in ("name", "rules", "matchConditions") if k in w} for w in webhooks] == registration.webhooks(), (
        "the webhooks, their rules and match conditions, as the process registers them")
    for webhook in webhooks:
        assert (webhook["failurePolicy"], webhook["sideEffects"], webhook["timeoutSeconds"], webhook["admissionReviewVersions"]) == ("Fail", "None", 5, ["v1"])
    assert len({json.dumps(w["clientConfig"], sort_keys=True) for w in webhooks}) == 1, "every webhook is served by the same process, at /validate"
    reference = webhooks[0]["clientConfig"]["service"]
    assert reference["namespace"] == NAMESPACE and reference["path"] == "/validate"
    if target == "deploy/overlays/namespaced":
        assert all(w["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "serving"}} for w in webhooks), "each webhook kept to the namespace"

    template = _one(objects, "Deployment", deployment)["spec"]["template"]
    labels, [container] = template["metadata"]["labels"], template["spec"]["containers"]
    service = _one(objects, "Service", reference["name"])
    assert service["metadata"]["namespace"] == NAMESPACE and service["spec"]["selector"].items() <= labels.items(), "the Service selects the serving pods"
    [port] = [p for p in service["spec"]["ports"] if p["port"] == reference["port"]]
    [opened] = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    assert opened["containerPort"] == int(_flag(container["args"], "--webhook-port")), "the Service routes to the port the process listens on"

    cert_dir = _flag(container["args"], "--webhook-cert-dir")
    [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == cert_dir]
    [volume] = [v for v in template["spec"]["volumes"] if v["name"] == mount["name"]]
    assert mount.get("readOnly") and volume["secret"]["secretName"] == secret, "the certificates are the webhook's own Secret"

    policies = [p for p in objects if p["kind"] == "NetworkPolicy" and p["spec"]["podSelector"]["matchLabels"].items() <= labels.items()]
    assert policies and all(
        any(opened["containerPort"] == p["port"] for rule in policy["spec"].get("ingress", []) for p in rule.get("ports", []))
        for policy in policies if "Ingress" in policy["spec"]["policyTypes"]
    ), "the API server may reach the webhook port"

    certificates = [o for o in objects if o["kind"] == "Certificate"]
    if certificates:
        [certificate] = [c for c in certificates if c["spec"]["secretName"] == secret]
        assert f"{reference['name']}.{NAMESPACE}.svc" in certificate["spec"]["dnsNames"], "the certificate names the Service the API server calls"
        assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{certificate['metadata']['name']}"


@needs_kubectl
def test_with_both_controllers_only_the_operator_reviews_topologies():
    """The operator's webhook already reviews ClusterTopologies: deploy/ registers it alone, and
    its topology controller serves no webhook, so no topology write is reviewed twice."""
    objects = render("deploy")
    assert {o["metadata"]["name"] for o in objects if o["kind"] == "ValidatingWebhookConfiguration"} == {"tandem-operator"}
    [container] = _one(objects, "Deployment", "tandem-topology-controller")["spec"]["template"]["spec"]["containers"]
    assert not [a for a in container["args"] if a.startswith("--webhook")] and {p["name"] for p in container["ports"]} == {"metrics", "health"}
    assert "tandem-topology-webhook" not in {o["metadata"]["name"] for o in objects if o["kind"] == "Service"}
