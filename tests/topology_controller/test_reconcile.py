"""The topology controller's pass against the memory store: what it writes, and what not."""

from __future__ import annotations

import pytest

from support.topology_world import Clock, group, levels, node, node_models, rack_nodes, spec_and_labels, store, topology, typed
from tandem.api.topology_status import ClusterTopologyStatus
from tandem.backends.registry import get_backend
from tandem.cluster.ports import Forbidden, ServiceUnavailable
from tandem.errors import InputError
from tandem.topology_controller.ownership import FINALIZER, FLAVORS_ANNOTATION, MANAGED_BY_LABEL, TOPOLOGY_LABEL
from tandem.topology_controller.reconcile import TopologyMemo, TopologySettings, reconcile

VOLCANO = TopologySettings(("volcano",))


def _world(nodes=None, *topologies):
    world = store()
    for t in topologies or (topology(),):
        world.create(t)
    for n in nodes if nodes is not None else rack_nodes(2, 2, 2):
        world.create(n)
    return world


def _owned(world, kind):
    return [o for o in world.list(kind) if o["metadata"].get("labels", {}).get(MANAGED_BY_LABEL) == "tandem" and TOPOLOGY_LABEL in o["metadata"]["labels"]]


def _expected(world, kind, name="default", backend="volcano"):
    raw = world.get("ClusterTopology", None, name)
    return {
        (o["kind"], o["metadata"]["name"]): o["spec"]
        for o in get_backend(backend).render_topology(typed(raw), node_models(world.list("Node")))
        if o["kind"] == kind
    }


def _status(world, name="default"):
    return world.get("ClusterTopology", None, name)["status"]


def _condition(world, kind, name="default"):
    return next(c for c in _status(world, name)["conditions"] if c["type"] == kind)


def test_first_pass_writes_the_objects_status_and_finalizer_and_the_second_nothing():
    world = _world()
    report = reconcile(world, 10.0, VOLCANO)
    assert report.failures == 0 and report.topologies == 1
    assert {k: s for k, (s, _) in spec_and_labels(_owned(world, "HyperNode")).items()} == _expected(world, "HyperNode")
    raw = world.get("ClusterTopology", None, "default")
    assert raw["metadata"]["finalizers"] == [FINALIZER]
    status = ClusterTopologyStatus.model_validate(raw["status"])
    assert status.backends == ["volcano"] and status.domain_counts == "2/4/8"
    again = reconcile(world, 11.0, VOLCANO)
    assert again.writes == 0 and again.events == ()
    with_memo, memo = None, TopologyMemo()
    for now in (12.0, 13.0):
        with_memo = reconcile(world, now, VOLCANO, memo)
    assert with_memo is not None and with_memo.writes == 0


def test_no_backends_keeps_only_the_status():
    world = _world()
    report = reconcile(world, 1.0)
    assert report.by_kind == ((("patch", "ClusterTopology"), 1), (("patch_status", "ClusterTopology"), 1))
    assert world.list("HyperNode") == [] and _condition(world, "Ready")["status"] == "True"


def test_a_new_rack_writes_its_hypernodes_and_the_changed_parent_only():
    world = _world(rack_nodes(2, 2, 2))
    memo = TopologyMemo()
    reconcile(world, 1.0, VOLCANO, memo)
    before = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in world.list("HyperNode")}
    for h in range(2):
        world.create(node(f"new-{h}", block="b0", rack="r9"))
    report = reconcile(world, 2.0, VOLCANO, memo)
    after = {o["metadata"]["name"]: o for o in world.list("HyperNode")}
    created = set(after) - set(before)
    changed = {n for n in before if after[n]["metadata"]["resourceVersion"] != before[n]}
    expected = _expected(world, "HyperNode")
    assert {("HyperNode", n) for n in after} == set(expected)
    assert created and all("r9" in n for n in created)
    assert changed == {"default-block-b0"}  # the parent block; the root, the other block and racks untouched
    assert report.count("create", "HyperNode") == len(created) and report.count("patch", "HyperNode") == 1
    assert report.count("delete", "HyperNode") == 0


def test_a_removed_rack_loses_its_hypernodes_and_a_relabelled_node_moves():
    world = _world(rack_nodes(1, 2, 1))
    reconcile(world, 1.0, VOLCANO)
    world.delete("Node", None, "n-0-1-0")
    world.patch("Node", None, "n-0-0-0", {"metadata": {"labels": {"net.example.com/rack": "r5"}}})
    report = reconcile(world, 2.0, VOLCANO)
    assert {("HyperNode", o["metadata"]["name"]) for o in world.list("HyperNode")} == set(_expected(world, "HyperNode"))
    assert report.count("delete", "HyperNode") >= 2 and not any("r1" in o["metadata"]["name"] for o in world.list("HyperNode"))


