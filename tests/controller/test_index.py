"""The cluster as observed from what changed equals the cluster observed from scratch.

Random sequences of writes (groups, pods, nodes, Services, ConfigMaps, topologies created,
changed and deleted) are replayed against the memory store; after each batch, `observe`
with a memo kept across the batches (fed by the store's journal, or by full lists when
the journal no longer reaches back) must see exactly what a fresh `observe` sees, and the
placement snapshot it kept up to date must equal one built from every node and pod.
"""

from __future__ import annotations

import copy

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from support.builders import cluster
from support.writes import OPS, Writer
from tandem.api.kube import Node, Pod
from tandem.cluster.memory import MemoryStore
from tandem.cluster.pods import assigned_node, pod_failed
from tandem.controller.memo import Memo
from tandem.controller.observe import observe
from tandem.topology import ClusterSnapshot

def seen(state) -> tuple:
    groups = tuple((g.key, g.raw, g.pods, g.companions, g.valid, tuple(p.message for p in g.problems)) for g in state.groups)
    return groups, dict(state.nodes), dict(state.pods), state.deleting_groups, state.topology_versions


def built(store: MemoryStore) -> ClusterSnapshot:
    nodes = [Node.model_validate(n) for n in store.list("Node")]
    pods = []
    for pod in store.list("Pod"):
        node = assigned_node(pod)
        if node and not pod_failed(pod):
            pods.append(Pod.model_validate({**pod, "spec": {**pod["spec"], "nodeName": node}}))
    return ClusterSnapshot.build(nodes, pods)[0]


def check(store: MemoryStore, memo: Memo) -> None:
    kept = observe(store.snapshot(), memo)
    assert seen(kept) == seen(observe(store.snapshot()))
    snapshot, _ = memo.placement.snapshot()
    scratch = built(store)
    assert snapshot.node_names == scratch.node_names and snapshot.resources == scratch.resources
    for name in ("allocatable", "used", "schedulable"):
        assert np.array_equal(getattr(snapshot, name), getattr(scratch, name)), name


@settings(max_examples=40, deadline=None)
@given(OPS, st.sampled_from([10_000, 5]))
def test_observing_what_changed_equals_observing_everything(batches, history):
    store = MemoryStore(history=history)  # history 5: the journal often no longer reaches back
    for obj in cluster("rack=2,host=3"):
        store.create(copy.deepcopy(obj))
    memo, writer = Memo(), Writer(store)
    check(store, memo)
    for batch in batches:
        for op, n in batch:
            writer.apply(op, n)
        check(store, memo)
    if history == 10_000:
        assert memo.index.lists == 1, "after the first pass, only what changed is read"


def test_a_settled_pass_reads_nothing_and_a_heartbeat_validates_nothing():
    store = MemoryStore()
    for obj in cluster("rack=2,host=3"):
        store.create(copy.deepcopy(obj))
    memo = Memo()
    node = store.list("Node")[0]["metadata"]["name"]
    store.patch_status("Node", None, node, {"status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "first"}]}})
    observe(store.snapshot(), memo)
    memo.placement.snapshot()
    before = dict(memo.placement_keys)
    lists = memo.index.lists
    store.patch_status("Node", None, node, {"status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "later"}]}})
    rebuilds = memo.placement.rebuilds
    state = observe(store.snapshot(), memo)
    memo.placement.snapshot()
    assert memo.placement_keys == before and memo.placement.rebuilds == rebuilds and memo.index.lists == lists
    assert state.nodes[("", node)]["status"]["conditions"][0]["lastHeartbeatTime"] == "later"
