"""Whole units first, and gangs a Required affinity couples (issue 10, "everything fits whole").

Small clusters cut from the generated instances the engine used to leave short
(`bench/quality.py --fits-whole`): each has a plan that places every unit whole, and each
failed before for one reason, named in the test.
"""

from __future__ import annotations

from typing import Any, Sequence

from support.builders import bound_pod, cluster, group, role, world
from tandem.placement import place
from tandem.placement.verify import verify_plan

GPU = "nvidia.com/gpu"


def sized(shape: str, sizes: Sequence[int], busy: Sequence[tuple[int, int]] = ()) -> list[dict[str, Any]]:
    """`cluster(shape)` with node i offering sizes[i] GPUs; `busy`: (node, GPUs) used by other pods."""
    objects = cluster(shape)
    nodes = [o for o in objects if o["kind"] == "Node"]
    assert len(nodes) == len(sizes)
    for node, size in zip(nodes, sizes):
        for key in ("allocatable", "capacity"):
            if key in node["status"]:
                node["status"][key][GPU] = str(size)
    return objects + [bound_pod(f"busy-{i}", nodes[i]["metadata"]["name"], gpus) for i, gpus in busy]


def required(source: str, target: str, level: str) -> dict[str, str]:
    return {"from": source, "to": target, "level": level, "mode": "Required"}


def preferred(source: str, target: str, level: str) -> dict[str, str]:
    return {"from": source, "to": target, "level": level, "mode": "Preferred"}


def plan_of(objects: list[dict[str, Any]]):
    snapshot, views, units = world(objects)
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []
    return plan


def nodes_of(unit) -> set[str]:
    return {pod.node for _, pod in unit.pods()}


def test_an_earlier_unit_leaves_the_only_host_a_later_unit_fits_whole_on():
    # fits-whole-30018: four one-host subblocks of 4, 4, 8 and 4 GPUs. "a" (higher
    # priority, 8 GPUs) fits whole on the 8-GPU host and took it; "c" needs 4 prefill
    # beside its 4-GPU decode within one subblock (Required), which only that host holds.
    # Greedy in placement order left "c" at 2 of 4 prefill; planned whole, "a" spreads
    # over the small hosts and every unit is Placed.
    objects = sized("block=1,subblock=4,host=1", [4, 4, 8, 4]) + [
        group(
            "a",
            [role("prefill", 1, 1, gpus=2), role("decode", 2, 2, gpus=1, pods=2, required="host"), role("router", 1, 1, gpus=2)],
            priority=1,
            required="block",
            preferred="host",
            affinity=[preferred("prefill", "decode", "subblock")],
        ),
        group("b", [role("prefill", 1, 1, gpus=2), role("decode", 1, 1, gpus=2)], required="block", preferred="subblock"),
        group(
            "c",
            [role("prefill", 4, 1, gpus=1), role("decode", 1, 1, gpus=4)],
            required="block",
            preferred="subblock",
            affinity=[required("prefill", "decode", "subblock")],
        ),
    ]
    plan = plan_of(objects)
    assert [u.state for u in plan.units] == ["Placed"] * 3, [u.message for u in plan.units]
    assert nodes_of(plan.units[2]) == {"n-002"}  # the 8-GPU host
    assert "n-002" not in nodes_of(plan.units[0])


def test_a_tight_domain_first_can_strand_a_later_unit_smallest_first_places_all():
    # fits-whole-40162: hosts of 8, 8 (block 0) and 4, 7 (block 1). Placement order or
    # largest first puts "a" (8 GPUs) in block 1 (tightest), split over both hosts, and
    # "d" (4 GPUs, one rack = one host) ends short; smallest first places all four.
    objects = sized("block=2,rack=2,host=1", [8, 8, 4, 8], busy=[(3, 1)]) + [
        group("a", [role("prefill", 1, 1, gpus=4), role("decode", 1, 1, gpus=4)], required="block", preferred="host"),
        group("b", [role("prefill", 2, 1, gpus=2), role("decode", 1, 1, gpus=4)], required="block"),
        group("c", [role("prefill", 1, 1, gpus=2), role("decode", 2, 2, gpus=2)], required="block", affinity=[preferred("prefill", "decode", "host")]),
        group(
            "d",
            [role("prefill", 1, 1, gpus=1), role("decode", 1, 1, gpus=1), role("router", 2, 1, gpus=1)],
            required="rack",
            affinity=[preferred("prefill", "decode", "host")],
        ),
    ]
    plan = plan_of(objects)
    assert [u.state for u in plan.units] == ["Placed"] * 4, [u.message for u in plan.units]
    assert nodes_of(plan.units[3]) == {"n-002"}  # the 4-GPU host, exactly full


