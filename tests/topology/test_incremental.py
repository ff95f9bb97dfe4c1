"""The placement snapshot kept up to date event by event equals one built from scratch,
whatever sequence of node and pod events came in between (random sequences replayed)."""

from __future__ import annotations

import copy

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from support.builders import bound_pod
from tandem.api.kube import Node, Pod
from tandem.api.naming import EXCLUSIVE_LABEL, GROUP_LABEL, UNIT_LABEL
from tandem.api.resources import ClusterTopology
from tandem.topology import ClusterSnapshot, TopologyView
from tandem.topology.generate import generate_cluster
from tandem.topology.incremental import SnapshotCache
from tandem.topology.snapshot import NodeFacts

TOPOLOGY, NODES = generate_cluster([("rack", 2), ("host", 3)], 8)
EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["add-pod", "add-pod", "delete-pod", "move-pod", "resize-pod", "fail-pod", "cordon", "uncordon",
                         "not-ready", "ready", "relabel", "delete-node", "add-node", "exclusive", "odd-resource", "unknown-node"]),
        st.integers(0, 50),
        st.booleans(),  # compare after this event (else it is batched with the next ones)
    ),
    max_size=40,
)


class World:
    """Nodes and pods as a pass would see them, with versions bumped on each change."""

    def __init__(self) -> None:
        self.nodes = {n["metadata"]["name"]: copy.deepcopy(n) for n in NODES}
        self.pods: dict[str, dict] = {}
        self.version = 0
        self.made = 0

    def bump(self, obj: dict) -> None:
        self.version += 1
        obj["metadata"]["uid"] = obj["metadata"].get("uid") or f"uid-{self.version}"
        obj["metadata"]["resourceVersion"] = str(self.version)

    def apply(self, event: str, n: int) -> None:
        names = sorted(self.nodes)
        pods = sorted(self.pods)
        node = names[n % len(names)] if names else "nowhere"
        if event == "add-pod" or (event in ("delete-pod", "move-pod", "resize-pod", "fail-pod", "exclusive") and not pods):
            self.made += 1
            pod = bound_pod(f"p{self.made}", node, 1 + n % 4)
            self.bump(pod)
            self.pods[pod["metadata"]["name"]] = pod
            return
        if event in ("delete-pod", "move-pod", "resize-pod", "fail-pod", "exclusive", "odd-resource", "unknown-node"):
            if not pods:
                return
            pod = self.pods[pods[n % len(pods)]]
            if event == "delete-pod":
                del self.pods[pod["metadata"]["name"]]
                return
            if event == "move-pod":
                pod["spec"]["nodeName"] = node
            elif event == "resize-pod":
                pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = str(1 + (n + 1) % 4)
            elif event == "fail-pod":
                pod["status"]["phase"] = "Failed"
            elif event == "exclusive":
                pod["metadata"]["labels"] = {EXCLUSIVE_LABEL: "rack", GROUP_LABEL: "g", UNIT_LABEL: str(n % 3)}
            elif event == "odd-resource":  # a resource no node offers: new columns
                pod["spec"]["containers"][0]["resources"]["requests"]["example.com/fpga"] = "1"
            else:
                pod["spec"]["nodeName"] = "gone-node"
            self.bump(pod)
            return
        if not names and event != "add-node":
            return
        if event == "delete-node":
            del self.nodes[node]
            return
        if event == "add-node":
            fresh = copy.deepcopy(NODES[n % len(NODES)])
            fresh["metadata"]["name"] = f"extra-{n}"
            fresh["metadata"]["labels"]["kubernetes.io/hostname"] = f"extra-{n}"
            fresh["metadata"].pop("uid", None)
            self.nodes[f"extra-{n}"] = fresh
            self.bump(fresh)
            return
        target = self.nodes[node]
        if event == "cordon":
            target["spec"]["unschedulable"] = True
        elif event == "uncordon":
            target["spec"].pop("unschedulable", None)
        elif event in ("not-ready", "ready"):
            target["status"]["conditions"] = [{"type": "Ready", "status": "False" if event == "not-ready" else "True"}]
        else:
            target["metadata"]["labels"]["network.tandem.dev/rack"] = f"rack-{n % 3}"
        self.bump(target)

    def models(self) -> tuple[list, list]:
        nodes = [((n["metadata"]["uid"], n["metadata"]["resourceVersion"]), Node.model_validate(n)) for n in self.nodes.values()]
        pods = [(name, (p["metadata"]["uid"], p["metadata"]["resourceVersion"]), Pod.model_validate(p))
                for name, p in sorted(self.pods.items())]
        return nodes, pods


