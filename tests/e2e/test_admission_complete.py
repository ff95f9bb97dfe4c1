"""Issue 25, item 4, through the real kubectl against `tandem apiserver` and `tandem operator`
with its webhook: pod templates checked against Kubernetes' PodTemplateSpec schema (a
misspelt field, a bad enum refused at their paths); a group naming a ClusterTopology not
there yet admitted with a `Warning:` and placed once the topology is applied; a unit that
could never fit the nodes creates no pod and its status says why."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from e2e.processes import KUBECTL, NO_KUBECTL, wait_for
from e2e.test_admission import NS, WEBHOOK, _groups, documents, group, operator, server  # noqa: F401 - fixtures

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)


def _container(g: dict[str, Any], role: int = 0) -> dict[str, Any]:
    container: dict[str, Any] = g["spec"]["roles"][role]["template"]["spec"]["containers"][0]
    return container


def _pods(server, group_name: str) -> list[dict[str, Any]]:
    return server.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=tandem.dev/group={group_name}")["items"]


def test_a_misspelt_template_field_is_refused_with_its_path(server, operator):
    typo = group("typo")
    del _container(typo)["resources"]
    _container(typo)["resource"] = {"requests": {"nvidia.com/gpu": 8}}
    refused = server.kubectl("apply", "-f", "-", stdin=documents(typo), check=False)
    assert refused.returncode != 0
    assert f'admission webhook "{WEBHOOK}" denied the request: spec.roles[0].template.spec.containers[0].resource: unknown field' in refused.stderr, refused.stderr
    assert _groups(server) == [], "nothing was created"


def test_a_bad_enum_in_a_template_is_refused_with_the_allowed_values(server, operator):
    bad = group("enum")
    _container(bad, 1)["imagePullPolicy"] = "always"
    bad["spec"]["roles"][0]["template"]["spec"]["restartPolicy"] = "Sometimes"
    refused = server.kubectl("apply", "-f", "-", stdin=documents(bad), check=False)
    assert refused.returncode != 0
    assert ('spec.roles[0].template.spec.restartPolicy: unsupported value "Sometimes": supported values: "Always", "OnFailure", "Never"'
            in refused.stderr), refused.stderr
    assert ('spec.roles[1].template.spec.containers[0].imagePullPolicy: unsupported value "always": supported values: "Always", "Never", "IfNotPresent"'
            in refused.stderr), refused.stderr
    assert _groups(server) == []


def test_a_group_applied_before_its_topology_is_admitted_with_a_warning_and_placed_once_it_comes(server, operator):
    early = group("early")
    early["spec"]["topologyName"] = "later"
    admitted = server.kubectl("apply", "-f", "-", stdin=documents(early))
    assert admitted.stdout.strip() == "inferencegroup.tandem.dev/early created"
    assert "Warning: spec.topologyName: ClusterTopology 'later' not found" in admitted.stderr, admitted.stderr
    topology = copy.deepcopy(server.get("/apis/tandem.dev/v1alpha1/clustertopologies/default"))
    topology["metadata"] = {"name": "later"}
    try:
        server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(topology))
        wait_for(lambda: len([p for p in _pods(server, "early") if p["spec"].get("nodeName")]) == 2, 30, "both pods placed once the topology exists")
    finally:
        server.kubectl("delete", "ig", "early", "-n", NS)
        server.kubectl("delete", "ctopo", "later")


def test_a_unit_that_could_never_fit_creates_no_pod_and_its_status_says_why(server, operator):
    never = group("sixteen", gpus=16)  # 16 GPUs per pod on nodes of 8
    admitted = server.kubectl("apply", "-f", "-", stdin=documents(never))
    assert admitted.returncode == 0 and "Warning:" in admitted.stderr
    try:
        def said() -> str:
            listed = yaml.safe_load(server.kubectl("get", "ig", "-n", NS, "-o", "yaml").stdout)
            for condition in (listed["items"][0].get("status") or {}).get("conditions") or []:
                if condition["type"] == "Scheduled" and condition["reason"] == "NeverFits":
                    return str(condition["message"])
            return ""

        message = wait_for(said, 30, "the NeverFits condition")
        assert "a prefill pod (spec.roles[0]) asks for nvidia.com/gpu 16; the largest node offers 8" in message, message
        assert _pods(server, "sixteen") == [], "no gated pod for a unit that could never be placed"
    finally:
        server.kubectl("delete", "ig", "sixteen", "-n", NS)
