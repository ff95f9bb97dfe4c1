"""The exact solver agrees with hand-computed optima and is never beaten by the engine."""

from __future__ import annotations

import pytest

from tandem.placement import Plan, place
from tandem.reference.instances import Instance, cluster, group, random_instance, role, score

highspy = pytest.importorskip("highspy")

from tandem.reference.exact import solve  # noqa: E402  (after the importorskip)

ONE_RACK = (("block", 1), ("rack", 1), ("host", 2))


def _functional(plan: Plan) -> list[bool]:
    return [u.state != "Unschedulable" for u in plan.units]


def test_order_none_takes_two_small_units_strict_keeps_the_earlier_big_one():
    big = group("big", [role("prefill", 1, gpus=8), role("decode", 1, gpus=8)], required="rack")
    small = group("small", [role("prefill", 1, gpus=4), role("decode", 1, gpus=4)], units=2, required="rack")
    inst = Instance.of("order", cluster(ONE_RACK) + [big, small])

    none = solve(inst.snapshot, inst.views, inst.units, order="none")
    assert none.proven and none.functional == 2 and _functional(none.plan) == [False, True, True]
    strict = solve(inst.snapshot, inst.views, inst.units, order="strict")
    assert strict.proven and strict.functional == 1 and _functional(strict.plan) == [True, False, False]
    for result in (none, strict):
        measured = score(inst, result.plan)
        assert measured.valid == result.functional and not measured.errors


def test_unit_gang_only_one_of_three_fits():
    units = group("g", [role("prefill", 1, gpus=8), role("decode", 1, gpus=8)], units=3, required="rack")
    inst = Instance.of("gang", cluster(ONE_RACK) + [units])
    result = solve(inst.snapshot, inst.views, inst.units)
    assert result.proven and result.functional == 1
    assert sum(len(u.pods()) for u in result.plan.units) == 2  # non-functional units hold nothing


def test_required_affinity_may_need_more_to_replicas_than_the_minimum():
    # Two 4-GPU prefills must each share a host with a decode: one decode (the minimum)
    # leaves room for only one prefill on its host, two decodes make it fit.
    unit = group(
        "c",
        [role("prefill", 2, minimum=2, gpus=4), role("decode", 2, minimum=1, gpus=4)],
        required="rack",
        affinity=[("prefill", "decode", "host", "Required")],
    )
    inst = Instance.of("more-to", cluster(ONE_RACK) + [unit])
    result = solve(inst.snapshot, inst.views, inst.units)
    assert result.proven and result.functional == 1
    (placed,) = result.plan.units
    assert [len(reps) for _, reps in placed.roles] == [2, 2]
    measured = score(inst, result.plan)
    assert measured.valid == 1 and measured.affinity_satisfied == 2


def test_required_affinity_any_pod_of_a_multi_pod_to_replica_counts():
    # The decode replica must spread over two hosts so that the prefill can join one of
    # them: both decode pods on one host would fill it (8 of 8 GPUs).
    unit = group(
        "minimal",
        [role("prefill", 1, gpus=1), role("decode", 1, pods=2, gpus=4)],
        required="block",
        affinity=[("prefill", "decode", "host", "Required")],
    )
    inst = Instance.of("spread-to", cluster((("block", 1), ("rack", 1), ("host", 4))) + [unit])
    result = solve(inst.snapshot, inst.views, inst.units)
    assert result.proven and result.functional == 1
    measured = score(inst, result.plan)
    assert measured.valid == 1 and measured.affinity_satisfied == 1


def test_empty_input_is_trivially_optimal():
    inst = Instance.of("empty", cluster(ONE_RACK) + [group("g", [role("prefill", 1)], required="rack")])
    result = solve(inst.snapshot, inst.views, [])
    assert result.proven and result.functional == 0 and result.plan.units == ()


def test_preferred_affinity_is_maximised_with_multi_pod_replicas():
    # A 2-pod prefill replica (rack pack) is satisfied when any of its pods shares a host
    # with a decode pod; n-000 has 4 GPUs free, n-001 has 8.
    unit = group(
        "m",
        [role("prefill", 1, pods=2, gpus=4, required="rack"), role("decode", 1, gpus=4)],
        required="rack",
        affinity=[("prefill", "decode", "host", "Preferred")],
    )
    inst = Instance.of("multi-pod", cluster(ONE_RACK, busy={0: 4}) + [unit])
    result = solve(inst.snapshot, inst.views, inst.units)
    assert result.proven and result.functional == 1 and result.preferred_satisfied == 1
    assert score(inst, result.plan).affinity_satisfied == 1


@pytest.mark.parametrize("seed", [1, 2, 4, 6, 7, 9, 12])
def test_exact_is_at_least_the_engine(seed):
    inst = random_instance(seed)
    engine = place(inst.snapshot, inst.views, inst.units)
    none = solve(inst.snapshot, inst.views, inst.units, order="none", time_limit=10, polish_time_limit=0.5)
    strict = solve(inst.snapshot, inst.views, inst.units, order="strict", time_limit=10, polish_time_limit=0.5)
    assert none.proven and strict.proven
    assert none.functional >= engine.functional_units()
    # The engine serves units in order, so the strict optimum is lexicographically at least as good.
    assert _functional(strict.plan) >= _functional(engine)
    for result in (none, strict):
        measured = score(inst, result.plan)
        assert not measured.errors and measured.valid == measured.functional == result.functional