def test_objects_without_both_labels_are_never_touched():
    world = _world()
    half = {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "default", "labels": {MANAGED_BY_LABEL: "tandem"}},
            "spec": {"levels": [{"nodeLabel": "x"}]}}
    world.create(half)
    before = world.get("Topology.kai.scheduler", None, "default")
    reconcile(world, 1.0, TopologySettings(("kai",)))
    assert world.get("Topology.kai.scheduler", None, "default") == before
    degraded = _condition(world, "Degraded")
    assert degraded["reason"] == "NameTaken" and "Topology.kai.scheduler default exists and is not tandem's" in degraded["message"]


def test_foreign_hypernodes_stop_volcano_for_the_topology_and_say_how_to_adopt():
    world = _world()
    for i in range(7):
        world.create({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": f"rack-{i}"},
                      "spec": {"tier": 1, "members": []}})
    reconcile(world, 1.0, VOLCANO)
    assert sorted(o["metadata"]["name"] for o in world.list("HyperNode")) == [f"rack-{i}" for i in range(7)]
    degraded = _condition(world, "Degraded")
    assert degraded["reason"] == "ForeignHyperNodes"
    assert "7 HyperNode(s)" in degraded["message"] and "rack-0, rack-1" in degraded["message"] and "and 2 more" in degraded["message"]
    assert "tandem topology from-hypernodes" in degraded["message"]


def test_a_backend_refusing_the_levels_is_degraded_backend_refused_and_its_object_left():
    world = _world(rack_nodes(1, 1, 1))
    koord = TopologySettings(("koordinator",))
    reconcile(world, 1.0, koord)
    before = world.get("ClusterNetworkTopology", None, "default")
    # a level Koordinator would name as its reserved cluster layer
    world.patch("ClusterTopology", None, "default", {"spec": {"levels": [{"name": "cluster-topology", "nodeLabel": "net.example.com/block"}, *levels("rack", "host")]}})
    report = reconcile(world, 2.0, koord)
    assert report.failures == 0 and world.get("ClusterNetworkTopology", None, "default") == before
    degraded = _condition(world, "Degraded")
    assert degraded["reason"] == "BackendRefused" and degraded["message"].startswith("koordinator: ") and "reserved layer" in degraded["message"]


def test_koordinator_follows_one_topology_and_says_so_to_the_others():
    clock = Clock()
    world = store(clock)
    world.create(topology("zeta", levels("block", "rack")))
    clock.now += 10
    world.create(topology("alpha", levels("block", "rack")))
    world.create(node("n1", block="b", rack="r"))
    koord = TopologySettings(("koordinator",))
    reconcile(world, 1.0, koord)
    cnt = world.get("ClusterNetworkTopology", None, "default")
    assert cnt["metadata"]["labels"][TOPOLOGY_LABEL] == "zeta"  # the oldest
    taken = _condition(world, "Degraded", "alpha")
    assert taken["reason"] == "KoordinatorTopologyTaken" and "'zeta'" in taken["message"]
    world.create(topology("default", levels("rack")))  # one named default wins: the object moves to it
    reconcile(world, 2.0, koord)
    moved = world.get("ClusterNetworkTopology", None, "default")
    assert moved["metadata"]["uid"] == cnt["metadata"]["uid"]
    assert moved["metadata"]["labels"][TOPOLOGY_LABEL] == "default"
    assert [r["name"] for r in moved["metadata"]["ownerReferences"]] == ["default"]
    assert _condition(world, "Degraded", "zeta")["reason"] == "KoordinatorTopologyTaken"


def _flavor(name, **spec):
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def test_kueue_resource_flavors_get_the_topology_name_where_asked():
    asked = topology(annotations={FLAVORS_ANNOTATION: "gpu, nolabels,missing,other"})
    world = _world(rack_nodes(1, 1, 1), asked)
    world.create(_flavor("gpu", nodeLabels={"pool": "gpu"}))
    world.create(_flavor("nolabels"))
    world.create(_flavor("other", nodeLabels={"a": "b"}, topologyName="else"))
    world.create(_flavor("untouched", nodeLabels={"a": "b"}))
    report = reconcile(world, 1.0, TopologySettings(("kueue",)))
    assert report.count("patch", "ResourceFlavor") == 1
    assert world.get("ResourceFlavor", None, "gpu")["spec"]["topologyName"] == "default"
    assert "topologyName" not in world.get("ResourceFlavor", None, "nolabels")["spec"]
    assert world.get("ResourceFlavor", None, "other")["spec"]["topologyName"] == "else"
    assert "topologyName" not in world.get("ResourceFlavor", None, "untouched")["spec"]
    message = _condition(world, "Degraded")["message"]
    assert "ResourceFlavor missing" in message and "nolabels has no spec.nodeLabels" in message and "immutable" in message
    world.delete("ClusterTopology", None, "default")
    reconcile(world, 2.0, TopologySettings(("kueue",)))
    assert world.get("ResourceFlavor", None, "gpu")["spec"]["topologyName"] == "default"  # never undone, never deleted


