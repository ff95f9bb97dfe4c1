"""Decide is a function of what was observed and the time: deterministic, and it writes nothing."""

from __future__ import annotations

from support.topology_world import group, rack_nodes, store, topology
from tandem.topology_controller.decide import decide
from tandem.topology_controller.observe import observe


def _world():
    world = store()
    world.create(topology())
    world.create(topology("second"))
    world.create(group("ns", "g", "default"))
    for n in rack_nodes(2, 2, 2):
        world.create(n)
    return world


def test_the_same_observation_and_time_decide_the_same_actions():
    world = _world()
    version = world.resource_version
    first = decide(observe(world.snapshot(), ("volcano", "koordinator")), 5.0)
    again = decide(observe(world.snapshot(), ("volcano", "koordinator")), 5.0)
    assert first == again and first.topologies
    assert repr(first) == repr(decide(observe(_world().snapshot(), ("volcano", "koordinator")), 5.0))  # another world, built alike
    assert world.resource_version == version  # nothing written


def test_actions_are_in_topology_order_finalizer_first_status_last_before_events():
    decisions = decide(observe(_world().snapshot(), ("volcano",)), 5.0)
    assert [t.topology for t in decisions.topologies] == ["default", "second"]
    kinds = [type(a).__name__ for a in decisions.topologies[0].actions]
    assert kinds[0] == "PatchObject" and kinds[-2:] == ["PatchStatus", "RecordWrites"]
    assert set(kinds[1:-2]) == {"CreateObject"}
