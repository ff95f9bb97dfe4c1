"""Plans stay byte-identical: a subset of `bench/plan_hashes.py`'s cases against the
committed hashes (`bench/plan_hashes.json`), so a change of any plan fails `make test`.

The whole set (591 plans, about half a minute) is `python bench/plan_hashes.py --check
bench/plan_hashes.json`; after a change meant to alter plans, `--save` writes it anew.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tandem.placement import Plan, PodAssignment

BENCH = Path(__file__).resolve().parents[2] / "bench"
# Fifty random instances of the quality bench's set and the smallest batch: a few seconds.
SUBSET = ("quality-0", "batch/100")


@pytest.fixture(scope="module")
def plan_hashes() -> ModuleType:
    """bench/plan_hashes.py as a module (it and bench/placement.py put bench/ on sys.path:
    put back as it was)."""
    saved = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location("tandem_bench_plan_hashes", BENCH / "plan_hashes.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # (its dataclass looks its module up there)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path[:] = saved


def test_plans_of_a_subset_are_those_committed(plan_hashes: ModuleType) -> None:
    saved = json.loads((BENCH / "plan_hashes.json").read_text(encoding="utf-8"))
    cases = [case for case in plan_hashes.cases() if case.group in SUBSET or case.name in SUBSET]
    assert len(cases) == 51
    records = list(plan_hashes.hashes(cases, progress=False))
    assert plan_hashes.differences(records, saved) == []


def test_a_plan_hash_changes_with_any_pod_s_node(plan_hashes: ModuleType) -> None:
    (case,) = [case for case in plan_hashes.cases() if case.name == "quality-0/0"]
    from tandem.placement import place

    plan = place(*case.build())
    unit = plan.units[0]
    name, replicas = unit.roles[0]
    first = replicas[0]
    moved_pod = PodAssignment(first.pods[0].name, first.pods[0].node + "-elsewhere")
    moved = dataclasses.replace(first, pods=(moved_pod, *first.pods[1:]))
    changed = Plan((dataclasses.replace(unit, roles=((name, (moved, *replicas[1:])), *unit.roles[1:])), *plan.units[1:]))
    assert plan_hashes.plan_hash(plan) == plan_hashes.plan_hash(Plan(tuple(plan.units)))
    assert plan_hashes.plan_hash(changed) != plan_hashes.plan_hash(plan)
    assert plan_hashes.differences([{"name": case.name, "hash": plan_hashes.plan_hash(changed)}], {case.name: plan_hashes.plan_hash(plan)}) == [case.name]