def test_deletion_waits_for_the_groups_naming_it_then_takes_the_owned_objects():
    world = _world()
    world.create(group("serving", "llama", "default"))
    world.create(group("serving", "other", "elsewhere"))
    reconcile(world, 1.0, VOLCANO)
    world.delete("ClusterTopology", None, "default")
    report = reconcile(world, 2.0, VOLCANO)
    raw = world.get("ClusterTopology", None, "default")
    assert raw["metadata"]["finalizers"] == [FINALIZER] and _owned(world, "HyperNode")
    ready = _condition(world, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "DeletionBlocked") and "serving/llama" in ready["message"]
    assert "serving/other" not in ready["message"]
    assert [e for e in report.events if "DeletionBlocked" in e]
    events = [e for e in world.list("Event") if e["reason"] == "DeletionBlocked"]
    assert len(events) == 1 and events[0]["type"] == "Warning" and "serving/llama" in events[0]["message"]
    assert reconcile(world, 3.0, VOLCANO).writes == 0  # blocked, said once
    world.delete("InferenceGroup", "serving", "llama")
    reconcile(world, 4.0, VOLCANO)
    assert world.list("ClusterTopology") == [] and world.list("HyperNode") == []


def test_owned_objects_of_a_topology_gone_are_deleted_with_a_uid_precondition():
    world = _world()
    reconcile(world, 1.0, VOLCANO)
    orphan = dict(world.get("HyperNode", None, "default"))
    orphan = {**orphan, "metadata": {"name": "ghost", "labels": {MANAGED_BY_LABEL: "tandem", TOPOLOGY_LABEL: "gone"}}}
    world.create(orphan)
    report = reconcile(world, 2.0, VOLCANO)
    assert report.count("delete", "HyperNode") == 1 and "ghost" not in [o["metadata"]["name"] for o in world.list("HyperNode")]


def test_an_object_taken_over_after_the_pass_read_it_is_not_deleted():
    """A delete is of the object as the pass read it (resourceVersion precondition), not of
    whatever carries its uid by then: one whose owner took tandem's labels off meanwhile
    (informers lag) is no longer tandem's, and stays."""
    from tandem.topology_controller.apply import apply
    from tandem.topology_controller.decide import decide
    from tandem.topology_controller.observe import observe

    world = _world()
    reconcile(world, 1.0, VOLCANO)
    ghost = dict(world.get("HyperNode", None, "default"))
    world.create({**ghost, "metadata": {"name": "ghost", "labels": {MANAGED_BY_LABEL: "tandem", TOPOLOGY_LABEL: "gone"}}})
    decisions = decide(observe(world.snapshot(), ("volcano",)), 2.0)
    world.patch("HyperNode", None, "ghost", {"metadata": {"labels": {MANAGED_BY_LABEL: "someone-else", TOPOLOGY_LABEL: None}}})
    applied = apply(world, decisions)
    assert world.get("HyperNode", None, "ghost"), "taken over: not tandem's to delete"
    assert [e.code for e in applied.errors] == [409] and applied.errors[0].retryable


def test_an_invalid_topology_is_reported_and_its_objects_left():
    world = _world()
    reconcile(world, 1.0, VOLCANO)
    count = len(world.list("HyperNode"))
    world.patch("ClusterTopology", None, "default", {"spec": {"levels": levels("block", "rack") + [{"name": "rack", "nodeLabel": "x/y"}]}})
    reconcile(world, 2.0, VOLCANO)
    assert len(world.list("HyperNode")) == count
    ready = _condition(world, "Ready")
    assert ready["reason"] == "InvalidSpec" and "spec.levels[2].name" in ready["message"]
    assert _status(world)["observedGeneration"] == 2
    world.delete("ClusterTopology", None, "default")  # invalid, and no group names it: it goes, and its objects
    reconcile(world, 3.0, VOLCANO)
    assert world.list("ClusterTopology") == [] and world.list("HyperNode") == []


