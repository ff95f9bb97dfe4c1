"""The group controller reads a ClusterTopology the topology controller keeps: one with a
status (written through /status), the `tandem.dev/topology-in-use` finalizer, and even a
deletion requested and held by that finalizer. The groups on it go on being placed."""

from __future__ import annotations

import copy

from support.controller_world import design_group, settle, world
from tandem.api.group_status import Condition
from tandem.api.topology_status import ClusterTopologyStatus, LevelStatus
from tandem.controller.validity import topologies_of

FINALIZER = "tandem.dev/topology-in-use"


def _kept(store) -> None:
    """What the topology controller leaves on the ClusterTopology: its finalizer and a status."""
    topology = copy.deepcopy(store.get("ClusterTopology", None, "default"))
    topology["metadata"]["finalizers"] = [FINALIZER]
    store.update(topology)
    status = ClusterTopologyStatus(
        observed_generation=1, nodes=64, placeable_nodes=64, level_names="block/rack/host", domain_counts="2/4/64",
        levels=[LevelStatus(name=level["name"], node_label=level["nodeLabel"], domains=2, nodes=64) for level in topology["spec"]["levels"]],
        used_by=["serving/llama"], used_by_count=1, backends=["volcano"],
        conditions=[Condition(type="Ready", status="True", reason="UpToDate", last_transition_time="2026-11-27T00:00:00Z")],
    )
    store.update_status({**store.get("ClusterTopology", None, "default"), "status": status.model_dump(by_alias=True, exclude_none=True, mode="json")})


def test_a_topology_with_status_and_finalizer_is_read_and_its_groups_placed():
    store = world(design_group())
    _kept(store)
    raw = store.get("ClusterTopology", None, "default")
    assert raw["status"]["levelNames"] == "block/rack/host" and raw["metadata"]["finalizers"] == [FINALIZER]
    topologies, problems = topologies_of([raw])
    assert problems == [] and topologies["default"].level_names() == ["block", "rack", "host"]
    settle(store, store)
    group = store.get("InferenceGroup", "serving", "llama")
    conditions = {c["type"]: c["status"] for c in group["status"]["conditions"]}
    assert conditions["Accepted"] == "True" and conditions["Available"] == "True", group["status"]
    assert len(store.list("Pod", "serving")) == 8


def test_a_topology_whose_deletion_waits_on_its_finalizer_still_serves_its_groups():
    store = world(design_group())
    _kept(store)
    store.delete("ClusterTopology", None, "default")
    held = store.get("ClusterTopology", None, "default")
    assert held["metadata"].get("deletionTimestamp"), "held by the finalizer"
    topologies, problems = topologies_of([held])
    assert problems == [] and "default" in topologies
    settle(store, store)
    conditions = {c["type"]: c["status"] for c in store.get("InferenceGroup", "serving", "llama")["status"]["conditions"]}
    assert conditions["Accepted"] == "True" and conditions["Available"] == "True"


def test_a_group_on_a_stored_topology_tandem_validate_refuses_is_not_accepted_and_says_why():
    """A topology stored before its rules were checked (a host level above a rack): the group
    on it is not placed, and its Accepted condition names the topology's problem."""
    store = world(design_group())
    topology = copy.deepcopy(store.get("ClusterTopology", None, "default"))
    levels = topology["spec"]["levels"]
    topology["spec"]["levels"] = [levels[0], levels[2], levels[1]]  # block, host, rack
    store.update(topology)
    settle(store, store)
    group = store.get("InferenceGroup", "serving", "llama")
    accepted = next(c for c in group["status"]["conditions"] if c["type"] == "Accepted")
    assert accepted["status"] == "False"
    assert ("spec.topologyName: ClusterTopology 'default' is invalid: spec.levels[1].nodeLabel: kubernetes.io/hostname names a single node"
            in accepted["message"]), accepted["message"]
    assert store.list("Pod", "serving") == []
