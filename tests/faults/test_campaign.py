"""The fault campaign's seeded subset (issue 16): `bench/faults.py` runs 1,000 schedules and
more; these run in every `make test`. See docs/reliability.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.faults.campaign import run
from support.faults.schedule import Schedule, generate

ROOT = Path(__file__).resolve().parents[2]
FOUND = sorted((Path(__file__).parent / "found").glob("*.json"))
# Schedules that find a bug not fixed yet (each file says what it finds): they must keep
# failing until it is fixed (strict), then move to `found/` with what fixed it.
KNOWN = sorted((Path(__file__).parent / "known").glob("*.json"))
# The seeds of the subset below that meet them (docs/reliability.md, what the campaign found):
# skipped, not run to their end (the files above keep the bugs in sight, and fail once fixed).
OPEN: dict[int, str] = {}


def _seeds(count: int, open_bugs: dict[int, str]) -> list:
    return [pytest.param(seed, marks=pytest.mark.skip(reason=open_bugs[seed])) if seed in open_bugs else seed for seed in range(count)]


def _explain(outcome) -> str:
    return "\n".join(f"t={v.at:.0f} {v.invariant}: {v.detail}" for v in outcome.violations)


@pytest.mark.parametrize("seed", _seeds(50, OPEN))
def test_a_seeded_schedule_over_the_memory_store_keeps_every_invariant(seed):
    outcome = run(generate(seed))
    assert outcome.ok, f"seed {seed}:\n{_explain(outcome)}"


@pytest.mark.parametrize("seed", range(3))
def test_a_seeded_schedule_over_http_keeps_every_invariant(seed):
    """Through the Kubernetes adapter against an API server that cuts watches, compacts (410)
    and answers 5xx."""
    outcome = run(generate(seed, world="http"))
    assert outcome.ok, f"seed {seed} over HTTP:\n{_explain(outcome)}"


@pytest.mark.parametrize("path", FOUND, ids=[p.stem for p in FOUND])
def test_a_schedule_that_once_found_a_bug_keeps_every_invariant(path):
    """Schedules the campaign failed on, kept as found (each says what it found and what fixed it)."""
    outcome = run(Schedule.load(path))
    assert outcome.ok, f"{path.name}:\n{_explain(outcome)}"


@pytest.mark.xfail(strict=True, reason="issue 27, open: see each file")
@pytest.mark.parametrize("path", KNOWN, ids=[p.stem for p in KNOWN])
def test_a_schedule_that_finds_an_open_bug_still_finds_it(path):
    outcome = run(Schedule.load(path))
    assert outcome.ok, f"{path.name}:\n{_explain(outcome)}"


def test_the_same_seed_gives_the_same_schedule_and_the_same_outcome():
    assert generate(17).to_json() == generate(17).to_json()
    assert generate(17).to_json() != generate(18).to_json()
    first, second = run(generate(17)), run(generate(17))
    assert first.to_json() == second.to_json() and first.steps > 0


def test_a_schedule_mixes_the_faults_the_issue_names():
    kinds = {e["type"] for seed in range(200) for e in generate(seed).events}
    assert kinds >= {"node-loss", "flap", "startup-failures", "crash", "storm", "stale", "failover", "bind-outage"}
    codes = {e["code"] for seed in range(200) for e in generate(seed).events if e["type"] == "storm"}
    assert codes >= {409, 429, 500, 503, 504, "504-applied"}
    racks = [e for seed in range(200) for e in generate(seed).events if e.get("rack")]
    assert racks, "whole racks are lost too"
    http = {e["type"] for seed in range(200) for e in generate(seed, world="http").events}
    assert http >= {"watch-cut", "gone", "list-errors"} and "stale" not in http
    skewed = [generate(seed).clocks for seed in range(50) if generate(seed).replicas == 2]
    assert skewed and all(c[1]["offset"] != 0.0 for c in skewed), "two replicas, clocks apart"


def test_a_saved_schedule_replays_from_the_command_line(tmp_path):
    path = tmp_path / "schedule.json"
    generate(3).save(path)
    assert Schedule.load(path).to_json() == generate(3).to_json()
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "faults.py"), "--replay", str(path)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout.strip().splitlines()[-1])
    assert line["seed"] == 3 and line["violations"] == [] and line["steps"] == run(generate(3)).steps
