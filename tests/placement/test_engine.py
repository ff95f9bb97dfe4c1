"""Hand-picked placement cases: each promise of DESIGN.md §1 on a case small enough to reason about."""

from __future__ import annotations

from support.builders import bound_pod, cluster, group, role, world
from tandem.placement import place
from tandem.placement.verify import verify_plan

PD_AFFINITY = [{"from": "prefill", "to": "decode", "level": "rack", "mode": "Preferred"}]


def _plan(objects):
    snapshot, views, units = world(objects)
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []
    return plan, views["default"]


def _nodes(placement, role_name):
    return [pod.node for replica in placement.replicas(role_name) for pod in replica.pods]


def _fill(nodes, gpus=8):
    return [bound_pod(f"busy-{node}", node, gpus) for node in nodes]


def design_example(**overrides):
    """The InferenceGroup of DESIGN.md §1."""
    return group(
        "llama-70b",
        [
            role("prefill", 4, 1, gpus=8, pods=1, required="host"),
            role("decode", 2, 1, gpus=8, pods=2, required="rack"),
        ],
        required="block",
        preferred="rack",
        affinity=PD_AFFINITY,
        **overrides,
    )


def test_design_example_is_placed_whole_in_one_rack():
    plan, view = _plan(cluster("block=2,rack=2,host=8") + [design_example()])
    unit = plan.units[0]
    assert unit.state == "Placed"
    nodes = _nodes(unit, "prefill") + _nodes(unit, "decode")
    assert len(set(nodes)) == 8, "8 pods of 8 GPUs need 8 distinct hosts"
    assert {view.lowest_common_level(nodes[0], n) for n in nodes} <= {"rack", "host"}
    assert unit.domain == "rack/rack-0"


def test_pod_names_follow_the_contract():
    plan, _ = _plan(cluster("block=1,rack=2,host=8") + [design_example()])
    unit = plan.units[0]
    assert [p.name for p in unit.replicas("decode")[1].pods] == ["llama-70b-0-decode-1-0", "llama-70b-0-decode-1-1"]


def test_unit_gang_holds_nothing_when_a_role_minimum_cannot_fit():
    # decode needs 2 hosts in one rack; every rack has only one free host
    busy = _fill(["n-001", "n-002", "n-003", "n-005", "n-006", "n-007"])
    plan, _ = _plan(cluster("block=1,rack=2,host=4") + busy + [design_example()])
    unit = plan.units[0]
    assert unit.state == "Unschedulable"
    assert unit.pods() == []
    assert unit.message == "no block has room for 1 decode replica (2 pods × 8 nvidia.com/gpu within one rack); best is block-0 with 0"


def test_reason_names_level_and_best_domain_shortfall():
    # prefill needs 3 free hosts in one block; block-0 has 1, block-1 has 2
    g = group("big", [role("prefill", 3, 3, gpus=8, required="host")], required="block")
    busy = _fill(["n-000", "n-001", "n-002", "n-004", "n-005"])
    plan, _ = _plan(cluster("block=2,rack=1,host=4") + busy + [g])
    assert plan.units[0].message == "no block has room for 3 prefill replicas (1 pod × 8 nvidia.com/gpu); best is block-1 with 2"
    assert plan.units[0].code == "Unschedulable", "fits once capacity frees up"


def test_a_unit_bigger_than_any_domain_is_unresolvable():
    g = group("huge", [role("prefill", 5, 5, gpus=8)], required="block")
    plan, _ = _plan(cluster("block=2,rack=1,host=4") + [g])
    assert plan.units[0].code == "UnschedulableAndUnresolvable"
    assert plan.units[0].message == "no block has room for 5 prefill replicas (1 pod × 8 nvidia.com/gpu); best is block-0 with 4"


def test_roles_that_fit_alone_but_not_together_are_reported_as_such():
    g = group("pair", [role("prefill", 2, 2, gpus=8), role("decode", 2, 2, gpus=8)], required="block")
    plan, _ = _plan(cluster("block=2,rack=1,host=3") + [g])
    assert plan.units[0].state == "Unschedulable"
    assert plan.units[0].message.startswith("no block fits the minimum gang (2 prefill + 2 decode replicas) together")
    assert "needs 32 nvidia.com/gpu, has 24 free" in plan.units[0].message


