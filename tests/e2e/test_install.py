"""`kubectl apply -k` of deploy/ and its overlays against `tandem apiserver`, twice, as a
platform team re-applies an install (issue 25, item 10): every object is served, and the
second apply changes nothing — the webhook configuration's `webhooks` merge by name, so a
`caBundle` patched in by hand survives it.

What the local server cannot do is not asked of it: nothing runs the Deployment, and the
webhook's `service` cannot be routed from here, so with deploy/'s configuration in place
writes of tandem's kinds fail closed until it is deleted (the README's last step).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Iterator

import pytest

from e2e.processes import KUBECTL, NO_KUBECTL, REPO, ApiServer, start_apiserver

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)
CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nnot checked until called\n-----END CERTIFICATE-----\n").decode()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ApiServer]:
    server = start_apiserver(tmp_path, "--no-crds")
    try:
        yield server
    finally:
        assert server.stop() == 0
    assert server.stderr.read_text() == ""


def _outcomes(output: str) -> set[str]:
    return {line.rsplit(" ", 1)[-1] for line in output.strip().splitlines()}


@pytest.mark.parametrize("target", ["deploy", "deploy/overlays/namespaced", "deploy/overlays/local", "deploy/overlays/operator-only", "deploy/overlays/topology-only"])
def test_applying_an_install_twice_works_and_changes_nothing_the_second_time(server: ApiServer, target: str):
    first = server.kubectl("apply", "-k", target)
    assert _outcomes(first.stdout) == {"created"}, first.stdout
    version = server.kubectl("get", "crd", "inferencegroups.tandem.dev", "-o", "jsonpath={.metadata.resourceVersion}").stdout
    second = server.kubectl("apply", "-k", target)
    # kubectl always sends a PodDisruptionBudget's selector (patchStrategy replace) and says
    # "configured" for it, as against any cluster; the server stores nothing new.
    assert _outcomes(second.stdout) <= {"unchanged", "configured"}, second.stdout
    configured = {line for line in second.stdout.splitlines() if line.endswith("configured")}
    assert configured <= {"poddisruptionbudget.policy/tandem-operator configured", "poddisruptionbudget.policy/tandem-topology-controller configured"}
    assert server.kubectl("get", "crd", "inferencegroups.tandem.dev", "-o", "jsonpath={.metadata.resourceVersion}").stdout == version


def test_a_ca_bundle_patched_in_survives_the_next_apply_and_the_webhook_fails_closed_until_deleted(server: ApiServer):
    server.kubectl("apply", "-k", "deploy")
    patch = [{"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": CA} for i in (0, 1)]  # as docs/install.md patches both
    server.kubectl("patch", "validatingwebhookconfiguration", "tandem-operator", "--type", "json", "-p", json.dumps(patch))
    changed = server.kubectl("apply", "-f", "-", stdin=_webhook_with_timeout(7))
    assert changed.stdout.strip() == "validatingwebhookconfiguration.admissionregistration.k8s.io/tandem-operator configured"
    shown = json.loads(server.kubectl("get", "validatingwebhookconfiguration", "tandem-operator", "-o", "json").stdout)["webhooks"]
    assert len(shown) == 2 and [w["timeoutSeconds"] for w in shown] == [7, 7]
    assert all(w["clientConfig"] == {"caBundle": CA, "service": {"name": "tandem-webhook", "namespace": "tandem-system", "path": "/validate", "port": 443}}
               for w in shown)
    assert _outcomes(server.kubectl("apply", "-k", "deploy").stdout) <= {"unchanged", "configured"}
    again = json.loads(server.kubectl("get", "validatingwebhookconfiguration", "tandem-operator", "-o", "json").stdout)["webhooks"]
    assert [w["clientConfig"]["caBundle"] for w in again] == [CA, CA]

    refused = server.kubectl("apply", "-f", "examples/llama-70b.yaml", check=False)
    assert refused.returncode == 1 and 'failed calling webhook "validate.tandem.dev"' in refused.stderr, "no operator answers: fail closed"
    server.kubectl("delete", "validatingwebhookconfiguration", "tandem-operator")
    assert server.kubectl("apply", "-f", "examples/llama-70b.yaml").stdout.strip() == "inferencegroup.tandem.dev/llama-70b created"


def _webhook_with_timeout(seconds: int) -> str:
    """deploy/'s webhook configuration with another timeout, as a changed file would come."""
    return (REPO / "deploy" / "components" / "operator" / "webhook.yaml").read_text().replace("timeoutSeconds: 5", f"timeoutSeconds: {seconds}")
