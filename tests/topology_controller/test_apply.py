"""Apply: each write on its own; the finalizer's removal waits for the deletes before it."""

from __future__ import annotations

from support.topology_world import store, topology
from tandem.cluster.ports import Forbidden, ObjectRef, TooManyRequests
from tandem.cluster.writes import RecordEvent
from tandem.topology_controller.actions import CreateObject, DeleteObject, PatchObject, TopologyActions, TopologyDecisions
from tandem.topology_controller.apply import apply


class _Refusing:
    def __init__(self, world, deletes=None, events=False):
        self.world, self.deletes, self.events = world, deletes, events

    def __getattr__(self, name):
        return getattr(self.world, name)

    def delete(self, kind, namespace, name, **options):
        if self.deletes is not None and name in self.deletes:
            raise self.deletes[name]
        return self.world.delete(kind, namespace, name, **options)

    def record_event(self, *args):
        if self.events:
            raise TooManyRequests("slow down")
        return self.world.record_event(*args)


def _hypernode(name):
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name}, "spec": {"tier": 1}}


def _removal(world, names):
    raw = world.get("ClusterTopology", None, "default")
    actions = [DeleteObject("HyperNode", n) for n in names]
    actions.append(PatchObject("ClusterTopology", "default", {"metadata": {"finalizers": None}}, raw["metadata"]["resourceVersion"]))
    return TopologyDecisions((TopologyActions("default", tuple(actions), after_deletes=len(names)),))


def test_a_failed_delete_keeps_the_finalizer_and_a_missing_object_counts_as_deleted():
    world = store()
    world.create({**topology(), "metadata": {"name": "default", "finalizers": ["tandem.dev/topology-in-use"]}})
    world.create(_hypernode("a"))
    applied = apply(_Refusing(world, {"a": Forbidden("no")}), _removal(world, ["a", "gone"]))
    assert applied.skipped == 1 and [e.code for e in applied.errors] == [403] and not applied.errors[0].retryable
    assert world.get("ClusterTopology", None, "default")["metadata"]["finalizers"] == ["tandem.dev/topology-in-use"]
    applied = apply(world, _removal(world, ["a", "gone"]))
    assert applied.errors == [] and applied.deleted == 1 and applied.patched == 1
    assert world.get("ClusterTopology", None, "default")["metadata"].get("finalizers") is None


def test_one_topologys_failure_stops_no_other_write_and_a_refused_event_is_dropped():
    world = store()
    world.create(_hypernode("taken"))
    decisions = TopologyDecisions((
        TopologyActions("a", (CreateObject(_hypernode("taken")), CreateObject(_hypernode("a1")),
                              RecordEvent(ObjectRef("ClusterTopology", None, "a"), "Normal", "TopologyUpdated", "x"))),
        TopologyActions("b", (CreateObject(_hypernode("b1")),)),
    ))
    applied = apply(_Refusing(world, events=True), decisions)
    assert [(e.subject, e.code, e.retryable) for e in applied.errors] == [("a", 409, False)]
    assert applied.created == 2 and applied.events_dropped == 1
    assert sorted(o["metadata"]["name"] for o in world.list("HyperNode")) == ["a1", "b1", "taken"]


def test_both_controllers_report_failed_writes_and_record_events_in_one_shape():
    """One WriteError and one RecordEvent (tandem.cluster.writes), not a copy per controller."""
    import tandem.controller
    import tandem.controller.actions
    import tandem.topology_controller.actions
    import tandem.topology_controller.reconcile
    from tandem.cluster.writes import RecordEvent as Shared, WriteError

    assert tandem.controller.WriteError is WriteError and tandem.topology_controller.reconcile.WriteError is WriteError
    assert tandem.controller.actions.RecordEvent is Shared and tandem.topology_controller.actions.RecordEvent is Shared
    assert Shared(ObjectRef("ClusterTopology", None, "a"), "Warning", "X", "y").line == "a: X: y"


class _Garbling(_Refusing):
    """A client that cannot decode the API's answer to some creates (it raises, not an ApiError)."""

    def __init__(self, world, garbled):
        super().__init__(world)
        self.garbled = garbled

    def create(self, obj):
        if obj["metadata"]["name"] in self.garbled:
            raise ValueError("Expecting value: line 1 column 1 (char 0)")
        return self.world.create(obj)

    def record_event(self, *args):
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")


def test_a_write_the_client_fails_on_is_that_writes_retryable_failure_only():
    """An answer the client cannot decode stops neither the topology's other writes nor
    another topology's: counted as a retryable failure with the exception kept for the log."""
    world = store()
    decisions = TopologyDecisions((
        TopologyActions("a", (CreateObject(_hypernode("a0")), CreateObject(_hypernode("a1")),
                              RecordEvent(ObjectRef("ClusterTopology", None, "a"), "Normal", "TopologyUpdated", "x"))),
        TopologyActions("b", (CreateObject(_hypernode("b1")),)),
    ))
    applied = apply(_Garbling(world, {"a0"}), decisions)
    assert [(e.subject, e.action, e.code, e.reason, e.retryable) for e in applied.errors] == [("a", "create HyperNode a0", 0, "ValueError", True)]
    assert isinstance(applied.errors[0].cause, ValueError) and "Expecting value" in str(applied.errors[0])
    assert applied.created == 2 and applied.events_dropped == 1
    assert sorted(o["metadata"]["name"] for o in world.list("HyperNode")) == ["a1", "b1"]