def test_with_more_demand_than_capacity_the_greedy_plan_stands():
    # 40 GPUs wanted on 16: no plan places every unit whole, so the minimums stay where
    # the minimum phase put them and the unit that got none stays Unschedulable.
    objects = sized("block=1,host=2", [8, 8]) + [
        group("big", [role("prefill", 3, 1, gpus=8)], required="block", priority=1),
        group("small", [role("prefill", 2, 1, gpus=4)], required="block"),
        group("late", [role("prefill", 1, 1, gpus=8)], required="block"),
    ]
    snapshot, views, units = world(objects)
    full = place(snapshot, views, units)
    bare = place(snapshot, views, units, extras=False)
    assert [u.state for u in full.units] == ["MinimumPlaced", "Placed", "Unschedulable"]
    for with_extras, minimums in zip(full.units, bare.units):
        for r in with_extras.unit.roles:
            assert with_extras.replicas(r.name)[: r.minimum] == minimums.replicas(r.name)[: r.minimum]


def test_a_router_does_not_take_the_host_a_prefill_must_share_with_its_decode():
    # fits-whole-40041: hosts of 4, 2 and 4 GPUs; prefill (2 GPUs) must share a host with
    # a decode (2 GPUs), a router (1 GPU) may go anywhere. Both 4-GPU hosts are needed by
    # a prefill and its decode; the routers fit only on the 2-GPU host. Placed best fit,
    # a router took a GPU of a decode's host and the prefill could not follow: the
    # crowding key did not count only the hosts the Required rule leaves the prefill.
    objects = sized("block=1,host=3", [4, 2, 4]) + [
        group(
            "a",
            [role("prefill", 2, 2, gpus=2), role("decode", 2, 2, gpus=2), role("router", 2, 2, gpus=1)],
            required="block",
            affinity=[required("prefill", "decode", "host")],
        ),
    ]
    (unit,) = plan_of(objects).units
    assert unit.state == "Placed", unit.message
    assert [[pod.node for pod in r.pods] for r in unit.replicas("router")] == [["n-001"], ["n-001"]]


def test_a_required_pair_at_rack_is_placed_prefill_and_decode_rack_by_rack():
    # fits-whole-20192, alone on an empty cluster: three prefill pairs of 8-GPU pods,
    # each within a rack and each needing a decode (a pair of 4-GPU pods) in its rack.
    # Racks: 4x4 GPUs; 6, 8, 8, 8; 8, 8, 4, 4; 8, 8, 8, 8. Each rack with 8-GPU hosts
    # holds one prefill pair and one decode, so the gang goes rack by rack: prefill, then
    # its decode beside it (serving a placed prefill before room for later ones, and the
    # decode's affinity before its preferred host), then the next prefill (a `from`
    # replica is not held next to a `to` replica while more are to come). Before, it
    # was reported Unschedulable on an empty cluster.
    sizes = [4, 4, 4, 4, 6, 8, 8, 8, 8, 8, 4, 4, 8, 8, 8, 8]
    objects = sized("block=1,rack=4,host=4", sizes) + [
        group(
            "a",
            [role("prefill", 3, 3, gpus=8, pods=2, required="rack"), role("decode", 6, 1, gpus=4, pods=2, preferred="host")],
            required="block",
            preferred="rack",
            affinity=[required("prefill", "decode", "rack")],
        ),
    ]
    snapshot, views, units = world(objects)
    minimums = place(snapshot, views, units, extras=False).units[0]
    assert minimums.state == "MinimumPlaced", minimums.message
    view = views["default"]
    racks = {view.node_domain(snapshot.node_index[r.pods[0].node], 2) for r in minimums.replicas("prefill")}
    assert len(racks) == 3
    (unit,) = plan_of(objects).units
    assert unit.state == "Placed", unit.message
