"""A finding of the load bench (docs/reliability.md, Load): pods made again for a group
that is already deleted, when the operator's pod informer has heard of the cascade and its
group informer not yet of the delete.

The local API server (like the in-memory store) deletes a group's pods in the same request
as the group. The adapter's informers are one watch per kind, so a snapshot can hold the
pod cache after the cascade and the group cache before it: the pass sees the group without
pods and decides to create them. This test makes that order certain by holding back the
group informer's watch: apply fences the group before its first create (a status patch
that changes nothing, with the resourceVersion read; `controller/apply.py`), the server
answers 404, and nothing is made."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("lightkube", reason="the Kubernetes adapter needs the operator extra: pip install 'tandem[operator]'")

from kube.fakeapi import FakeApi  # noqa: E402
from support.builders import group, role  # noqa: E402
from support.controller_world import kubelet  # noqa: E402
from tandem.controller import OBSERVED_KINDS
from tandem.controller.reconcile import reconcile  # noqa: E402
from tandem.kube.cluster import KubeCluster  # noqa: E402
from tandem.topology.generate import generate_cluster  # noqa: E402


def _wait(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_pass_creates_no_pod_for_a_group_whose_delete_the_pod_informer_has_already_heard_of():
    api = FakeApi()
    topology, nodes = generate_cluster([("rack", 1), ("host", 2)], 8)
    for obj in [topology, *nodes]:
        api.store.create(obj)
    api.store.create(group("g", [role("prefill", 1, 1, gpus=1), role("decode", 1, 1, gpus=1)]))
    now = 0.0
    for _ in range(20):  # settle in the store itself
        report = reconcile(api.store, now)
        now += 1.0
        if not kubelet(api.store) and not report.writes:
            break
    assert len(api.store.list("Pod")) == 2
    cluster = KubeCluster.connect(api.url, trust_env=False, kinds=OBSERVED_KINDS, backoff=(0.01, 0.05)).start(wait=5.0)
    try:
        _wait(lambda: len(cluster.snapshot().list("Pod")) == 2)
        api.fail("GET", "/inferencegroups$", 500, times=10_000, watch=True)  # the group informer's watch is held back
        api.end_watches()
        api.write(api.store.delete, "InferenceGroup", "serving", "g")  # its pods go in the same write
        _wait(lambda: not cluster.snapshot().list("Pod"))  # the pod informer has heard of the cascade
        assert cluster.snapshot().list("InferenceGroup"), "the group informer has not heard of the delete yet"
        reconcile(cluster, now)
        made = [p["metadata"]["name"] for p in api.store.list("Pod")]
        assert made == [], f"pods created for a group the server no longer has: {made}"
    finally:
        cluster.stop()
        api.close()
