"""The lexicographic reference (`objective="replicas"`) and the "everything fits whole" instances."""

from __future__ import annotations

import pytest

from tandem.placement import Plan, place
from tandem.reference.instances import Instance, cluster, fits_whole_instance, group, random_instance, role, score, whole_plan

highspy = pytest.importorskip("highspy")

from tandem.reference.exact import LEX_BLOCK, solve  # noqa: E402  (after the importorskip)

ONE_RACK = (("block", 1), ("rack", 1), ("host", 2))


def _functional(plan: Plan) -> list[bool]:
    return [u.state != "Unschedulable" for u in plan.units]


def _counts(plan: Plan) -> list[list[int]]:
    return [[len(reps) for _, reps in u.roles] for u in plan.units]


def _lex(inst: Instance, **options):
    options.setdefault("order", "strict")
    return solve(inst.snapshot, inst.views, inst.units, objective="replicas", time_limit=10, **options)


def test_lex_places_the_extra_that_the_functional_objective_trades_for_affinity():
    # Hosts with 8, 8, 4, 4 GPUs free. Unit a wants two 8-GPU replicas (minimum one);
    # unit b's Preferred affinity holds only with both its 4-GPU pods on one full host.
    # Functional units then affinity first: b takes a full host, a stays at 1 (3 replicas).
    # Lexicographic: a gets both full hosts, b splits over the 4-GPU fragments (4 replicas).
    a = group("a", [role("prefill", 2, minimum=1, gpus=8)], required="rack")
    b = group(
        "b",
        [role("prefill", 1, gpus=4), role("decode", 1, gpus=4)],
        required="rack",
        affinity=[("prefill", "decode", "host", "Preferred")],
    )
    inst = Instance.of("extras-vs-affinity", cluster((("block", 1), ("rack", 1), ("host", 4)), busy={2: 4, 3: 4}) + [a, b])

    functional = solve(inst.snapshot, inst.views, inst.units, order="strict", time_limit=10, polish_time_limit=2)
    assert functional.proven and functional.polished
    assert (functional.functional, functional.preferred_satisfied, functional.replicas) == (2, 1, 3)

    lex = _lex(inst)
    assert lex.proven and lex.goal == "replicas" and lex.ratio
    assert (lex.functional, lex.replicas, lex.preferred_satisfied) == (2, 4, 0)
    assert [t.name for t in lex.tiers][:2] == ["minimums", "replicas"] and all(t.proven for t in lex.tiers)
    assert [u.state for u in lex.plan.units] == ["Placed", "Placed"]
    measured = score(inst, lex.plan)
    assert not measured.errors and measured.valid == 2 and measured.replicas == 4 and measured.placed == 2


def test_lex_never_gives_up_an_earlier_units_minimum_for_more_replicas():
    # 16 GPUs. Unit big (first) takes 8 for one replica; unit many (later) wants eight
    # 2-GPU replicas. Dropping big would place 8 replicas, keeping it places 1 + 4 = 5.
    big = group("big", [role("prefill", 1, gpus=8)], required="rack")
    many = group("many", [role("prefill", 8, minimum=1, gpus=2)], required="rack")
    inst = Instance.of("minimums-first", cluster(ONE_RACK) + [big, many])

    for order in ("strict", "none"):
        lex = _lex(inst, order=order)
        assert lex.proven and lex.functional == 2 and lex.replicas == 5
        assert _functional(lex.plan) == [True, True] and _counts(lex.plan) == [[1], [4]]
        assert not score(inst, lex.plan).errors


def test_lex_order_strict_keeps_the_earlier_big_unit_order_none_takes_two_small_ones():
    big = group("big", [role("prefill", 1, gpus=8), role("decode", 1, gpus=8)], required="rack")
    small = group("small", [role("prefill", 1, gpus=4), role("decode", 1, gpus=4)], units=2, required="rack")
    inst = Instance.of("order", cluster(ONE_RACK) + [big, small])
    assert _functional(_lex(inst, order="strict").plan) == [True, False, False]
    assert _functional(_lex(inst, order="none").plan) == [False, True, True]


