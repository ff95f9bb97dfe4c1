"""Exclusive domains: `spec.topology.exclusive: LEVEL` (LWS ExclusiveTopology, RBG exclusive-topology)."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from support.builders import cluster, container, group, role, world
from tandem.api.naming import EXCLUSIVE_LABEL, GROUP_LABEL, UNIT_LABEL
from tandem.placement import place
from tandem.placement.verify import check_plan, verify_plan


def exclusive(manifest: dict[str, Any], level: str) -> dict[str, Any]:
    manifest["spec"].setdefault("topology", {})["exclusive"] = level
    return manifest


def racks_of(plan, views) -> list[set[int]]:
    view = views["default"]
    index = view.snapshot.node_index
    return [{view.node_domain(index[pod.node], 2) for _, pod in u.pods()} for u in plan.units]


def running(name: str, node: str, group_name: str, unit: int, level: str, gpus: int = 8) -> dict[str, Any]:
    """A bound pod of a running exclusive unit, labelled as tandem's controller labels it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "serving",
            "labels": {GROUP_LABEL: group_name, UNIT_LABEL: str(unit), EXCLUSIVE_LABEL: level},
        },
        "spec": {"nodeName": node, "containers": [container(gpus)]},
        "status": {"phase": "Running"},
    }


def test_each_unit_gets_a_rack_to_itself():
    # Racks of 4 hosts; a unit takes 2 hosts, so two would share a rack without exclusivity.
    g = exclusive(group("nvl", [role("p", 1, gpus=8), role("d", 1, gpus=8)], replicas=3, required="rack"), "rack")
    snapshot, views, units = world(cluster("block=1,rack=4,host=4") + [g])
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []
    assert [u.state for u in plan.units] == ["Placed"] * 3
    racks = racks_of(plan, views)
    assert all(len(r) == 1 for r in racks) and len(set().union(*racks)) == 3
    # Without exclusivity the same units pack two to a rack.
    plain = group("nvl", [role("p", 1, gpus=8), role("d", 1, gpus=8)], replicas=3, required="rack")
    snapshot, views, units = world(cluster("block=1,rack=4,host=4") + [plain])
    assert len(set().union(*racks_of(place(snapshot, views, units), views))) == 2


def test_exclusive_units_of_different_groups_never_share_but_others_may():
    a = exclusive(group("a", [role("p", 1, gpus=8)], replicas=2, required="rack"), "rack")
    b = exclusive(group("b", [role("p", 1, gpus=8)], replicas=2, required="rack"), "rack")
    shared = group("c", [role("p", 8, gpus=8)], required="block")
    snapshot, views, units = world(cluster("block=1,rack=4,host=4") + [a, b, shared])
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []
    racks = racks_of(plan, views)
    assert len(set().union(*racks[:4])) == 4  # four exclusive units, four racks
    assert plan.units[4].state == "Placed"  # the non-exclusive group fills the rest of the racks


def test_running_exclusive_units_hold_their_domains():
    objects = cluster("block=2,rack=2,host=2")
    # Unit 0 of group `old` runs on n-000 (rack-0) and asked for block exclusivity: block-0 is held.
    old = running("old-0-p-0-0", "n-000", "old", 0, "block")
    new = exclusive(group("new", [role("p", 1, gpus=8)], replicas=2), "rack")
    snapshot, views, units = world(objects + [old, new])
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []
    view = views["default"]
    blocks = {view.node_domain(view.snapshot.node_index[pod.node], 1) for u in plan.units for _, pod in u.pods()}
    assert blocks == {1}
    assert len(set().union(*racks_of(plan, views))) == 2


def test_a_unit_keeps_its_own_running_domain():
    # The unit's own running replica does not block it: its next replica may join it.
    objects = cluster("block=1,rack=2,host=2")
    mine = running("mine-0-p-0-0", "n-000", "mine", 0, "rack")
    g = exclusive(group("mine", [role("p", 2, gpus=8)], required="rack"), "rack")
    snapshot, views, units = world(objects + [mine, g])
    from tandem.placement.demand import PlacedReplica

    units = [dataclasses.replace(units[0], existing=(PlacedReplica("p", 0, ("n-000",)),))]
    plan = place(snapshot, views, units)
    assert plan.units[0].state == "Placed"
    assert {pod.node for _, pod in plan.units[0].pods()} == {"n-000", "n-001"}


def test_no_free_exclusive_domain_says_so():
    a = exclusive(group("a", [role("p", 1, gpus=8)], replicas=3, required="rack"), "rack")
    snapshot, views, units = world(cluster("block=1,rack=2,host=4") + [a])
    plan = place(snapshot, views, units)
    last = plan.units[2]
    assert last.state == "Unschedulable" and last.code == "Unschedulable"
    assert last.message.startswith("exclusive rack:") and "another exclusive unit holds" in last.message


def test_the_verifier_sees_a_shared_exclusive_domain():
    g = group("a", [role("p", 1, gpus=8)], replicas=2, required="rack")
    snapshot, views, units = world(cluster("block=1,rack=2,host=4") + [g])
    plan = place(snapshot, views, units)  # without exclusivity both units share rack-0
    as_exclusive = [dataclasses.replace(u, exclusive="rack") for u in units]
    kinds = {v.kind for v in check_plan(plan, snapshot, views, as_exclusive)}
    assert kinds == {"exclusive"}


@st.composite
def exclusive_worlds(draw: st.DrawFn) -> list[dict[str, Any]]:
    objects = cluster(f"block={draw(st.integers(1, 3))},rack={draw(st.integers(1, 3))},host={draw(st.integers(1, 3))}")
    for i in range(draw(st.integers(1, 4))):
        roles = [role("p", draw(st.integers(1, 3)), 1, gpus=draw(st.sampled_from([4, 8])))]
        if draw(st.booleans()):
            roles.append(role("d", draw(st.integers(1, 2)), 1, gpus=8, pods=draw(st.integers(1, 2))))
        g = group(f"g{i}", roles, replicas=draw(st.integers(1, 3)), required=draw(st.sampled_from([None, "block", "rack"])))
        level = draw(st.sampled_from([None, "block", "rack", "host"]))
        objects.append(exclusive(g, level) if level else g)
    return objects


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exclusive_worlds())
def test_no_plan_shares_an_exclusive_domain(objects):
    snapshot, views, units = world(objects)
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []
