"""A write the API refused for good (403, 422) is sent once, told in the topology's status
(Degraded, WriteRefused), by one Warning event and one log line, and not sent again while
it and its object stay as they were; a changed write, or the retry after a while, is sent."""

from __future__ import annotations

import logging

from support.topology_world import node, rack_nodes, store, topology
from tandem.cluster.ports import Forbidden, Invalid
from tandem.topology_controller.actions import CreateObject, DeleteObject, PatchObject, PatchStatus
from tandem.topology_controller.reconcile import REFUSAL_REQUEUE_S, TopologyMemo, TopologySettings, reconcile
from tandem.topology_controller.refusal_gate import write_key
from tandem.topology_controller.runner import TopologyController

VOLCANO = TopologySettings(("volcano",))
RETRY = VOLCANO.refusal_retry


class _Refusing:
    """The store, refusing the writes `refuse` names ((verb, kind) -> error), and counting
    every write sent, by (verb, kind, name)."""

    def __init__(self, world, refuse):
        self.world, self.refuse, self.sent = world, dict(refuse), []

    def __getattr__(self, name):
        return getattr(self.world, name)

    def _send(self, verb, kind, name):
        self.sent.append((verb, kind, name))
        error = self.refuse.get((verb, kind))
        if error is not None:
            raise error

    def create(self, obj):
        self._send("create", obj["kind"], obj["metadata"]["name"])
        return self.world.create(obj)

    def patch(self, kind, namespace, name, patch, *, resource_version=None):
        self._send("patch", kind, name)
        return self.world.patch(kind, namespace, name, patch, resource_version=resource_version)

    def patch_status(self, kind, namespace, name, patch, *, resource_version=None):
        self._send("patch_status", kind, name)
        return self.world.patch_status(kind, namespace, name, patch, resource_version=resource_version)

    def delete(self, kind, namespace, name, **options):
        self._send("delete", kind, name)
        return self.world.delete(kind, namespace, name, **options)


def _world(nodes=None):
    world = store()
    world.create(topology())
    for n in nodes if nodes is not None else rack_nodes(2, 2, 2):
        world.create(n)
    return world


def _degraded(world):
    return next(c for c in world.get("ClusterTopology", None, "default")["status"]["conditions"] if c["type"] == "Degraded")


def _warnings(world, reason):
    return [e for e in world.list("Event") if e["type"] == "Warning" and e["reason"] == reason]


def _creates(cluster):
    return [name for verb, kind, name in cluster.sent if (verb, kind) == ("create", "HyperNode")]


def test_a_refused_create_is_told_in_the_status_once_and_not_sent_again_until_it_changes_or_its_retry():
    world = _world()
    cluster = _Refusing(world, {("create", "HyperNode"): Forbidden('hypernodes.topology.volcano.sh is forbidden: cannot create resource "hypernodes"')})
    memo = TopologyMemo()
    first = reconcile(cluster, 1.0, VOLCANO, memo)
    refused = _creates(cluster)
    assert refused and first.failures == len(refused) and not first.retryable
    assert first.requeue_after == REFUSAL_REQUEUE_S, "a pass soon, to tell it in the status"

    cluster.sent.clear()
    second = reconcile(cluster, 1.05, VOLCANO, memo)
    assert _creates(cluster) == [] and second.failures == 0 and second.held == len(refused)
    degraded = _degraded(world)
    assert (degraded["status"], degraded["reason"]) == ("True", "WriteRefused")
    assert f"the API refused {len(refused)} write(s): create HyperNode " in degraded["message"] and "403 Forbidden: hypernodes.topology.volcano.sh is forbidden" in degraded["message"]
    assert len(_warnings(world, "WriteRefused")) == 1
    assert 0 < second.requeue_after <= RETRY, "the next pass due by the retry"

    for step in range(5):  # node events: each a pass; none sends the refused creates again
        world.create(node(f"joiner-{step}", block="b0", rack="r0"))  # an existing rack: no HyperNode changes
        report = reconcile(cluster, 2.0 + step, VOLCANO, memo)
        assert report.failures == 0 and report.held == len(refused)
    assert _creates(cluster) == [] and len(_warnings(world, "WriteRefused")) == 1

    world.create(node("pioneer", block="b0", rack="r9"))  # a new rack: its HyperNode and its block's change
    report = reconcile(cluster, 10.0, VOLCANO, memo)
    changed = _creates(cluster)
    assert changed and len(changed) < len(refused) and "default-block-b0-rack-r9" in changed, "only the writes that changed are tried"
    assert report.failures == len(changed) and report.held == len(set(refused) - set(changed))

    cluster.sent.clear()
    retried = reconcile(cluster, 10.0 + RETRY, VOLCANO, memo)
    assert set(_creates(cluster)) == set(refused) | set(changed), "every held write is sent again after a while"
    assert retried.failures and retried.fresh_errors == (), "refused again in the same words: told before"

    cluster.refuse.clear()  # RBAC granted: the next retry goes through and the status clears
    reconcile(cluster, 10.0 + 2 * RETRY, VOLCANO, memo)
    after = reconcile(cluster, 10.0 + 2 * RETRY + 0.05, VOLCANO, memo)
    assert world.list("HyperNode") and after.failures == 0 and after.held == 0 and memo.refused == {}
    assert _degraded(world)["status"] == "False"


def test_a_refused_status_write_is_not_sent_again_and_told_by_one_event():
    world = _world()
    cluster = _Refusing(world, {("patch_status", "ClusterTopology"): Invalid("status.levels: Invalid value")})
    memo = TopologyMemo()
    for now in (1.0, 1.05, 2.0, 3.0):
        reconcile(cluster, now, VOLCANO, memo)
    assert [s for s in cluster.sent if s[0] == "patch_status"] == [("patch_status", "ClusterTopology", "default")]
    events = _warnings(world, "WriteRefused")
    assert len(events) == 1 and "patch status of ClusterTopology default: 422 Invalid: status.levels" in events[0]["message"]
    world.create(node("joiner", block="b0", rack="r0"))  # what the status says changes: tried again
    reconcile(cluster, 4.0, VOLCANO, memo)
    assert len([s for s in cluster.sent if s[0] == "patch_status"]) == 2 and len(_warnings(world, "WriteRefused")) == 1


def test_a_held_delete_keeps_the_finalizer():
    world = _world()
    memo = TopologyMemo()
    reconcile(world, 1.0, VOLCANO, memo)
    cluster = _Refusing(world, {("delete", "HyperNode"): Forbidden("cannot delete")})
    world.delete("ClusterTopology", None, "default")
    for now in (2.0, 2.05, 3.0):
        reconcile(cluster, now, VOLCANO, memo)
    assert not [s for s in cluster.sent if s[:2] == ("patch", "ClusterTopology")], "the finalizer stays while a delete is refused"
    assert world.get("ClusterTopology", None, "default")["metadata"]["finalizers"]


def test_the_runner_logs_each_refusal_once_however_many_passes_follow(caplog):
    world = _world()
    cluster = _Refusing(world, {("create", "HyperNode"): Forbidden("cannot create")})
    controller = TopologyController(cluster, lambda: 0.0, VOLCANO)
    with caplog.at_level(logging.WARNING, logger="tandem.topology"):
        controller.tick(0.0)
        for step in range(1, 20):
            world.create(node(f"joiner-{step}", block="b0", rack="r0"))
            controller.changed()
            controller.tick(step * 1.0)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert controller.passes > 10 and sorted(warned) == sorted(set(warned)) and len(warned) == len(set(_creates(cluster)))


def test_a_write_is_the_same_write_for_the_same_body_and_stored_version_its_status_whatever_the_clock():
    hypernode = {"kind": "HyperNode", "metadata": {"name": "h"}, "spec": {"tier": 1}}
    assert write_key(CreateObject(hypernode)) == write_key(CreateObject({**hypernode}))
    assert write_key(CreateObject(hypernode)) != write_key(CreateObject({**hypernode, "spec": {"tier": 2}}))
    assert write_key(PatchObject("HyperNode", "h", {"spec": {}}, "1")) != write_key(PatchObject("HyperNode", "h", {"spec": {}}, "2"))
    assert write_key(DeleteObject("HyperNode", "h", "u", resource_version="1")) != write_key(DeleteObject("HyperNode", "h", "u", resource_version="2"))
    status = {"status": {"conditions": [{"type": "Degraded", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    later = {"status": {"conditions": [{"type": "Degraded", "status": "True", "lastTransitionTime": "2026-01-01T00:05:00Z"}]}}
    assert write_key(PatchStatus("ClusterTopology", "t", status)) == write_key(PatchStatus("ClusterTopology", "t", later))
    # the topology's own writes: by body alone (its status writes move its resourceVersion)
    assert write_key(PatchObject("ClusterTopology", "t", {"metadata": {}}, "1")) == write_key(PatchObject("ClusterTopology", "t", {"metadata": {}}, "2"))


def test_a_pass_whose_backend_writes_are_all_held_asks_for_no_topology_updated_event():
    from tandem.topology_controller.actions import RecordWrites
    from tandem.topology_controller.decide import decide
    from tandem.topology_controller.observe import observe

    world = _world()
    memo = TopologyMemo()
    reconcile(_Refusing(world, {("create", "HyperNode"): Forbidden("cannot create")}), 1.0, VOLCANO, memo)
    decisions = decide(observe(world.snapshot(), VOLCANO.backends, memo), 1.05)
    assert decisions.held and not [a for t in decisions.topologies for a in t.actions if isinstance(a, RecordWrites)]


def test_what_observe_and_decide_hand_on_is_only_what_is_read():
    from dataclasses import fields

    from tandem.topology_controller.actions import TopologyDecisions
    from tandem.topology_controller.observe import GroupUse

    assert [f.name for f in fields(GroupUse)] == ["namespace", "name", "topology"]  # no raw spec nobody reads
    assert [f.name for f in fields(TopologyDecisions)] == ["topologies", "held"]  # no log notes nobody sets


def test_a_pass_with_thousands_of_refusals_warns_of_the_first_few_and_counts_the_rest(caplog):
    """RBAC missing for HyperNodes at scale: the first pass is refused every create; the log
    gets WARNED_PER_PASS warnings and one line counting the rest, not a line per object."""
    from tandem.topology_controller.runner import WARNED_PER_PASS

    world = _world(rack_nodes(4, 8, 1))
    cluster = _Refusing(world, {("create", "HyperNode"): Forbidden("cannot create")})
    controller = TopologyController(cluster, lambda: 0.0, VOLCANO)
    with caplog.at_level(logging.WARNING, logger="tandem.topology"):
        controller.tick(0.0)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    refused = len(set(_creates(cluster)))
    assert refused > WARNED_PER_PASS + 5
    assert len(warned) == WARNED_PER_PASS + 1 and warned[-1].startswith(f"and {refused - WARNED_PER_PASS} more failed writes")
