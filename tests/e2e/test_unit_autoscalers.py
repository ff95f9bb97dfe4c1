"""An HPA on a group's units, as a cluster runs it: `tandem apiserver` (which serves
autoscaling/v2 HorizontalPodAutoscalers), `tandem operator --webhook-port N
--manage-webhook-config`, and the real kubectl.

An HPA on a group without `spec.autoscaling` is admitted; what the HPA controller would
then do (there is none here: it reads metrics) is what `kubectl scale` does, a write of the
group's scale subresource after reading its `status.selector`, and the group grows by whole
units, each keeping its roles' counts. An HPA on a group with `spec.autoscaling` is refused
naming the group, and adding `spec.autoscaling` to a group an HPA targets is refused naming
the HPA; nothing is written either time. (KEDA's ScaledObject: its CRD is not in
../shared/schemas, so the same rule is checked on documented ScaledObjects in
tests/operator/test_scaler_admission.py.)
"""

from __future__ import annotations

import copy
import json
import signal
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from e2e.processes import KUBECTL, NO_KUBECTL, ApiServer, OperatorProcess, free_port, start_apiserver, start_operator, wait_for
from tandem.topology.generate import generate_cluster

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)
NS = "units"
CONFIG = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/tandem-operator"
WEBHOOK = "autoscalers.validate.tandem.dev"
AUTOSCALING = {"policy": "FixedRatio", "intervalSeconds": 15, "roles": {"prefill": {"minReplicas": 1, "maxReplicas": 2},
                                                                         "decode": {"minReplicas": 1, "maxReplicas": 2}},
               "fixedRatio": {"ratio": {"prefill": 1, "decode": 1}, "decodeTokensPerSecondPerReplica": 3000}}


def group(name: str, autoscaled: bool = False) -> dict[str, Any]:
    """Prefill 2 and decode 1 per unit, one 2-GPU pod each; one unit."""
    template = {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]}}
    roles = [{"name": "prefill", "replicas": 2, "template": template}, {"name": "decode", "replicas": 1, "template": template}]
    spec: dict[str, Any] = {"replicas": 1, "topologyName": "default", "topology": {"pack": {"required": "rack"}}, "roles": roles}
    if autoscaled:
        spec["autoscaling"] = copy.deepcopy(AUTOSCALING)
        roles[0]["replicas"] = 1
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def hpa(name: str, target: str) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name, "namespace": NS},
            "spec": {"scaleTargetRef": {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "name": target},
                     "minReplicas": 1, "maxReplicas": 3,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """tandem's CRDs, 4 nodes of 8 GPUs in 2 racks, the topology."""
    work = tmp_path_factory.mktemp("unit-autoscalers")
    topology, nodes = generate_cluster([("rack", 2), ("host", 2)], 8)
    (work / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    api = start_apiserver(work, "--cluster", str(work / "nodes.yaml"))
    api.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(topology))
    yield api
    assert api.stop() == 0


@pytest.fixture
def operator(server: ApiServer, tmp_path: Path) -> Iterator[OperatorProcess]:
    port = free_port()
    process = start_operator(server, tmp_path, f"units-{port}", "--webhook-port", str(port), "--manage-webhook-config", "--metrics-source", "none")
    try:
        wait_for(lambda: all(w["clientConfig"]["url"].endswith(f":{port}/validate") for w in _webhooks(server)) and len(_webhooks(server)) == 2,
                 20, "the operator's ValidatingWebhookConfiguration")
        wait_for(process.ready, 20, "the operator's informers")
        yield process
    finally:
        if process.process.poll() is None:
            process.process.send_signal(signal.SIGTERM)
            process.process.wait(timeout=10)


def _webhooks(server: ApiServer) -> list[dict[str, Any]]:
    try:
        return server.get(CONFIG)["webhooks"]
    except OSError:
        return []


def _apply(server: ApiServer, *objects: dict[str, Any], check: bool = True):
    return server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objects), check=check)


