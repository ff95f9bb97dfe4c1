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
         "PriorityClass", "Role", "RoleBinding", "Service", "ServiceAccount", "ValidatingWebhookConfiguration"]
    )
    deployment = _deployment(objects, "tandem-operator")
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


def _deployment(objects: list[dict], name: str) -> dict:
    return next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == name)


def _pod_spec(objects: list[dict], name: str = "tandem-operator") -> dict:
    return _deployment(objects, name)["spec"]["template"]


TOPOLOGY_ONLY = ("deploy/overlays/topology-only", "deploy/overlays/topology-only-cert-manager")
WITH_OPERATOR = [t for t in TARGETS if t not in ("deploy/overlays/local", *TOPOLOGY_ONLY)]
WITH_TOPOLOGY = [t for t in TARGETS if t not in ("deploy/overlays/local", "deploy/overlays/operator-only")]


@needs_kubectl
@pytest.mark.parametrize(("target", "deployment"), [(t, "tandem-operator") for t in WITH_OPERATOR] + [(t, "tandem-topology-controller") for t in TOPOLOGY_ONLY])
def test_the_webhooks_pods_are_scheduled_first(target, deployment):
    """A fail-closed webhook blocks every write of tandem's kinds while none of its pods runs:
    they carry a priority class the install ships (above ordinary workloads, below system-*)."""
    objects = render(target)
    name = _pod_spec(objects, deployment)["spec"]["priorityClassName"]
    shipped = next(o for o in objects if o["kind"] == "PriorityClass" and o["metadata"]["name"] == name)
    assert 0 < shipped["value"] <= 1_000_000_000 and not shipped.get("globalDefault"), "a user class: at most 1e9, never the default"


@needs_kubectl
@pytest.mark.parametrize("target", [t for t in TARGETS if t != "deploy/overlays/local"])
def test_the_two_replicas_never_share_a_node(target):
    deployments = [o for o in render(target) if o["kind"] == "Deployment"]
    assert deployments
    for deployment in deployments:
        _spread_hard_across_nodes(deployment["spec"]["template"])


def _spread_hard_across_nodes(template: dict) -> None:
    labels, spec = template["metadata"]["labels"], template["spec"]
    spread = [c for c in spec.get("topologySpreadConstraints", []) if c["topologyKey"] == "kubernetes.io/hostname"]
    assert spread, "spread across nodes"
    constraint = spread[0]
    assert constraint["whenUnsatisfiable"] == "DoNotSchedule" and constraint["maxSkew"] == 1, "hard, one apart at most"
    assert constraint.get("minDomains", 1) >= 2, "two replicas on one node is refused even when only one node is eligible"
    assert constraint["labelSelector"]["matchLabels"].items() <= labels.items(), "the constraint counts these pods"


@needs_kubectl
@pytest.mark.parametrize("name", ["tandem-operator", "tandem-topology-controller"])
def test_a_startup_probe_guards_the_first_list(name):
    container = _pod_spec(render("deploy"), name)["spec"]["containers"][0]
    probe = container["startupProbe"]
    assert probe["httpGet"] == container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert probe["periodSeconds"] * probe["failureThreshold"] >= 30, "time to connect and list a large cluster before liveness counts"
    assert "initialDelaySeconds" not in container["livenessProbe"], "the startup probe replaces a guessed delay"


@needs_kubectl
def test_the_namespaced_overlay_writes_only_in_its_namespace():
    objects = render("deploy/overlays/namespaced")
    args = _pod_spec(objects)["spec"]["containers"][0]["args"]
    namespaces = [a.split("=", 1)[1] for a in args if a.startswith("--namespace=")]
    assert namespaces == ["serving"]
    cluster_role = next(o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "tandem-operator")
    assert {v for rule in cluster_role["rules"] for v in rule["verbs"]} == {"list", "watch"}, "cluster-wide: reads only"
    role = next(o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == "tandem-operator")
    assert role["metadata"]["namespace"] == "serving"
    binding = next(o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["name"] == "tandem-operator")
    assert binding["metadata"]["namespace"] == "serving" and binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tandem-operator"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "tandem-operator", "namespace": "tandem-system"}]
    assert any(o["kind"] == "Namespace" and o["metadata"]["name"] == "serving" for o in objects)
    webhook = next(o for o in objects if o["kind"] == "ValidatingWebhookConfiguration")["webhooks"][0]
    assert webhook["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "serving"}}


@needs_kubectl
def test_the_cert_manager_overlay_injects_the_ca():
    objects = render("deploy/overlays/cert-manager")
    webhook = next(o for o in objects if o["kind"] == "ValidatingWebhookConfiguration")
    assert webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "tandem-system/tandem-webhook"
    certificate = next(o for o in objects if o["kind"] == "Certificate")
    assert certificate["spec"]["secretName"] == "tandem-webhook-tls"
    assert "tandem-webhook.tandem-system.svc" in certificate["spec"]["dnsNames"]


@needs_kubectl
def test_the_topology_only_cert_manager_overlay_injects_the_ca_into_the_topology_controllers_webhook():
    objects = render("deploy/overlays/topology-only-cert-manager")
    [webhook] = [o for o in objects if o["kind"] == "ValidatingWebhookConfiguration"]
    assert webhook["metadata"]["name"] == "tandem-topology-controller"
    assert webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "tandem-system/tandem-topology-webhook"
    [certificate] = [o for o in objects if o["kind"] == "Certificate"]
    assert certificate["metadata"]["name"] == "tandem-topology-webhook" and certificate["spec"]["secretName"] == "tandem-topology-webhook-tls"
    assert "tandem-topology-webhook.tandem-system.svc" in certificate["spec"]["dnsNames"]
