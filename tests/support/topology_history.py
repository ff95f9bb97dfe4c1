"""Random histories of a cluster for the topology controller's property tests, and what
must hold after a pass: see tests/topology_controller/test_properties.py and test_faults.py."""

from __future__ import annotations

from hypothesis import strategies as st

from support.topology_world import group, levels, node, node_models, topology, typed
from tandem.api.validation import check_topology
from tandem.backends.registry import get_backend
from tandem.errors import InputError
from tandem.topology_controller.kinds import key_of
from tandem.topology_controller.ownership import FINALIZER, MANAGED_BY_LABEL, TOPOLOGY_LABEL
from tandem.topology_controller.reconcile import TopologySettings

BACKENDS = ("volcano", "kai")
SETTINGS = TopologySettings(BACKENDS)
KINDS = {"volcano": "HyperNode", "kai": "Topology.kai.scheduler"}
NODES = [f"n{i}" for i in range(6)]
TOPOLOGIES = ["default", "t2"]
LEVEL_LISTS = [("block", "rack", "host"), ("rack", "host"), ("block", "rack"), ("rack",), ("rack", "rack")]  # the last one invalid
GROUPS = [("ns", "g1"), ("ns", "g2")]

label_values = st.fixed_dictionaries({}, optional={"block": st.sampled_from(["b0", "b1"]), "rack": st.sampled_from(["r0", "r1", "r2"])})
ops = st.one_of(
    st.tuples(st.just("node"), st.sampled_from(NODES), label_values),
    st.tuples(st.just("drop-node"), st.sampled_from(NODES), st.none()),
    st.tuples(st.just("topology"), st.sampled_from(TOPOLOGIES), st.sampled_from(LEVEL_LISTS)),
    st.tuples(st.just("drop-topology"), st.sampled_from(TOPOLOGIES), st.none()),
    st.tuples(st.just("group"), st.sampled_from(GROUPS), st.sampled_from(TOPOLOGIES)),
    st.tuples(st.just("drop-group"), st.sampled_from(GROUPS), st.none()),
)

FOREIGN = [
    # only the managed-by label, on a name tandem wants when t2 exists
    {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "t2", "labels": {MANAGED_BY_LABEL: "tandem"}},
     "spec": {"levels": [{"nodeLabel": "x"}]}},
    # only the topology label
    {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "mine", "labels": {TOPOLOGY_LABEL: "default"}},
     "spec": {"levels": [{"nodeLabel": "y"}]}},
]


def run(world, op):
    verb, key, arg = op
    exists = lambda kind, ns, name: any(o["metadata"]["name"] == name for o in world.list(kind, ns))  # noqa: E731
    if verb == "node":
        if exists("Node", None, key):
            world.delete("Node", None, key)
        world.create(node(key, **arg))
    elif verb == "drop-node" and exists("Node", None, key):
        world.delete("Node", None, key)
    elif verb == "topology":
        if exists("ClusterTopology", None, key):
            current = world.get("ClusterTopology", None, key)
            if not current["metadata"].get("deletionTimestamp"):
                world.patch("ClusterTopology", None, key, {"spec": {"levels": levels(*arg)}})
        else:
            world.create(topology(key, levels(*arg)))
    elif verb == "drop-topology" and exists("ClusterTopology", None, key):
        world.delete("ClusterTopology", None, key)
    elif verb == "group":
        if exists("InferenceGroup", key[0], key[1]):
            world.delete("InferenceGroup", key[0], key[1])
        world.create(group(key[0], key[1], arg))
    elif verb == "drop-group" and exists("InferenceGroup", key[0], key[1]):
        world.delete("InferenceGroup", key[0], key[1])


def owned_by(world, kind, name):
    return {o["metadata"]["name"]: o for o in world.list(kind)
            if o["metadata"].get("labels", {}).get(MANAGED_BY_LABEL) == "tandem" and o["metadata"]["labels"].get(TOPOLOGY_LABEL) == name}


def check(world, foreign):
    nodes = node_models(world.list("Node"))
    present = {t["metadata"]["name"]: t for t in world.list("ClusterTopology")}
    users = {}
    for g in world.list("InferenceGroup"):
        users.setdefault(g["spec"]["topologyName"], []).append(f"{g['metadata']['namespace']}/{g['metadata']['name']}")
    for name, raw in present.items():
        if raw["metadata"].get("deletionTimestamp"):
            assert users.get(name), f"{name} is being deleted with no group naming it, yet it is still there"
            assert FINALIZER in raw["metadata"]["finalizers"]
            ready = {c["type"]: c for c in raw["status"]["conditions"]}["Ready"]
            assert ready["reason"] == "DeletionBlocked" and all(u in ready["message"] for u in users[name])
            continue
        assert raw["metadata"]["finalizers"] == [FINALIZER]
        model = typed(raw)
        conditions = {c["type"]: c for c in raw["status"]["conditions"]}
        if check_topology(model):
            assert conditions["Ready"]["reason"] == "InvalidSpec"
            continue
        degraded = conditions["Degraded"]
        for backend in BACKENDS:
            kind = KINDS[backend]
            try:
                expected = {o["metadata"]["name"]: o["spec"] for o in get_backend(backend).render_topology(model, nodes)}
            except InputError:
                assert "BackendRefused" in degraded["reason"] or f"{backend}: " in degraded["message"]
                continue
            taken = {n for n in expected if any(key_of(f) == kind and f["metadata"]["name"] == n for f in foreign)}
            assert {n: o["spec"] for n, o in owned_by(world, kind, name).items()} == {n: s for n, s in expected.items() if n not in taken}
            for n in taken:
                assert f"{kind} {n} exists and is not tandem's" in degraded["message"]
    for kind in KINDS.values():
        for obj in world.list(kind):
            owner = obj["metadata"].get("labels", {}).get(TOPOLOGY_LABEL)
            if obj["metadata"].get("labels", {}).get(MANAGED_BY_LABEL) == "tandem" and owner:
                assert owner in present, f"{kind} {obj['metadata']['name']} names {owner}, which is gone"
    for before in foreign:
        assert world.get(key_of(before), None, before["metadata"]["name"]) == before
