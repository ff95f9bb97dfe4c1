"""Optional kinds through `KubeCluster` against `tandem apiserver`: a delegated backend's
PodGroup whose CRD is not installed never holds the start back and is not served; once
its CRD (Volcano's own, from ../shared/schemas) is created it is served within moments,
its objects listed; once the CRD is deleted it is unserved again and its cache empty.

The waits poll the cluster's state with a deadline (informers run on threads); nothing is
asserted about how long anything took."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from apiserver.helpers import Client
from tandem.apiserver.server import ApiServer
from tandem.kube.cluster import KubeCluster
from tandem.kube.rest import Rest

SCHEMAS = Path(__file__).resolve().parents[2] / ".." / "shared" / "schemas"
PODGROUP_CRD = SCHEMAS / "volcano" / "scheduling.volcano.sh_podgroups.yaml"
VOLCANO = "PodGroup.scheduling.volcano.sh"
KAI = "PodGroup.scheduling.run.ai"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/serving/podgroups"

needs_schemas = pytest.mark.skipif(not PODGROUP_CRD.is_file(), reason=f"Volcano's PodGroup CRD is not at {PODGROUP_CRD} (../shared/schemas)")


def eventually(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll `check` until it is truthy; fail after `timeout` seconds (a generous bound, not a measure)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not so within {timeout}s: {check}")
        time.sleep(0.02)


def podgroup(name: str) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": "serving"},
            "spec": {"minMember": 2}}


@pytest.fixture
def api():
    with ApiServer(crds=False, kubelet=False, bookmark_every=0.2) as server:
        yield server


def cluster_of(api: ApiServer, changes: list | None = None, **options: Any) -> KubeCluster:
    hook = None if changes is None else (lambda kind, type_, obj: changes.append((kind, type_, obj["metadata"]["name"])))
    return KubeCluster(Rest.connect(api.url, trust_env=False), kinds=("Pod",), optional_kinds=(VOLCANO, KAI), on_change=hook,
                       watch_timeout=5.0, **options)


@needs_schemas
def test_the_local_api_server_serves_a_crd_kind_only_while_its_crd_is_installed(api):
    client = Client(api.url)
    assert client.get(PODGROUPS).code == 404
    assert client.post(CRDS, yaml.safe_load(PODGROUP_CRD.read_text())).code == 201
    assert client.get(PODGROUPS).body["items"] == []
    assert client.delete(f"{CRDS}/podgroups.scheduling.volcano.sh").code == 200
    assert client.get(PODGROUPS).code == 404


@needs_schemas
def test_an_optional_kind_is_served_while_its_crd_is_installed_and_emptied_when_it_is_deleted(api, caplog):
    client = Client(api.url)
    changes: list = []
    caplog.set_level(logging.INFO, logger="tandem.kube")
    with cluster_of(api, changes, recheck=3600.0) as cluster:  # no timer within the test: only the CRD watch can wake it
        assert cluster.wait_synced(10), "an optional kind whose CRD is missing does not hold has_synced back"
        assert cluster.has_synced()
        assert cluster.served((VOLCANO, KAI, "Pod", "PodGroup.scheduling.sigs.k8s.io")) == {"Pod"}
        assert cluster.snapshot().list(VOLCANO) == []
        assert cluster.disconnected()[VOLCANO] == 0.0, "nothing to watch is not being cut off"

        assert client.post(CRDS, yaml.safe_load(PODGROUP_CRD.read_text())).code == 201
        eventually(lambda: VOLCANO in cluster.served((VOLCANO,)))
        assert cluster.served((VOLCANO, KAI)) == {VOLCANO}
        assert client.post(PODGROUPS, podgroup("g-0")).code == 201
        eventually(lambda: cluster.snapshot().list(VOLCANO, "serving"))
        assert [o["metadata"]["name"] for o in cluster.snapshot().list(VOLCANO, "serving")] == ["g-0"]
        assert cluster.snapshot().get(VOLCANO, "serving", "g-0")["spec"]["minMember"] == 2

        assert client.delete(f"{CRDS}/podgroups.scheduling.volcano.sh").code == 200
        eventually(lambda: VOLCANO not in cluster.served((VOLCANO,)))
        assert cluster.snapshot().list(VOLCANO) == []
        assert (VOLCANO, "DELETED", "g-0") in changes, "passes hear that the object went"
        assert cluster.has_synced()

    said = [r for r in caplog.records if r.name == "tandem.kube" and VOLCANO in r.getMessage()]
    assert [(r.levelno, "does not serve" in r.getMessage()) for r in said] == [
        (logging.INFO, True),  # absent at the start
        (logging.INFO, False),  # served once the CRD came
        (logging.WARNING, True),  # gone with its CRD
    ], [r.getMessage() for r in said]
    assert not [r for r in caplog.records if r.name == "tandem.kube" and KAI in r.getMessage() and r.levelno >= logging.WARNING]


@needs_schemas
def test_without_a_crd_watch_an_unserved_kind_looks_again_on_its_timer(api):
    client = Client(api.url)
    with cluster_of(api, recheck=0.2) as cluster:
        assert cluster.wait_synced(10)
        assert cluster.served((VOLCANO,)) == frozenset()
        for informer in cluster.informers:
            informer.on_change = None  # the CRD watch's change no longer reaches the cluster: only the timer is left
        assert client.post(CRDS, yaml.safe_load(PODGROUP_CRD.read_text())).code == 201
        eventually(lambda: cluster.served((VOLCANO,)) == {VOLCANO})


def test_a_cluster_with_optional_kinds_watches_crds_and_one_without_does_not(api):
    with cluster_of(api) as cluster:
        assert "CustomResourceDefinition" in cluster.kinds
        assert cluster.wait_synced(10)
        assert cluster.served(("CustomResourceDefinition",)) == {"CustomResourceDefinition"}
    plain = KubeCluster(Rest.connect(api.url, trust_env=False), kinds=("Pod",))
    assert plain.kinds == ("Pod",)
    assert plain.served(("Pod", VOLCANO)) == frozenset(), "nothing is known served before it is listed"
