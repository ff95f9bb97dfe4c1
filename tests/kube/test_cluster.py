"""KubeCluster: snapshots that hold still while events arrive, selectors over the caches,
the Lease read live, the operator's hooks (on_change, has_synced, lag, stop), and the
controller's own passes and leader election running over HTTP."""

from __future__ import annotations

import copy
import threading
import time

import pytest

from support.controller_world import design_group, kubelet, over_committed, world
from tandem.cluster.ports import NotFound
from tandem.controller import OBSERVED_KINDS
from tandem.controller.reconcile import reconcile
from tandem.errors import BadRequest
from tandem.kube.cluster import KubeCluster
from tandem.runtime.leader import LeaderElector, LeaseConfig

NS = "serving"


def wait_until(predicate, timeout=5.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def pod(name, labels=None, namespace=NS, **spec):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"containers": [{"name": "engine", "image": "vllm"}], **spec}}


@pytest.fixture
def cluster(api_rest):
    clusters = []

    def make(**options):
        c = KubeCluster(api_rest, backoff=(0.01, 0.05), **{"kinds": OBSERVED_KINDS, **options}).start(wait=5.0)
        clusters.append(c)
        assert c.has_synced()
        return c

    yield make
    for c in clusters:
        c.stop()


def test_a_snapshot_holds_still_while_events_arrive(api, cluster):
    for i in range(20):
        api.write(api.store.create, pod(f"p{i:02d}", {"round": "0"}))
    c = cluster(kinds=("Pod",))
    stop = threading.Event()

    def churn():
        n = 0
        while not stop.is_set():
            n += 1
            for i in range(20):
                api.write(api.store.patch, "Pod", NS, f"p{i:02d}", {"metadata": {"labels": {"round": str(n)}}})

    writer = threading.Thread(target=churn)
    writer.start()
    try:
        taken = []
        for _ in range(20):
            snapshot = c.snapshot()
            taken.append((snapshot, copy.deepcopy(snapshot.list("Pod"))))
            time.sleep(0.01)
        for snapshot, then in taken:
            assert snapshot.list("Pod") == then, "a snapshot never changes after it was taken"
        rounds = {p["metadata"]["labels"]["round"] for p in taken[-1][1]}
        assert len(taken[-1][1]) == 20 and rounds, "and sees every pod"
        assert len({s[1][0]["metadata"]["resourceVersion"] for s in taken}) > 1, "while later snapshots move on"
    finally:
        stop.set()
        writer.join()
    final = api.store.list("Pod")
    wait_until(lambda: c.snapshot().list("Pod") and
               [p["metadata"]["resourceVersion"] for p in c.snapshot().list("Pod")] == [p["metadata"]["resourceVersion"] for p in final],
               what="the caches to settle")