def test_unlabeled_nodes_are_counted_and_named():
    world = _world(rack_nodes(1, 1, 2) + [node("bare-1"), node("bare-0", block="b0")])
    reconcile(world, 1.0)
    status = ClusterTopologyStatus.model_validate(_status(world))
    assert (status.nodes, status.placeable_nodes, status.unlabeled_nodes) == (4, 2, 2)
    assert status.unlabeled_examples == ["bare-0", "bare-1"]
    assert [(lv.name, lv.unlabeled_nodes, lv.unlabeled_examples) for lv in status.levels] == [("block", 1, ["bare-1"]), ("rack", 1, ["bare-0"]), ("host", 0, [])]
    assert _condition(world, "Degraded")["reason"] == "UnlabeledNodes"


def test_a_level_change_rewrites_the_objects():
    world = _world()
    both = TopologySettings(("volcano", "kai"))
    reconcile(world, 1.0, both)
    before = {o["metadata"]["name"]: o["spec"] for o in _owned(world, "HyperNode")}
    world.patch("ClusterTopology", None, "default", {"spec": {"levels": levels("rack", "host")}})
    report = reconcile(world, 2.0, both)
    assert report.failures == 0
    after = {name: spec for (_, name), spec in _expected(world, "HyperNode").items()}
    assert {o["metadata"]["name"]: o["spec"] for o in _owned(world, "HyperNode")} == after
    assert world.get("Topology.kai.scheduler", None, "default")["spec"] == _expected(world, "Topology", backend="kai")[("Topology", "default")]
    created, deleted = len(set(after) - set(before)), len(set(before) - set(after))
    updated = sum(1 for n in set(after) & set(before) if after[n] != before[n]) + 1  # and KAI's Topology
    assert created and deleted
    assert (report.count("create", "HyperNode"), report.count("delete", "HyperNode"), report.patched) == (created, deleted, updated)
    events = [e for e in world.list("Event") if e["reason"] == "TopologyUpdated"]
    assert f"kai, volcano: created {created}, updated {updated}, deleted {deleted}" in [e["message"] for e in events]


class _Failing:
    """The store, refusing some writes: `refuse` maps (verb, kind) to the error to raise."""

    def __init__(self, world, refuse):
        self.world, self.refuse = world, refuse

    def __getattr__(self, name):
        return getattr(self.world, name)

    def _check(self, verb, kind):
        error = self.refuse.get((verb, kind))
        if error is not None:
            raise error

    def create(self, obj):
        self._check("create", obj["kind"])
        return self.world.create(obj)

    def patch_status(self, kind, namespace, name, patch, *, resource_version=None):
        self._check("patch_status", kind)
        return self.world.patch_status(kind, namespace, name, patch, resource_version=resource_version)


def test_a_refused_write_is_isolated_and_told_retryable_or_terminal():
    world = _world()
    report = reconcile(_Failing(world, {("create", "HyperNode"): Forbidden("no")}), 1.0, VOLCANO)
    assert report.failures == len(_expected(world, "HyperNode")) and not report.retryable and report.requeue_after is None
    assert world.get("ClusterTopology", None, "default")["status"]  # the status went through
    world.create(node("late", block="b0", rack="r0"))  # a status to write
    report = reconcile(_Failing(world, {("patch_status", "ClusterTopology"): ServiceUnavailable("later")}), 2.0, VOLCANO)
    assert report.retryable and report.failures == 1
    assert len(_owned(world, "HyperNode")) == len(_expected(world, "HyperNode"))


def test_topology_updated_tells_the_writes_that_went_through_not_those_refused():
    """A create the API refuses is not told as made: no Normal TopologyUpdated event for
    writes that all failed (nor one more every pass while they keep failing); when some go
    through, the event counts those."""
    world = _world()
    memo = TopologyMemo()
    refusing = _Failing(world, {("create", "HyperNode"): Forbidden("no")})
    for now in (1.0, 2.0):
        report = reconcile(refusing, now, VOLCANO, memo)
        assert not [e for e in report.events if "TopologyUpdated" in e]
    assert [e for e in world.list("Event") if e["reason"] == "TopologyUpdated"] == []
    report = reconcile(world, 1.0 + TopologySettings().refusal_retry, VOLCANO, memo)  # the refused creates' retry
    made = report.count("create", "HyperNode")
    assert made and [e["message"] for e in world.list("Event") if e["reason"] == "TopologyUpdated"] == [f"volcano: created {made}, updated 0, deleted 0"]


