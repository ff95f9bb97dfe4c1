"""Property tests: on random clusters and groups, the engine keeps every promise."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings

from support.fuzz import examples
from support.builders import world
from support.strategies import worlds
from tandem.placement import place
from tandem.placement.plan import plan_to_dict
from tandem.placement.verify import verify_plan

SETTINGS = settings(max_examples=examples(250), deadline=None, suppress_health_check=[HealthCheck.too_slow])


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
    """Extras never change which units get their minimums, nor where the minimums go,
    except for a unit placed again whole by relocation (it then ends `Placed`)."""
    snapshot, views, units = world(objects)
    with_extras = place(snapshot, views, units)
    minimums_only = place(snapshot, views, units, extras=False)
    for full, bare in zip(with_extras.units, minimums_only.units):
        assert (full.state == "Unschedulable") == (bare.state == "Unschedulable"), full.unit.label
        moved = any(full.replicas(r.name)[: r.minimum] != bare.replicas(r.name)[: r.minimum] for r in full.unit.roles)
        assert not moved or full.state == "Placed", full.unit.label


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


@SETTINGS
@given(worlds())
def test_extras_keep_each_unit_in_the_ratio_of_its_desired_counts(objects):
    """No role's extras run ahead of the slowest role's fraction (rounded up).

    What the minimum phase placed is the floor (taken from a plan without extras). Units
    with a Required affinity are left out: there a trim stops rather than strand a replica.
    """
    import math

    snapshot, views, units = world(objects)
    with_extras = place(snapshot, views, units)
    floors = place(snapshot, views, units, extras=False)
    for full, bare in zip(with_extras.units, floors.units):
        if full.state == "Unschedulable" or any(rule.required for rule in full.unit.affinity):
            continue
        roles = [role for role in full.unit.roles if role.desired > 0]
        if not roles:
            continue
        slowest = min(len(full.replicas(role.name)) / role.desired for role in roles)
        for role in roles:
            cap = max(len(bare.replicas(role.name)), math.ceil(slowest * role.desired - 1e-9))
            assert len(full.replicas(role.name)) <= cap, (full.unit.label, role.name)