def test_selectors_namespaces_and_kinds_on_a_snapshot(api, cluster):
    api.write(api.store.create, pod("p1", {"tandem.dev/role": "prefill", "tandem.dev/unit": "0"}))
    api.write(api.store.create, pod("d1", {"tandem.dev/role": "decode", "tandem.dev/unit": "0"}))
    api.write(api.store.create, pod("other", {"tandem.dev/role": "decode"}, namespace="else"))
    api.write(api.store.patch_status, "Pod", NS, "d1", {"status": {"phase": "Failed"}})
    api.write(api.store.create, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n-1"}, "status": {"allocatable": {}}})
    c = cluster(kinds=("Pod", "Node"))
    reader = c.snapshot()

    def listed(**kw):
        return [p["metadata"]["name"] for p in reader.list("Pod", **kw)]

    assert listed() == ["other", "d1", "p1"], "(namespace, name) order"
    assert listed(namespace=NS, labels="tandem.dev/role in (prefill, decode)") == ["d1", "p1"]
    assert listed(labels={"tandem.dev/role": "decode"}) == ["other", "d1"]
    assert listed(fields="status.phase=Failed") == ["d1"] and listed(fields={"metadata.name": "p1"}) == ["p1"]
    assert reader.get("Node", "ignored", "n-1")["kind"] == "Node", "cluster-scoped: the namespace does not matter"
    assert reader.get("Pod", NS, "p1")["apiVersion"] == "v1"
    with pytest.raises(NotFound):
        reader.get("Pod", NS, "nope")
    with pytest.raises(BadRequest):
        reader.list("Node", labels="role in prefill")
    with pytest.raises(BadRequest, match="not watched"):
        reader.list("ConfigMap")


def test_the_lease_is_read_live_and_leader_election_works_over_http(api, cluster):
    c = cluster(kinds=("Pod",))
    with pytest.raises(NotFound):
        c.snapshot().get("Lease", "tandem-system", "tandem-operator")
    a = LeaderElector(c, LeaseConfig(identity="a"))
    b = LeaderElector(c, LeaseConfig(identity="b"))
    assert a.step(0.0) and not b.step(0.0)
    assert a.step(3.0), "renewed: a merge patch with the Lease's resourceVersion"
    lease = c.snapshot().get("Lease", "tandem-system", "tandem-operator")
    assert lease["spec"]["holderIdentity"] == "a" and lease["kind"] == "Lease"
    assert any(r.method == "GET" and r.path.endswith("/leases/tandem-operator") for r in api.requests), "no informer: a GET"
    assert not any(r.params.get("watch") for r in api.requests if "/leases" in r.path)


def test_on_change_lag_and_stop(api, api_rest):
    seen = []
    c = KubeCluster(api_rest, kinds=("Pod", "ConfigMap"), on_change=lambda kind, type_, obj: seen.append((kind, type_)))
    assert not c.has_synced() and set(c.silent_for().values()) == {float("inf")}, "never heard: infinitely behind"
    c.start(wait=5.0)
    api.write(api.store.create, pod("p"))
    wait_until(lambda: ("Pod", "ADDED") in seen, what="on_change")
    assert set(c.silent_for()) == {"Pod", "ConfigMap"} and all(v < 5 for v in c.silent_for().values())
    began = time.monotonic()
    c.stop()
    assert time.monotonic() - began < 1.0 and not any(i.alive for i in c.informers)


def test_namespaced_informers_when_limited_to_namespaces(api, cluster):
    api.write(api.store.create, pod("mine"))
    api.write(api.store.create, pod("theirs", namespace="else"))
    c = cluster(kinds=("Pod", "Node"), namespaces=(NS,))
    assert [i.kind.path(i.namespace) for i in c.informers] == [f"/api/v1/namespaces/{NS}/pods", "/api/v1/nodes"]
    assert [p["metadata"]["name"] for p in c.snapshot().list("Pod")] == ["mine"]


def test_an_operator_limited_to_a_namespace_still_reads_every_pod(api, cluster):
    """`tandem operator --namespace`: groups and companions in that namespace, pods everywhere
    (another workload's pod holds capacity placement must count)."""
    from tandem.operator.scope import informer_scopes

    api.write(api.store.create, pod("mine"))
    api.write(api.store.create, pod("theirs", namespace="else"))
    c = cluster(kinds=("InferenceGroup", "Pod", "Service"), namespaces=(NS,), scopes=informer_scopes((NS,)))
    assert [i.kind.path(i.namespace) for i in c.informers] == [
        f"/apis/tandem.dev/v1alpha1/namespaces/{NS}/inferencegroups", "/api/v1/pods", f"/api/v1/namespaces/{NS}/services"]
    assert sorted(p["metadata"]["name"] for p in c.snapshot().list("Pod")) == ["mine", "theirs"]
    assert informer_scopes(()) == {}, "unlimited: every kind everywhere already"


def test_the_controller_settles_a_group_over_http():
    """DESIGN.md's example group, placed and made Ready by passes over the adapter, with a
    kubelet acting on the server's store: no over-commit, every pod bound."""
    from kube.fakeapi import FakeApi

    api = FakeApi(store=world(design_group(replicas=1)))
    c = KubeCluster.connect(api.url, trust_env=False, kinds=OBSERVED_KINDS, backoff=(0.01, 0.05)).start(wait=5.0)
    try:
        now = 0.0
        for _ in range(60):
            reconcile(c, now)
            api.write(kubelet, api.store)
            now += 1.0
            time.sleep(0.02)  # the informers hear the pass's writes
            pods = api.store.list("Pod")
            if len(pods) == 8 and all(p["spec"].get("nodeName") and p.get("status", {}).get("conditions") for p in pods):
                break
        pods = api.store.list("Pod")
        assert len(pods) == 8 and all(p["spec"].get("nodeName") for p in pods), "4 prefill + 2 decode x 2 pods, all bound"
        assert over_committed(api.store) == []
        status = api.store.get("InferenceGroup", "serving", "llama").get("status") or {}
        assert status.get("observedGeneration") == 1
    finally:
        c.stop()
        api.close()


def test_connect_reads_a_kubeconfig_file_and_lightkubes_client(api, tmp_path):
    import lightkube
    import yaml
    from lightkube.config.kubeconfig import KubeConfig

    from tandem.kube.rest import Rest

    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": api.url}}],
        "users": [{"name": "tandem", "user": {"token": "s3cret"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tandem"}}],
    }))
    c = KubeCluster.connect(str(path), trust_env=False, kinds=("Pod",)).start(wait=5.0)
    try:
        assert c.has_synced()
        assert {r.headers.get("authorization") for r in api.requests} == {"Bearer s3cret"}
    finally:
        c.stop()
    rest = Rest.connect(lightkube.Client(KubeConfig.from_file(path), trust_env=False), trust_env=False)
    try:
        assert rest.request("GET", "/api/v1/pods")["items"] == []
        assert api.requests[-1].headers["authorization"] == "Bearer s3cret"
    finally:
        rest.close()
