"""Units that already run replicas: kept in place, counted, and built on."""

from __future__ import annotations

import copy
import dataclasses
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from support.builders import bound_pod, cluster, group, role, world
from support.strategies import worlds
from tandem.placement import place
from tandem.placement.demand import PlacedReplica
from tandem.placement.verify import verify_plan


def _bound(name: str, node: str, template_spec: dict) -> dict:
    spec = copy.deepcopy(template_spec)
    spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "serving"}, "spec": spec, "status": {"phase": "Running"}}


def test_a_running_unit_grows_where_it_runs():
    g = group(
        "run",
        [role("prefill", 4, 1, gpus=8, required="host"), role("decode", 2, 1, gpus=8, pods=2, required="rack")],
        required="block",
    )
    spec = g["spec"]["roles"]
    # prefill replica 0 and decode replica 0 already run in block-1 (rack-2), which is
    # otherwise the same as the empty block-0
    running = [
        _bound("run-0-prefill-0-0", "n-008", spec[0]["template"]["spec"]),
        _bound("run-0-decode-0-0", "n-009", spec[1]["template"]["spec"]),
        _bound("run-0-decode-0-1", "n-010", spec[1]["template"]["spec"]),
    ]
    snapshot, views, units = world(cluster("block=2,rack=2,host=4") + running + [g])
    existing = (PlacedReplica("prefill", 0, ("n-008",)), PlacedReplica("decode", 0, ("n-009", "n-010")))
    units = [dataclasses.replace(units[0], existing=existing)]
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []
    unit = plan.units[0]
    assert unit.state == "Placed"
    prefill = unit.replicas("prefill")
    assert [r.index for r in prefill] == [0, 1, 2, 3] and prefill[0].existing and not prefill[1].existing
    assert prefill[0].pods[0].node == "n-008"
    nodes = [p.node for _, p in unit.pods()]
    assert all(views["default"].lowest_common_level("n-008", n) != "cluster" for n in nodes), "stays in block-1"


def test_missing_minimums_are_placed_beside_the_running_ones():
    g = group("m", [role("prefill", 3, 3, gpus=8)], required="rack")
    running = [_bound("m-0-prefill-1-0", "n-005", g["spec"]["roles"][0]["template"]["spec"])]
    snapshot, views, units = world(cluster("block=1,rack=2,host=4") + running + [g])
    units = [dataclasses.replace(units[0], existing=(PlacedReplica("prefill", 1, ("n-005",)),))]
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []
    unit = plan.units[0]
    assert [r.index for r in unit.replicas("prefill")] == [0, 1, 2]
    assert {p.node for _, p in unit.pods()} <= {"n-004", "n-005", "n-006", "n-007"}, "rack-1, where replica 1 runs"


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.integers(0, 10_000))
def test_replanning_with_running_replicas_keeps_every_promise(objects, seed):
    rng = random.Random(seed)
    snapshot, views, units = world(objects)
    first = place(snapshot, views, units)
    groups = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects if o["kind"] == "InferenceGroup"}
    bound, kept = [], {}
    for placement in first.units:
        if placement.state == "Unschedulable":
            continue
        spec_roles = {r["name"]: r for r in groups[(placement.unit.namespace, placement.unit.group)]["spec"]["roles"]}
        for role_name, replicas in placement.roles:
            template = spec_roles[role_name]
            for replica in replicas:
                if rng.random() < 0.5:
                    continue
                for number, pod in enumerate(replica.pods):
                    source = template.get("workerTemplate", template["template"]) if number else template["template"]
                    bound.append(_bound(pod.name, pod.node, source["spec"]))
                kept.setdefault(placement.unit.key, []).append(
                    PlacedReplica(role_name, replica.index, tuple(p.node for p in replica.pods))
                )
    snapshot2, views2, units2 = world(objects + bound)
    units2 = [dataclasses.replace(u, existing=tuple(kept.get(u.key, ()))) for u in units2]
    second = place(snapshot2, views2, units2)
    assert verify_plan(second, snapshot2, views2, units2) == []
    for placement in second.units:
        for replica in kept.get(placement.unit.key, []):
            found = [r for r in placement.replicas(replica.role) if r.index == replica.index]
            assert found and found[0].existing and tuple(p.node for p in found[0].pods) == replica.nodes


def test_an_extra_decode_goes_where_the_prefill_still_wanted_can_join_it():
    # Required rack affinity, 4 prefill : 2 decode of 4 GPUs. Running: decode-0 and
    # prefill-0 in rack-0, which has 12 GPUs left; rack-1 has 20. The extras go prefill-1
    # (into rack-0), then decode-1: next to the prefill replicas already served it would
    # leave rack-0 room for one more prefill, and the last one no rack with a decode and
    # room. It must go to rack-1, where the two prefill replicas still wanted fit too.
    g = group(
        "req",
        [role("prefill", 4, 1, gpus=4, required="host"), role("decode", 2, 1, gpus=4, required="host")],
        affinity=[{"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}],
    )
    spec = g["spec"]["roles"]
    running = [
        bound_pod("batch-0", "n-000", 4),
        _bound("req-0-decode-0-0", "n-000", spec[1]["template"]["spec"]),
        _bound("req-0-prefill-0-0", "n-001", spec[0]["template"]["spec"]),
        bound_pod("batch-1", "n-003", 4),
    ]
    snapshot, views, units = world(cluster("block=1,rack=2,host=3") + running + [g])
    existing = (PlacedReplica("prefill", 0, ("n-001",)), PlacedReplica("decode", 0, ("n-000",)))
    units = [dataclasses.replace(units[0], existing=existing)]
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []
    unit = plan.units[0]
    assert unit.state == "Placed", unit.message
    decode = [r for r in unit.replicas("decode") if not r.existing]
    assert views["default"].lowest_common_level(decode[0].pods[0].node, "n-003") in ("rack", "host"), "in rack-1"