def test_minimums_of_every_unit_come_before_any_extra():
    # 6 free hosts: a unit's minimum is 1P + 1D(2 pods) = 3 hosts, its full size 8.
    # Both units' minimums must be placed before either grows.
    busy = _fill(["n-006", "n-007"])
    two_units = design_example(replicas=2)
    plan, _ = _plan(cluster("block=1,rack=1,host=8") + busy + [two_units])
    assert [u.state for u in plan.units] == ["MinimumPlaced", "MinimumPlaced"]
    assert all(len(u.replicas("prefill")) == 1 and len(u.replicas("decode")) == 1 for u in plan.units)


def test_higher_priority_first_then_age():
    small = lambda name, priority: group(name, [role("prefill", 1, 1, gpus=8)], priority=priority)  # noqa: E731
    plan, _ = _plan(cluster("block=1,rack=1,host=1") + [small("old", 0), small("young", 0), small("vip", 5)])
    assert {u.unit.group: u.state for u in plan.units} == {"vip": "Placed", "old": "Unschedulable", "young": "Unschedulable"}
    plan, _ = _plan(cluster("block=1,rack=1,host=1") + [small("old", 0), small("young", 0)])
    assert {u.unit.group: u.state for u in plan.units} == {"old": "Placed", "young": "Unschedulable"}


def test_extras_follow_the_desired_ratio_and_stop_together():
    # 4P:2D of one-host replicas on 4 hosts: growing one replica at a time reaches 2P:2D,
    # then prefill cannot grow; decode is trimmed back to prefill's fraction, so the unit
    # keeps its 2:1 ratio and the fourth host stays free for others.
    g = group("r", [role("prefill", 4, 1, gpus=8), role("decode", 2, 1, gpus=8)], required="block")
    plan, _ = _plan(cluster("block=1,rack=1,host=4") + [g])
    unit = plan.units[0]
    assert (len(unit.replicas("prefill")), len(unit.replicas("decode"))) == (2, 1)
    # the ratio cap: with prefill unable to grow, decode stops at prefill's fraction
    g2 = group("cap", [role("prefill", 4, 1, gpus=8), role("decode", 4, 1, gpus=2)], required="block")
    plan, _ = _plan(cluster("block=1,rack=1,host=2") + [g2])
    unit = plan.units[0]
    prefill, decode = len(unit.replicas("prefill")), len(unit.replicas("decode"))
    assert prefill == 1
    assert decode == 1, "decode held at prefill's 1/4 so the unit keeps its ratio"
    assert "held at the same fraction to keep the ratio" in unit.message


