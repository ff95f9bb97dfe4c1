"""A quick run of the quality bench harness (bench/quality.py) on a few instances."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("highspy")

BENCH = Path(__file__).resolve().parents[2] / "bench" / "quality.py"


def _bench():
    spec = importlib.util.spec_from_file_location("tandem_bench_quality", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quality_rows_and_summary(tmp_path):
    rows = _bench().run_quality(seed=0, count=5, time_limit=10, polish_time_limit=0.5, progress=False, dump_dir=tmp_path)
    json.dumps(rows)  # plain JSON for bench/placement.py
    *instances, summary = rows
    assert len(instances) == 5 and summary["bench"] == "quality-summary" and summary["instances"] == 5
    for row in instances:
        assert set(row["policies"]) == {"engine", "exact-none", "exact-strict", "exact-lex", "independent", "sequential"}
        assert row["policies"]["engine"]["idleGpus"] == 0
        for measured in row["policies"].values():
            assert measured["errors"] == []
        for order in ("none", "strict"):
            assert row["policies"][f"exact-{order}"]["proven"]
        assert row["policies"]["exact-none"]["functional"] >= row["policies"]["engine"]["functional"]
        assert row["policies"]["exact-lex"]["proven"] and row["policies"]["exact-lex"]["unproven"] == []
        lex = row["policies"]["exact-lex"]
        assert row["replicaShare"] == (1.0 if lex["replicas"] == 0 else round(row["policies"]["engine"]["replicas"] / lex["replicas"], 4))
    assert set(summary["engineVsExact"]) == {"none", "strict"}
    for key in ("mean", "min", "below90", "proven"):
        assert key in summary["engineVsExact"]["none"]
    assert set(summary["meanAffinity"]) == set(instances[0]["policies"])
    for key in ("mean", "min", "below98", "above100", "proven"):
        assert key in summary["engineVsLex"]
    assert summary["engineVsLex"]["proven"] == 5
    assert set(summary["placed"]) == set(instances[0]["policies"]) and summary["units"] == sum(r["units"] for r in instances)
    for path in summary["reproducers"]:
        assert Path(path).is_file()


def test_contention_hand_made_scenarios(tmp_path):
    rows = _bench().run_contention(seed=0, random_count=0, time_limit=10, progress=False, dump_dir=tmp_path)
    json.dumps(rows)
    *scenarios, summary = rows
    assert len(scenarios) == 4 and summary["bench"] == "contention-summary"
    assert summary["engineIdleGpusZero"] and summary["idleGpus"]["sequential"] == 0
    assert summary["idleGpus"]["independent"] > 0  # the failure mode the scenarios exist to show
    assert summary["engineAtLeastBaselinesValid"]


def test_fits_whole_rows_and_summary(tmp_path):
    rows = _bench().run_fits_whole(seed=0, count=3, time_limit=10, progress=False, dump_dir=tmp_path)
    json.dumps(rows)
    *instances, summary = rows
    assert len(instances) == 3 and summary["bench"] == "fits-whole-summary" and summary["instances"] == 3
    for row in instances:
        assert row["bench"] == "fits-whole" and row["wholeChecked"] and row["exactAllPlaced"]
        assert set(row["policies"]) == {"engine", "exact-lex"}
        assert row["policies"]["exact-lex"]["replicas"] == row["policies"]["exact-lex"]["desiredReplicas"]
        for measured in row["policies"].values():
            assert measured["errors"] == []
        assert 0 <= row["placedShare"] <= 1
    assert summary["wholeChecked"] and summary["exactAllPlaced"] == 3
    assert summary["placed"]["exact-lex"] == summary["units"] and summary["placedPercent"]["exact-lex"] == 100.0
    for key in ("mean", "min", "below98", "above100", "proven"):
        assert key in summary["engineVsLex"]
    for path in summary["reproducers"]:
        assert Path(path).is_file()
