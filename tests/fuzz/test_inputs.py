"""Mutants of real files, read as tandem reads each kind of input: a result or one input
error, never a traceback or a hang (issue 16). CI runs a fixed-seed sample of each kind;
`bench/fuzz_inputs.py --count 10000` runs the campaign (docs/reliability.md)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from support.fuzz import examples
from support.fuzz_targets import run, targets
from support.mutate import mutants
from tandem.errors import InputError

TARGETS = targets()


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_mutants_of_real_files_get_an_answer_or_one_input_error(kind):
    target = TARGETS[kind]
    rng = random.Random(f"ci:{kind}")
    failures = []
    for _ in range(examples(120)):
        text = mutants(rng.choice(target.seeds), rng)
        problem = run(target, text)
        if problem is not None:
            failures.append((text[:300], problem))
    assert not failures, failures[0]


def test_what_the_fuzzer_found_is_refused_in_one_line():
    trace = TARGETS["trace"]
    with pytest.raises(InputError, match="more than 4300 digits"):
        trace.read('{"timestamp": 0, "input_length": ' + "9" * 5000 + ', "output_length": 5}\n')
    with pytest.raises(InputError, match="is too large"):
        trace.read("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900," + "9" * 5000 + ",44\n")
    scenario = TARGETS["scenario"]
    text = next(s for s in scenario.seeds if "synthetic: {rate: 12" in s)
    with pytest.raises(InputError, match=r"startAt.*finite"):
        scenario.read(text.replace("startAt: 300", "startAt: .inf", 1))
    from tandem.sim.serving.profiles import model_profile

    with pytest.raises(InputError, match="unknown model"):
        model_profile("x" * 300)


FOUND = sorted((Path(__file__).parent / "found").glob("*.txt"))


@pytest.mark.parametrize("path", FOUND, ids=[p.stem for p in FOUND])
def test_every_input_the_campaign_once_broke_on_is_answered(path):
    """Mutants `bench/fuzz_inputs.py --count 10000` saved as failures, kept as they were."""
    kind = path.stem.split("-")[0]
    assert run(TARGETS[kind], path.read_text()) is None