def test_required_affinity_keeps_prefill_in_a_decode_rack():
    g = group(
        "aff",
        [role("prefill", 2, 2, gpus=8), role("decode", 1, 1, gpus=8)],
        required="block",
        affinity=[{"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}],
    )
    # rack-0 has 2 free hosts, rack-1 has 4: only rack-1 holds decode and both prefills
    busy = _fill(["n-002", "n-003"])
    plan, view = _plan(cluster("block=1,rack=2,host=4") + busy + [g])
    unit = plan.units[0]
    decode = _nodes(unit, "decode")[0]
    assert all(view.lowest_common_level(p, decode) in ("rack", "host") for p in _nodes(unit, "prefill"))


def test_required_affinity_that_cannot_hold_is_unschedulable_with_reason():
    g = group(
        "aff",
        [role("prefill", 1, 1, gpus=8), role("decode", 1, 1, gpus=8)],
        required="block",
        affinity=[{"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}],
    )
    busy = _fill(["n-001", "n-003"])  # each rack has one free host
    plan, _ = _plan(cluster("block=1,rack=2,host=2") + busy + [g])
    assert plan.units[0].state == "Unschedulable"
    assert plan.units[0].message.startswith("Required affinity prefill→decode at rack cannot be met")


def test_preferred_affinity_is_met_when_there_is_room():
    g = group(
        "aff",
        [role("prefill", 2, 1, gpus=8), role("decode", 2, 1, gpus=8)],
        required="block",
        affinity=PD_AFFINITY,
    )
    plan, view = _plan(cluster("block=1,rack=4,host=2") + [g])
    unit = plan.units[0]
    rack = lambda node: view.snapshot.labels[view.snapshot.node_index[node]]["network.tandem.dev/rack"]  # noqa: E731
    decode_racks = {rack(d) for d in _nodes(unit, "decode")}
    assert all(rack(p) in decode_racks for p in _nodes(unit, "prefill"))


def test_tight_fit_keeps_empty_domains_whole():
    # rack-0 is half used; a unit that fits in what is left goes there, leaving rack-1 empty
    g = group("small", [role("prefill", 2, 2, gpus=8)], required="rack")
    busy = _fill(["n-000", "n-001"])
    plan, _ = _plan(cluster("block=1,rack=2,host=4") + busy + [g])
    assert sorted(_nodes(plan.units[0], "prefill")) == ["n-002", "n-003"]


def test_preferred_pack_falls_back_to_the_required_level():
    g = group("wide", [role("prefill", 3, 3, gpus=8)], required="block", preferred="rack")
    plan, view = _plan(cluster("block=1,rack=2,host=2") + [g])
    unit = plan.units[0]
    assert unit.state == "Placed" and unit.domain == "block/block-0"


def test_taints_selectors_and_missing_resources():
    objects = cluster("block=1,rack=1,host=2")
    objects[1]["spec"]["taints"] = [{"key": "gpu", "value": "broken", "effect": "NoSchedule"}]
    objects[2]["spec"]["taints"] = [{"key": "gpu", "value": "broken", "effect": "NoExecute"}]
    g = group("t", [role("prefill", 1, 1, gpus=8)])
    plan, _ = _plan(objects + [g])
    assert plan.units[0].message == (
        "no usable node for prefill: 1 untolerated taint gpu=broken:NoExecute, 1 untolerated taint gpu=broken:NoSchedule"
    )
    tolerant = group(
        "t2", [role("prefill", 1, 1, gpus=8, tolerations=[{"key": "gpu", "operator": "Exists"}])]
    )
    plan, _ = _plan(objects + [tolerant])
    assert plan.units[0].state == "Placed"
    selective = group("s", [role("prefill", 1, 1, gpus=8, nodeSelector={"pool": "none"})])
    plan, _ = _plan(cluster("block=1,rack=1,host=2") + [selective])
    assert plan.units[0].message == "no usable node for prefill: 2 nodeSelector does not match"
    exotic = group("x", [role("prefill", 1, 1, gpus=0, nodeSelector={})])
    exotic["spec"]["roles"][0]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"example.com/fpga": "1"}
    plan, _ = _plan(cluster("block=1,rack=1,host=2") + [exotic])
    assert plan.units[0].message == "no node offers example.com/fpga (requested by prefill)"


def test_multi_pod_replica_with_worker_template_stays_in_its_rack():
    decode = role("decode", 2, 2, gpus=8, pods=3, required="rack")
    decode["workerTemplate"] = {"spec": {"containers": [{"name": "w", "resources": {"requests": {"nvidia.com/gpu": "4"}}}]}}
    plan, view = _plan(cluster("block=1,rack=2,host=3") + [group("mp", [decode], required="block")])
    unit = plan.units[0]
    assert unit.state == "Placed"
    for replica in unit.replicas("decode"):
        nodes = [p.node for p in replica.pods]
        assert {view.lowest_common_level(nodes[0], n) for n in nodes} <= {"rack", "host"}


def test_unit_with_zero_minimums_is_functional_and_grows():
    g = group("opt", [role("prefill", 2, 0, gpus=8), role("decode", 1, 0, gpus=8)], required="rack")
    plan, _ = _plan(cluster("block=1,rack=2,host=3") + [g])
    assert plan.units[0].state == "Placed"
    # a rack of 2 hosts cannot hold all 3 replicas: functional (minimums are zero), not complete
    plan, _ = _plan(cluster("block=1,rack=2,host=2") + [g])
    assert plan.units[0].state == "MinimumPlaced"


def test_nothing_fits_on_an_empty_cluster():
    topology = cluster("block=1,rack=1,host=1")[0]
    plan, _ = _plan([topology, design_example()])
    assert plan.units[0].state == "Unschedulable"
    assert plan.units[0].message == "the cluster has no nodes"


def test_a_role_that_cannot_grow_stops_the_others_at_the_exact_ratio():
    # 8P:4D with decode replicas of 4 hosts per rack; room for only 2 decode replicas.
    g = group(
        "big",
        [role("prefill", 8, 2, gpus=8, required="host"), role("decode", 4, 2, gpus=8, pods=4, required="rack")],
        required="block",
    )
    plan, _ = _plan(cluster("block=1,rack=3,host=5") + [g])
    unit = plan.units[0]
    assert (len(unit.replicas("prefill")), len(unit.replicas("decode"))) == (4, 2)


def test_a_later_unit_starts_where_an_earlier_one_will_not_grow():
    # Unit 0's minimum (1 host) leaves room in block-0 that its extras (3 more hosts) will take.
    # Unit 1 must start in block-1, not squeeze into block-0's reserved room.
    g = group("grow", [role("prefill", 4, 1, gpus=8)], replicas=2, required="block")
    plan, _ = _plan(cluster("block=2,rack=1,host=4") + [g])
    assert [u.state for u in plan.units] == ["Placed", "Placed"]
    # One rack per block: the narrowest domain holding each unit is its rack.
    assert {u.domain for u in plan.units} == {"rack/rack-0", "rack/rack-1"}


def test_an_earlier_unit_moves_when_a_later_one_fits_nowhere_else():
    # Unit a wants to grow to 16 GPUs, so it starts in the empty rack-0; unit b needs two
    # whole hosts in one rack, which only rack-0 had. a's minimum also fits in rack-1's
    # half-used hosts, so a moves there and both are functional.
    a = group("a", [role("p", 2, 1, gpus=4, pods=2, required="rack")], required="rack")
    b = group("b", [role("p", 1, 1, gpus=8, pods=2, required="rack")], required="rack")
    busy = [bound_pod("half-2", "n-002", 4), bound_pod("half-3", "n-003", 4)]
    plan, _ = _plan(cluster("block=1,rack=2,host=2") + busy + [a, b])
    states = {u.unit.group: (u.state, u.domain) for u in plan.units}
    assert states == {"a": ("MinimumPlaced", "rack/rack-1"), "b": ("Placed", "rack/rack-0")}


def test_age_is_the_creation_timestamp_even_unquoted():
    import yaml

    from tandem.api.loading import load_texts
    from tandem.placement import units_from_groups

    young = group("young", [role("prefill", 1, 1, gpus=8)])
    old = group("old", [role("prefill", 1, 1, gpus=8)])
    young["metadata"]["creationTimestamp"] = "2026-11-02T00:00:00Z"
    text = yaml.safe_dump(old).replace("name: old", "name: old\n  creationTimestamp: 2026-11-01T00:00:00Z")
    inputs = load_texts([("young", yaml.safe_dump(young)), ("old", text)])
    assert inputs.groups[1].metadata.creation_timestamp == "2026-11-01T00:00:00Z"
    assert [u.group for u in units_from_groups(inputs.groups)] == ["old", "young"]


def test_a_preferred_replica_pack_yields_to_required_affinity():
    # decode prefers one host for its 2 pods; prefill (4 GPUs) must share a host with decode.
    # The tightest host fits decode but leaves no room beside it; decode must go where
    # prefill fits too.
    g = group(
        "pd",
        [role("prefill", 1, 1, gpus=4), role("decode", 1, 1, gpus=2, pods=2, required="rack", preferred="host")],
        required="rack",
        affinity=[{"from": "prefill", "to": "decode", "level": "host", "mode": "Required"}],
    )
    busy = [bound_pod("half", "n-001", 4)]
    plan, _ = _plan(cluster("block=1,rack=1,host=2") + busy + [g])
    unit = plan.units[0]
    assert unit.state == "Placed"
    assert _nodes(unit, "prefill")[0] in _nodes(unit, "decode")


def test_a_plan_leaves_no_garbage_cycles_behind():
    # A plan's context (its lookahead and kept counts) refers to its working states; were
    # the states to refer back to it, as they once did, the cycles' arrays over every node
    # would wait for the garbage collector, which then freed many plans' worth inside a
    # later decision (a latency tail at scale).
    import gc

    # Three units where two fit whole: the greedy plan and the whole-units one both run.
    snapshot, views, units = world(cluster() + [design_example(replicas=3)])
    place(snapshot, views, units)  # a first plan in a process may still import lazily
    gc.collect()
    gc.disable()
    try:
        plan = place(snapshot, views, units)
        assert gc.collect() == 0
    finally:
        gc.enable()
    assert "Placed" in [u.state for u in plan.units]