def test_kai_and_kueue_topologies_are_kept_side_by_side_under_their_qualified_kinds():
    """Both backends' kinds are named `Topology`: each is kept in its own group, and
    writing one never touches the other."""
    world = _world()
    both = TopologySettings(("kai", "kueue"))
    report = reconcile(world, 1.0, both)
    assert report.failures == 0
    wanted = {"Topology.kai.scheduler": _expected(world, "Topology", backend="kai"), "Topology.kueue.x-k8s.io": _expected(world, "Topology", backend="kueue")}
    for key, expected in wanted.items():
        assert {("Topology", o["metadata"]["name"]): o["spec"] for o in _owned(world, key)} == expected
        assert report.count("create", key) == 1
    assert {o["apiVersion"].partition("/")[0] for key in wanted for o in world.list(key)} == {"kai.scheduler", "kueue.x-k8s.io"}
    assert reconcile(world, 2.0, both).writes == 0
    [kai] = world.list("Topology.kai.scheduler")
    [kueue] = world.list("Topology.kueue.x-k8s.io")
    world.delete("Topology.kai.scheduler", None, kai["metadata"]["name"])
    report = reconcile(world, 3.0, both)
    assert report.count("create", "Topology.kai.scheduler") == 1 and report.count("create", "Topology.kueue.x-k8s.io") == 0
    assert world.list("Topology.kueue.x-k8s.io") == [kueue], "Kueue's Topology was left as it was"


def test_a_node_joining_an_existing_rack_renders_nothing_again_and_writes_only_the_status():
    world = _world(rack_nodes(1, 2, 2))
    memo = TopologyMemo()
    reconcile(world, 1.0, TopologySettings(("volcano", "kai")), memo)
    renders = memo.renders
    world.create(node("joiner", block="b0", rack="r1"))
    report = reconcile(world, 2.0, TopologySettings(("volcano", "kai")), memo)
    assert memo.renders == renders  # Volcano reads the tier labels (hostname is not a tier), KAI no node
    assert report.by_kind == ((("patch_status", "ClusterTopology"), 1),)
    world.create(node("pioneer", block="b0", rack="r7"))
    report = reconcile(world, 3.0, TopologySettings(("volcano", "kai")), memo)
    assert memo.renders == renders + 1 and report.count("create", "HyperNode") == 1 and report.count("patch", "HyperNode") == 1


def test_a_group_without_topology_name_uses_default_and_so_holds_its_deletion():
    """`spec.topologyName` defaults to `default` (the model, the CRD, the webhook): a group that
    leaves it out still keeps the topology named `default` from going."""
    world = _world()
    unnamed = group("serving", "llama", "default")
    del unnamed["spec"]["topologyName"]
    world.create(unnamed)
    reconcile(world, 1.0, VOLCANO)
    world.delete("ClusterTopology", None, "default")
    reconcile(world, 2.0, VOLCANO)
    assert world.get("ClusterTopology", None, "default")["metadata"]["finalizers"] == [FINALIZER]
    assert "serving/llama" in _condition(world, "Ready")["message"]


@pytest.mark.parametrize("backend", ["volcano", "kai", "koordinator"])
def test_objects_applied_from_tandem_render_are_taken_over_not_called_foreign(backend):
    """A user who applied `tandem render --topology-only` before running the controller: its
    objects carry tandem's labels, so the controller owns them (adds its owner reference) in
    place, neither refusing to write beside them nor deleting and re-creating them."""
    world = _world()
    raw = world.get("ClusterTopology", None, "default")
    for obj in get_backend(backend).render_topology(typed(raw), node_models(world.list("Node"))):
        world.create(obj)
    uids = {(o["kind"], o["metadata"]["name"]): o["metadata"]["uid"] for o in world.snapshot().list(_kind(backend))}
    settings = TopologySettings((backend,))
    report = reconcile(world, 1.0, settings)
    assert report.created == 0 and report.deleted == 0
    kept = {(o["kind"], o["metadata"]["name"]): o for o in world.list(_kind(backend))}
    assert {k: o["metadata"]["uid"] for k, o in kept.items()} == uids
    assert all(o["metadata"]["ownerReferences"][0]["name"] == "default" for o in kept.values())
    assert _condition(world, "Degraded")["status"] == "False"
    assert reconcile(world, 2.0, settings).writes == 0


def _kind(backend):
    return {"volcano": "HyperNode", "kai": "Topology.kai.scheduler", "koordinator": "ClusterNetworkTopology"}[backend]