def test_lex_keeps_extras_in_the_ratio_of_the_desired_counts():
    # 8 prefill (1 GPU) : 4 decode (4 GPUs) on 16 GPUs: only 2 decode fit beside 4
    # prefill. In ratio (the engine's promise) 4 : 2; without the rule 8 prefill : 2 decode.
    unit = group("r", [role("prefill", 8, minimum=1, gpus=1), role("decode", 4, minimum=1, gpus=4)], required="rack")
    inst = Instance.of("ratio", cluster(ONE_RACK) + [unit])

    kept = _lex(inst)
    assert kept.proven and kept.ratio and _counts(kept.plan) == [[4, 2]]
    free = _lex(inst, ratio=False)
    assert free.proven and not free.ratio and free.replicas == 10 and _counts(free.plan) == [[8, 2]]


def test_lex_strict_solves_units_in_blocks_and_keeps_later_blocks_lexicographic():
    # 16 GPUs; LEX_BLOCK - 1 one-GPU units, a two-GPU unit that no longer fits, then a
    # one-GPU unit in the next block, which does.
    first = group("first", [role("prefill", 1, gpus=1)], units=LEX_BLOCK - 1, required="rack")
    second = group("second", [role("prefill", 1, gpus=2)], required="rack")
    third = group("third", [role("prefill", 1, gpus=1)], required="rack")
    inst = Instance.of("blocks", cluster(ONE_RACK) + [first, second, third])
    lex = _lex(inst, polish_time_limit=None)
    assert lex.proven
    assert _functional(lex.plan) == [True] * (LEX_BLOCK - 1) + [False, True]
    assert [t.name for t in lex.tiers] == ["minimums", f"minimums[{LEX_BLOCK}:{LEX_BLOCK + 1}]", "replicas"]


@pytest.mark.parametrize("seed", [2, 7])
def test_lex_is_an_upper_bound_on_the_engine(seed):
    inst = random_instance(seed)
    engine = place(inst.snapshot, inst.views, inst.units)
    strict = solve(inst.snapshot, inst.views, inst.units, order="strict", time_limit=10, polish_time_limit=1)
    lex = _lex(inst, polish_time_limit=None)
    unbounded = _lex(inst, ratio=False, polish_time_limit=None)
    assert strict.proven and lex.proven and unbounded.proven
    # Tier 1 is the strict order's functional units; replicas then only grow.
    assert _functional(lex.plan) == _functional(strict.plan) == _functional(unbounded.plan)
    assert unbounded.replicas >= max(strict.replicas, lex.replicas)
    if _functional(engine) == _functional(lex.plan):
        assert score(inst, engine).replicas <= lex.replicas
    measured = score(inst, lex.plan)
    assert not measured.errors and measured.valid == measured.functional == lex.functional
    assert measured.replicas == lex.replicas


@pytest.mark.parametrize("seed", range(40))
def test_fits_whole_instances_carry_a_whole_packing(seed):
    inst = fits_whole_instance(seed)
    assert 4 <= inst.node_count <= 32 and inst.units
    measured = score(inst, whole_plan(inst))
    assert not measured.errors
    assert measured.valid == measured.placed == len(inst.units)
    assert measured.replicas == measured.desired
    assert measured.required_violations == 0 and measured.split == 0


@pytest.mark.parametrize("seed", [0, 3, 8])
def test_fits_whole_instances_are_placed_whole_by_the_exact_solver(seed):
    inst = fits_whole_instance(seed)
    lex = _lex(inst, polish_time_limit=None)
    assert lex.proven
    assert [u.state for u in lex.plan.units] == ["Placed"] * len(inst.units)
    assert lex.replicas == sum(r.desired for u in inst.units for r in u.roles)
    assert not score(inst, lex.plan).errors


def test_fits_whole_generator_is_deterministic_and_varied():
    assert fits_whole_instance(5).yaml() == fits_whole_instance(5).yaml()
    instances = [fits_whole_instance(seed) for seed in range(20)]
    assert len({inst.notes["shape"] for inst in instances}) > 5
    levels = {u.pack_required for inst in instances for u in inst.units}
    assert {"block", None} <= levels and levels & {"rack", "subblock"}
    assert any(rule.required for inst in instances for u in inst.units for rule in u.affinity)
    assert any(r.pods_per_replica == 2 for inst in instances for u in inst.units for r in u.roles)
    assert any(len({u.group for u in inst.units}) < len(inst.units) for inst in instances)  # groups of several units
    gpus = {int(n["status"]["allocatable"]["nvidia.com/gpu"]) for inst in instances for n in inst.manifests if n["kind"] == "Node"}
    assert len(gpus) > 1
