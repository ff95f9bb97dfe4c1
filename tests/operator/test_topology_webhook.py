"""The operator's webhook guarding ClusterTopologies, called by the local API server over
HTTPS as a cluster calls it, registered as `--manage-webhook-config` registers it: deleting
a topology groups name is refused naming them, so is a change of levels that breaks one,
and a topology `tandem validate` refuses is refused by the server (its CRD's rules) or the
webhook; with no group left, the topology goes."""

from __future__ import annotations

import base64
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest

from apiserver.helpers import IG, NS, Client, group, small_cluster
from tandem.apiserver.server import ApiServer
from tandem.runtime.certs import CA_FILE, make_certificates
from tandem.operator.process import register_webhook
from tandem.operator.webhook import serve_webhook

TOPOLOGIES = f"{IG}/clustertopologies"
GROUPS = f"{IG}/namespaces/{NS}/inferencegroups"
WEBHOOK = 'admission webhook "validate.tandem.dev" denied the request: '


class _Registrar:
    """The little of a Cluster that `register_webhook` uses, over the server's REST API."""

    def __init__(self, client: Client):
        self.client = client

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        reply = self.client.post("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", obj)
        assert reply.code == 201, reply.body
        return reply.body


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Client]:
    """The server with tandem's CRDs and a 2x2 cluster, and the operator's webhook registered."""
    make_certificates(["127.0.0.1"], datetime.now(timezone.utc)).write(tmp_path)
    with ApiServer(objects=small_cluster(), kubelet=False) as server:
        def reader():  # the operator reads its informer caches; here, the server's store
            with server.state.lock:
                return server.state.store.snapshot()

        hook = serve_webhook(reader, tmp_path, 0, host="127.0.0.1")
        try:
            client = Client(server.url)
            url = f"https://127.0.0.1:{hook.server_address[1]}/validate"
            register_webhook(_Registrar(client), url, base64.b64encode((tmp_path / CA_FILE).read_bytes()).decode())  # type: ignore[arg-type]
            yield client
        finally:
            hook.shutdown()


def test_deleting_a_topology_groups_name_is_refused_naming_them(guarded: Client):
    for name in ("b-chat", "a-llm"):
        assert guarded.post(GROUPS, group(name, topology={"pack": {"required": "rack"}})).code == 201
    refused = guarded.delete(f"{TOPOLOGIES}/default")
    assert refused.code == 422, refused.body
    assert refused.body["message"] == (WEBHOOK + "ClusterTopology 'default' is used by 2 InferenceGroup(s): serving/a-llm, serving/b-chat; "
                                       "delete them or point their spec.topologyName elsewhere first")
    assert guarded.get(f"{TOPOLOGIES}/default").code == 200, "nothing was deleted"

    dropped = guarded.patch(f"{TOPOLOGIES}/default", {"spec": {"levels": [{"name": "host", "nodeLabel": "kubernetes.io/hostname"}]}})
    assert dropped.code == 422 and dropped.body["message"].startswith(
        WEBHOOK + "spec.levels: InferenceGroup serving/a-llm uses this topology and the change breaks it: spec.topology.pack.required: unknown level 'rack'")
    assert "serving/b-chat" in dropped.body["message"]
    assert [lv["name"] for lv in guarded.get(f"{TOPOLOGIES}/default").body["spec"]["levels"]] == ["rack", "host"]

    for name in ("a-llm", "b-chat"):
        assert guarded.delete(f"{GROUPS}/{name}").code == 200
    assert guarded.delete(f"{TOPOLOGIES}/default").code == 200, "no group names it any more"
    assert guarded.get(f"{TOPOLOGIES}/default").code == 404


def test_a_topology_tandem_validate_refuses_is_refused(guarded: Client):
    inverted = {"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": "inverted"},
                "spec": {"levels": [{"name": "host", "nodeLabel": "kubernetes.io/hostname"}, {"name": "rack", "nodeLabel": "net/rack"}]}}
    refused = guarded.post(TOPOLOGIES, inverted)
    assert refused.code == 422 and "level 'host' would be broader than 'rack'" in refused.body["message"], refused.body
    bad_label = {**inverted, "spec": {"levels": [{"name": "rack", "nodeLabel": "net/rack"}, {"name": "host", "nodeLabel": "net/rack"}]}}
    assert "duplicate nodeLabel 'net/rack'" in guarded.post(TOPOLOGIES, bad_label).body["message"]
    assert guarded.get(f"{TOPOLOGIES}/inverted").code == 404


class _Recorder:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.created.append(obj)
        return obj


def test_the_deployed_webhook_sends_what_the_managed_one_sends_topology_deletes_included():
    import yaml

    recorder = _Recorder()
    register_webhook(recorder, "https://127.0.0.1:1/validate", "")  # type: ignore[arg-type]
    managed = recorder.created[0]["webhooks"][0]["rules"]
    deployed = yaml.safe_load((Path(__file__).resolve().parents[2] / "deploy" / "components" / "operator" / "webhook.yaml").read_text())["webhooks"][0]["rules"]
    assert managed == deployed
    topology_rule = next(rule for rule in managed if "clustertopologies" in rule["resources"])
    assert topology_rule["operations"] == ["CREATE", "UPDATE", "DELETE"] and topology_rule["resources"] == ["clustertopologies"]
    assert all("DELETE" not in rule["operations"] for rule in managed if rule is not topology_rule), "group deletes are not reviewed"
