"""The simulated node autoscaler of `tandem apiserver --provisioner` (apiserver/provisioner.py),
stepped by hand with a fake clock: it serves cluster-autoscaler's CRD, accepts requests of the
classes it knows, adds nodes in a new domain of every level after its delay, checks capacity
without adding any, and fails what it cannot satisfy."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.helpers import NS, Client, Clock, small_cluster
from tandem.apiserver.provisioner import ATOMIC_SCALE_UP, CHECK_CAPACITY, Provisioner, install_crd, provisioning_crd
from tandem.apiserver.server import ApiServer

REQUESTS = f"/apis/autoscaling.x-k8s.io/v1/namespaces/{NS}/provisioningrequests"
TEMPLATES = f"/api/v1/namespaces/{NS}/podtemplates"


@pytest.fixture
def world():
    with ApiServer(objects=small_cluster(racks=1, hosts=2, gpus=8), kubelet=False) as server:
        install_crd(server.state)
        clock = Clock()
        provisioner = Provisioner(server.state, delay=5.0, monotonic=clock)

        def step() -> float | None:
            with server.state.lock:
                return provisioner.step()

        yield Client(server.url), clock, step


def _ask(client: Client, name: str, chosen: str, gpus: int, count: int) -> None:
    template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"{name}-t"},
                "template": {"spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}}}
    assert client.post(TEMPLATES, template).code == 201
    request = {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "metadata": {"name": name},
               "spec": {"provisioningClassName": chosen, "podSets": [{"podTemplateRef": {"name": f"{name}-t"}, "count": count}]}}
    reply = client.post(REQUESTS, request)
    assert reply.code == 201, reply.body


def _conditions(client: Client, name: str) -> dict[str, tuple[str, str]]:
    body = client.get(f"{REQUESTS}/{name}").body
    return {c["type"]: (c["status"], c["reason"]) for c in (body.get("status") or {}).get("conditions") or []}


def _nodes(client: Client) -> dict[str, Any]:
    return {n["metadata"]["name"]: n for n in client.get("/api/v1/nodes").body["items"]}


def test_the_bundled_crd_is_cluster_autoscalers_and_says_where_it_comes_from():
    crd = provisioning_crd()
    assert crd["metadata"]["name"] == "provisioningrequests.autoscaling.x-k8s.io"
    assert [v["name"] for v in crd["spec"]["versions"] if v["storage"]] == ["v1"]
    from importlib import resources

    header = resources.files("tandem.apiserver").joinpath("data", "autoscaling.x-k8s.io_provisioningrequests.yaml").read_text().splitlines()[:6]
    assert any("github.com/kubernetes/autoscaler" in line for line in header) and any("Apache" in line for line in header)


def test_an_atomic_request_is_accepted_then_gets_nodes_in_a_new_domain(world):
    client, clock, step = world
    _ask(client, "more", ATOMIC_SCALE_UP, gpus=8, count=3)
    assert step() == pytest.approx(5.0), "due after the delay"
    assert _conditions(client, "more") == {"Accepted": ("True", "Accepted")}
    assert len(_nodes(client)) == 2
    clock.now += 5.0
    step()
    assert _conditions(client, "more")["Provisioned"] == ("True", "Provisioned")
    nodes = _nodes(client)
    added = sorted(n for n in nodes if n.startswith("provisioned-"))
    assert added == ["provisioned-1-1", "provisioned-1-2", "provisioned-1-3"], "one 8-GPU node per 8-GPU pod"
    for name in added:
        labels = nodes[name]["metadata"]["labels"]
        assert labels["network.tandem.dev/rack"] == "provisioned-1" and labels["kubernetes.io/hostname"] == name
        assert nodes[name]["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    step()
    assert len(_nodes(client)) == 5, "answered once"


def test_check_capacity_says_whether_the_pods_fit_and_adds_nothing(world):
    client, clock, step = world
    _ask(client, "fits", CHECK_CAPACITY, gpus=8, count=2)
    _ask(client, "short", CHECK_CAPACITY, gpus=8, count=3)
    step()  # accepted now: the delay runs from here
    clock.now += 10.0
    step()
    assert _conditions(client, "fits")["Provisioned"] == ("True", "CapacityIsFound")
    assert _conditions(client, "short")["Provisioned"] == ("False", "CapacityIsNotFound")
    assert len(_nodes(client)) == 2


def test_what_cannot_be_satisfied_fails_and_other_classes_are_left_alone(world):
    client, clock, step = world
    _ask(client, "huge", ATOMIC_SCALE_UP, gpus=16, count=1)
    _ask(client, "other", "queued-provisioning.gke.io", gpus=8, count=1)
    request = {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "metadata": {"name": "lost"},
               "spec": {"provisioningClassName": ATOMIC_SCALE_UP, "podSets": [{"podTemplateRef": {"name": "nowhere"}, "count": 1}]}}
    assert client.post(REQUESTS, request).code == 201
    step()  # accepted now: the delay runs from here
    clock.now += 10.0
    step()
    assert _conditions(client, "huge")["Failed"] == ("True", "CapacityIsNotFound")
    assert _conditions(client, "lost")["Failed"] == ("True", "PodTemplateNotFound")
    assert _conditions(client, "other") == {}
    assert len(_nodes(client)) == 2


def test_the_crd_keeps_the_spec_immutable(world):
    client, _, _ = world
    _ask(client, "fixed", ATOMIC_SCALE_UP, gpus=8, count=1)
    reply = client.call("PATCH", f"{REQUESTS}/fixed", {"spec": {"podSets": [{"podTemplateRef": {"name": "fixed-t"}, "count": 2}]}},
                        content_type="application/merge-patch+json")
    assert reply.code == 422 and "immutable" in str(reply.body)