def _refused_once_seen(server: ApiServer, *objects: dict[str, Any]) -> str:
    """The refusal of applying `objects`, asked with server-side dry runs (sent to the webhook,
    nothing stored) until the operator's informers have seen what the refusal rests on; the
    real apply is then refused the same way. Its stderr."""
    def dry() -> str:
        run = server.kubectl("apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump_all(objects), check=False)
        return run.stderr if run.returncode != 0 else ""

    wait_for(dry, 20, "the operator's informers to see what the refusal rests on")
    refused = _apply(server, *objects, check=False)
    assert refused.returncode != 0, refused.stdout
    return refused.stderr


def _scale(server: ApiServer, name: str) -> dict[str, Any]:
    return json.loads(server.kubectl("get", "--raw", f"/apis/tandem.dev/v1alpha1/namespaces/{NS}/inferencegroups/{name}/scale").stdout)


def _pods_by_unit(server: ApiServer, selector: str) -> dict[str, list[str]]:
    listed = json.loads(server.kubectl("get", "pods", "-n", NS, "-l", selector, "-o", "json").stdout)["items"]
    out: dict[str, list[str]] = {}
    for pod in listed:
        labels = pod["metadata"]["labels"]
        out.setdefault(labels["tandem.dev/unit"], []).append(labels["tandem.dev/role"])
    return {unit: sorted(roles) for unit, roles in sorted(out.items())}


def test_an_hpa_scales_whole_units_of_a_group_tandem_does_not_autoscale(server, operator):
    assert _apply(server, group("plain")).returncode == 0
    created = _apply(server, hpa("plain-units", "plain"))
    assert created.stdout.strip() == "horizontalpodautoscaler.autoscaling/plain-units created", created.stderr
    assert server.kubectl("get", "hpa", "-n", NS, "-o", "name").stdout.split() == ["horizontalpodautoscaler.autoscaling/plain-units"]

    # What the HPA controller reads: the scale subresource's selector and replicas.
    scale = wait_for(lambda: (s := _scale(server, "plain"))["status"].get("selector") and s["status"].get("replicas") == 1 and s, 30,
                     "status.selector and status.replicas")
    selector = scale["status"]["selector"]
    wait_for(lambda: _pods_by_unit(server, selector) == {"0": ["decode", "prefill", "prefill"]}, 30, "unit 0's pods")

    # What it writes: spec.replicas through the scale subresource (kubectl scale does the same).
    assert server.kubectl("scale", "ig", "plain", "-n", NS, "--replicas=2").returncode == 0
    wait_for(lambda: _pods_by_unit(server, selector) == {"0": ["decode", "prefill", "prefill"], "1": ["decode", "prefill", "prefill"]}, 30,
             "a second whole unit, prefill:decode 2:1 as in the first")
    wait_for(lambda: _scale(server, "plain")["status"].get("replicas") == 2, 30, "status.replicas follows")


def test_both_autoscalers_on_one_group_are_refused_at_either_door(server, operator):
    assert _apply(server, group("chat", autoscaled=True)).returncode == 0
    refused = _refused_once_seen(server, hpa("chat-units", "chat"))
    assert (f'admission webhook "{WEBHOOK}" denied the request: spec.scaleTargetRef: InferenceGroup "chat" is scaled by tandem\'s own '
            "autoscaler (its spec.autoscaling sizes each role); one autoscaler per group: remove spec.autoscaling from the group first, "
            "or leave its scaling to tandem") in refused, refused
    assert server.kubectl("get", "hpa", "chat-units", "-n", NS, "--ignore-not-found", "-o", "name").stdout == "", "nothing was created"
    autoscale = server.kubectl("autoscale", "ig", "chat", "-n", NS, "--max=3", check=False)
    assert autoscale.returncode != 0 and 'spec.scaleTargetRef: InferenceGroup "chat" is scaled by tandem' in autoscale.stderr, (
        "kubectl autoscale makes the same HPA, refused the same way")

    assert _apply(server, group("served"), hpa("served-units", "served")).returncode == 0
    gaining = _refused_once_seen(server, group("served", autoscaled=True))
    assert ('admission webhook "validate.tandem.dev" denied the request: spec.autoscaling: the group\'s units are scaled by '
            'HorizontalPodAutoscaler "served-units" (spec.scaleTargetRef); one autoscaler per group: delete it first, or leave '
            "spec.autoscaling out") in gaining, gaining
    stored = json.loads(server.kubectl("get", "ig", "served", "-n", NS, "-o", "json").stdout)
    assert "autoscaling" not in stored["spec"], "nothing was written"

    server.kubectl("delete", "hpa", "served-units", "-n", NS)
    wait_for(lambda: server.kubectl("apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(group("served", autoscaled=True)),
                                    check=False).returncode == 0, 20, "the operator to see the HPA gone")
    assert _apply(server, group("served", autoscaled=True)).returncode == 0, "the HPA gone, tandem may autoscale the group"


def test_scaledobjects_are_watched_once_a_keda_crd_is_installed(server, operator):
    """KEDA absent: ScaledObjects are not served and nothing waits on them. Its CRD applied
    (a stand-in here, group keda.sh, kind ScaledObject, any spec: KEDA's real CRD is not in
    ../shared/schemas), the operator watches them, and one on an autoscaled group is
    refused, as is a group gaining spec.autoscaling while one targets it."""
    assert server.kubectl("get", "scaledobjects", check=False).returncode != 0, "not served before KEDA's CRD"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "scaledobjects.keda.sh"},
           "spec": {"group": "keda.sh", "scope": "Namespaced",
                    "names": {"kind": "ScaledObject", "plural": "scaledobjects", "singular": "scaledobject", "shortNames": ["so"]},
                    "versions": [{"name": "v1alpha1", "served": True, "storage": True, "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    assert _apply(server, crd).returncode == 0
    scaled = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "queue", "namespace": NS},
              "spec": {"scaleTargetRef": {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "name": "keda"},
                       "minReplicaCount": 1, "maxReplicaCount": 3,
                       "triggers": [{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}]}}
    try:
        assert _apply(server, group("keda-auto", autoscaled=True)).returncode == 0
        on_autoscaled = {**scaled, "metadata": {"name": "queue-auto", "namespace": NS},
                         "spec": {**scaled["spec"], "scaleTargetRef": {**scaled["spec"]["scaleTargetRef"], "name": "keda-auto"}}}
        refused = _refused_once_seen(server, on_autoscaled)
        assert f'admission webhook "{WEBHOOK}" denied the request: spec.scaleTargetRef: InferenceGroup "keda-auto" is scaled by' in refused

        assert _apply(server, group("keda"), scaled).returncode == 0
        gaining = _refused_once_seen(server, group("keda", autoscaled=True))
        assert 'spec.autoscaling: the group\'s units are scaled by ScaledObject "queue" (spec.scaleTargetRef)' in gaining, gaining
    finally:
        server.kubectl("delete", "crd", "scaledobjects.keda.sh", "--ignore-not-found")


def test_with_the_operator_stopped_only_hpas_on_tandem_kinds_fail_closed(server, operator):
    """The webhook's matchConditions send it only HPAs whose scaleTargetRef names a tandem.dev
    kind: with no operator answering, those are refused (fail closed), every other HPA is made."""
    operator.process.send_signal(signal.SIGTERM)
    assert operator.process.wait(timeout=10) == 0
    web = {**hpa("web", "web"), "spec": {**hpa("web", "web")["spec"], "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}}
    assert _apply(server, web).stdout.strip() == "horizontalpodautoscaler.autoscaling/web created", "not sent to tandem's webhook at all"
    closed = _apply(server, hpa("closed", "plain"), check=False)
    assert closed.returncode != 0 and f'failed calling webhook "{WEBHOOK}"' in closed.stderr, closed.stderr
    server.kubectl("delete", "hpa", "web", "-n", NS)
