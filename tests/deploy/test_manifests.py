"""deploy/: the kustomize base and overlays render with the real kubectl, every object
validates strictly against the Kubernetes schemas (or tandem's own CRDs), and the
Deployment runs as a well-kept operator should."""

from __future__ import annotations

import pytest

from support.deploy import TARGETS, needs_kubectl, render

# Kinds whose schemas are not bundled with kubernetes-validate: cert-manager's own CRDs.
FOREIGN = {("cert-manager.io/v1", "Issuer"), ("cert-manager.io/v1", "Certificate")}


@needs_kubectl
@pytest.mark.parametrize("target", TARGETS)
def test_every_rendered_object_validates(target):
    from backends.schemas import schema_problems

    objects = render(target)
    assert objects
    for obj in objects:
        if (obj["apiVersion"], obj["kind"]) in FOREIGN:
            continue
        problems = schema_problems(obj)
        assert not problems, f"{target}: {problems[:3]}"


@needs_kubectl
def test_the_base_installs_what_an_operator_needs():
    objects = render("deploy")
    kinds = sorted({o["kind"] for o in objects})
    assert kinds == sorted(
        ["ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "Deployment", "Namespace", "NetworkPolicy", "PodDisruptionBudget",
         "Role", "RoleBinding", "Service", "ServiceAccount", "ValidatingWebhookConfiguration"]
    )
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2 and "--leader-elect" in spec["containers"][0]["args"]
    pod_security = spec["securityContext"]
    assert pod_security["runAsNonRoot"] and pod_security["seccompProfile"] == {"type": "RuntimeDefault"}
    container = spec["containers"][0]["securityContext"]
    assert container == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "privileged": False, "capabilities": {"drop": ["ALL"]}}
    resources = spec["containers"][0]["resources"]
    assert resources["requests"] and resources["limits"]
    assert spec["containers"][0]["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert spec["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/readyz"
    webhook = next(o for o in objects if o["kind"] == "ValidatingWebhookConfiguration")["webhooks"][0]
    assert webhook["failurePolicy"] == "Fail" and webhook["timeoutSeconds"] <= 10
    assert all(o["metadata"].get("namespace") in (None, "tandem-system") for o in objects)


@needs_kubectl
def test_the_cert_manager_overlay_injects_the_ca():
    objects = render("deploy/overlays/cert-manager")
    webhook = next(o for o in objects if o["kind"] == "ValidatingWebhookConfiguration")
    assert webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "tandem-system/tandem-webhook"
    certificate = next(o for o in objects if o["kind"] == "Certificate")
    assert certificate["spec"]["secretName"] == "tandem-webhook-tls"
    assert "tandem-webhook.tandem-system.svc" in certificate["spec"]["dnsNames"]
