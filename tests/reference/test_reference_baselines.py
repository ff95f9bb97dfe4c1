"""The baselines reproduce the failure modes they stand for (hand-made cases)."""

from __future__ import annotations

from tandem.placement import place
from tandem.reference.baselines import independent, sequential
from tandem.reference.instances import Instance, cluster, group, role, score

ONE_RACK = (("block", 1), ("rack", 1), ("host", 2))


def _orphans() -> Instance:
    """16 GPUs; unit a needs 24 (cannot fit), unit b needs 16 (fits alone)."""
    a = group("a", [role("prefill", 1, gpus=8), role("decode", 1, pods=2, gpus=8)], required="rack")
    b = group("b", [role("prefill", 1, gpus=8), role("decode", 1, gpus=8)], required="rack")
    return Instance.of("orphans", cluster(ONE_RACK) + [a, b])


def test_independent_role_gangs_hold_gpus_for_units_that_cannot_serve():
    inst = _orphans()
    plan = independent(inst.snapshot, inst.views, inst.units)
    a, b = plan.units
    assert a.state == "Unschedulable" and [n for n, reps in a.roles if reps] == ["prefill"]
    assert b.state == "Unschedulable" and [n for n, reps in b.roles if reps] == ["prefill"]
    assert "still holding" in a.message
    measured = score(inst, plan)
    assert measured.functional == 0 and measured.idle_gpus == 16 and not measured.errors

    engine = score(inst, place(inst.snapshot, inst.views, inst.units))
    assert engine.functional == 1 and engine.idle_gpus == 0


def test_sequential_rolls_back_a_unit_whose_second_role_does_not_fit():
    inst = _orphans()
    plan = sequential(inst.snapshot, inst.views, inst.units)
    a, b = plan.units
    assert a.state == "Unschedulable" and a.pods() == []
    assert b.state == "Placed"
    assert score(inst, plan).idle_gpus == 0


def test_sequential_per_role_best_fit_splits_roles_over_blocks_and_misses_affinity():
    # block-0 has one free node (the tightest fit for either role), block-1 has two.
    manifests = cluster((("block", 2), ("rack", 1), ("host", 2)), busy={0: 8})
    unit = group(
        "s",
        [role("prefill", 1, gpus=8), role("decode", 1, gpus=8)],
        required="block",
        affinity=[("prefill", "decode", "rack", "Required")],
    )
    inst = Instance.of("split", manifests + [unit])
    for policy in (sequential, independent):
        plan = policy(inst.snapshot, inst.views, inst.units)
        (placed,) = plan.units
        assert placed.state == "Placed" and "split over block/block-0, block/block-1" in placed.message
        measured = score(inst, plan)
        assert (measured.functional, measured.valid, measured.split, measured.required_violations) == (1, 0, 1, 1)

    engine = score(inst, place(inst.snapshot, inst.views, inst.units))
    assert (engine.valid, engine.affinity_satisfied) == (1, 1)


def test_sequential_partial_admission_lowers_counts_of_the_whole_unit():
    # Three free nodes: prefill at its desired 3 would leave no room for decode.
    unit = group("p", [role("prefill", 3, minimum=1, gpus=8), role("decode", 1, gpus=8)], required="block")
    inst = Instance.of("partial", cluster((("block", 1), ("rack", 1), ("host", 4)), busy={0: 8}) + [unit])
    (placed,) = sequential(inst.snapshot, inst.views, inst.units).units
    assert placed.state == "MinimumPlaced"
    assert [len(reps) for _, reps in placed.roles] == [2, 1]
    assert "partial admission: prefill 2/3" in placed.message


def test_baselines_ignore_preferred_affinity():
    # n-000 has 4 GPUs free, n-001 has 8: only n-001 keeps prefill and decode on one host.
    unit = group(
        "d",
        [role("prefill", 1, gpus=4), role("decode", 1, gpus=4)],
        required="block",
        affinity=[("prefill", "decode", "host", "Preferred")],
    )
    inst = Instance.of("pref", cluster((("block", 1), ("rack", 2), ("host", 1)), busy={0: 4}) + [unit])
    for policy in (sequential, independent):
        assert score(inst, policy(inst.snapshot, inst.views, inst.units)).affinity_satisfied == 0
    assert score(inst, place(inst.snapshot, inst.views, inst.units)).affinity_satisfied == 1
