"""Property tests: on random clusters and groups, the engine keeps every promise."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings

from support.builders import world
from support.strategies import worlds
from tandem.placement import place
from tandem.placement.plan import plan_to_dict
from tandem.placement.verify import verify_plan

SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(worlds())
def test_no_plan_breaks_a_promise(objects):
    """Capacity, eligibility, replica gang, unit gang, required pack, required affinity."""
    snapshot, views, units = world(objects)
    plan = place(snapshot, views, units)
    assert verify_plan(plan, snapshot, views, units) == []


@SETTINGS
@given(worlds())
def test_minimums_come_before_extras(objects):
    """Extras never change which units get their minimums, nor where the minimums go."""
    snapshot, views, units = world(objects)
    with_extras = place(snapshot, views, units)
    minimums_only = place(snapshot, views, units, extras=False)
    for full, bare in zip(with_extras.units, minimums_only.units):
        assert (full.state == "Unschedulable") == (bare.state == "Unschedulable"), full.unit.label
        for role in full.unit.roles:
            assert full.replicas(role.name)[: role.minimum] == bare.replicas(role.name)[: role.minimum]


@SETTINGS
@given(worlds())
def test_output_is_identical_across_runs_and_input_order(objects):
    snapshot, views, units = world(objects)
    first = json.dumps(plan_to_dict(place(snapshot, views, units)))
    again = json.dumps(plan_to_dict(place(snapshot, views, units)))
    assert first == again
    shuffled = [o for o in objects if o["kind"] != "Node"][:1] + [o for o in objects if o["kind"] == "Node"][::-1]
    shuffled += [o for o in objects if o["kind"] not in ("Node", "ClusterTopology")]
    snapshot2, views2, units2 = world(shuffled)
    assert json.dumps(plan_to_dict(place(snapshot2, views2, units2))) == first