class Feed:
    """Tells a cache of every node and pod whose version changed since the last call, as the
    controller's index does."""

    def __init__(self, cache: SnapshotCache):
        self.cache = cache
        self.nodes: dict[str, tuple] = {}
        self.pods: dict[str, tuple] = {}

    def __call__(self, world: World) -> None:
        nodes, pods = world.models()
        now_nodes = {m.metadata.name: (v, m) for v, m in nodes}
        now_pods = {k: (v, m) for k, v, m in pods}
        for name in sorted(set(self.nodes) | set(now_nodes)):
            if self.nodes.get(name, (None,))[0] != now_nodes.get(name, (None,))[0]:
                version, model = now_nodes.get(name, ((), None))
                self.cache.node(name, version, None if model is None else NodeFacts.of(model))
        for key in sorted(set(self.pods) | set(now_pods)):
            if self.pods.get(key, (None,))[0] != now_pods.get(key, (None,))[0]:
                version, model = now_pods.get(key, ((), None))
                self.cache.pod(key, version, model)
        self.nodes, self.pods = now_nodes, now_pods


def same(a: ClusterSnapshot, b: ClusterSnapshot) -> None:
    for name in ("node_names", "labels", "resources", "problems", "taints", "tainted_nodes", "exclusive_pods", "node_index", "resource_index"):
        assert getattr(a, name) == getattr(b, name), name
    for name in ("allocatable", "used", "schedulable", "free"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


@settings(max_examples=60, deadline=None)
@given(EVENTS)
@example([("not-ready", 0, False), ("cordon", 1, False), ("not-ready", 4, True), ("ready", 0, False), ("uncordon", 1, True)])
def test_the_snapshot_kept_up_to_date_equals_one_built_from_scratch(events):
    world = World()
    for node in world.nodes.values():
        world.bump(node)
    cache = SnapshotCache()
    feed = Feed(cache)
    topology = ClusterTopology.model_validate(TOPOLOGY)
    steps = [("add-pod", 0, True), *events]
    for step, (event, n, look) in enumerate(steps):
        world.apply(event, n)
        feed(world)
        if not look and step < len(steps) - 1:
            continue
        nodes, pods = world.models()
        kept, kept_warnings = cache.snapshot()
        built, built_warnings = ClusterSnapshot.build([m for _, m in nodes], [m for _, _, m in pods])
        same(kept, built)
        assert kept_warnings == built_warnings
        view, rebuilt = cache.view(("default", "1"), topology, kept), TopologyView.build(topology, built)
        assert view.snapshot is kept and view.level_names == rebuilt.level_names and view.names == rebuilt.names
        for a, b in zip(view.dom, rebuilt.dom):
            assert np.array_equal(a, b)
        assert np.array_equal(view.usable, rebuilt.usable)
        assert view.exclusions == rebuilt.exclusions
        for depth in range(view.depth_count):
            for domain in range(view.domain_count(depth)):
                assert np.array_equal(view.members(depth, domain), rebuilt.members(depth, domain))


def test_a_pod_event_does_not_rebuild_the_nodes_part():
    world = World()
    for node in world.nodes.values():
        world.bump(node)
    cache = SnapshotCache()
    feed = Feed(cache)
    for step in range(20):
        world.apply("add-pod" if step % 3 else "move-pod", step)
        feed(world)
        cache.snapshot()
    assert cache.rebuilds == 1


def test_a_cordoned_node_is_patched_in_place_and_a_relabelled_one_rebuilds():
    world = World()
    for node in world.nodes.values():
        world.bump(node)
    cache = SnapshotCache()
    feed = Feed(cache)
    feed(world)
    topology = ClusterTopology.model_validate(TOPOLOGY)
    before = cache.view("t", topology, cache.snapshot()[0])
    world.apply("cordon", 0)
    feed(world)
    snapshot, _ = cache.snapshot()
    after = cache.view("t", topology, snapshot)
    assert cache.rebuilds == 1
    assert not snapshot.schedulable[0] and before.usable[0] and not after.usable[0]
    assert 0 not in after.members(0, 0).tolist()
    world.apply("relabel", 1)
    feed(world)
    cache.snapshot()
    assert cache.rebuilds == 2
