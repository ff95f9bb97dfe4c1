"""The serving examples' engine and router flags are ones their programs accept.

Always: each argv (as the pod runs it, tandem's variables expanded) against the flag table
its program's own parser gives (engine_flags/*.json: SGLang 0.5.23, vLLM 0.33.0,
sglang-router 0.3.2, vllm-router 0.1.17, written by tools/engine_flags.py). Where the program
is installed (sglang-router is a test dependency; `make engine-flags` builds the others'
environments), each argv is also parsed by the real parser and the table is checked fresh.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.serving_examples import ENGINES, REPO, Invocation, all_invocations, expand, flag_problems, flag_table

INVOCATIONS = all_invocations()
IDS = [f"{found.where} ({found.engine})" for found in INVOCATIONS]
TOOL = REPO / "tools" / "engine_flags.py"
REQUIRED = os.environ.get("TANDEM_ENGINE_PARSERS") == "required"  # `make engine-flags`: no skipping


def test_every_engine_and_router_of_the_examples_is_found() -> None:
    assert {found.engine for found in INVOCATIONS} == set(ENGINES)
    # two prefill/decode groups of one-pod replicas, and one with a two-pod decode replica
    assert sum(found.engine in ("sglang", "vllm") for found in INVOCATIONS) == 7


@pytest.mark.parametrize("found", INVOCATIONS, ids=IDS)
def test_flags_are_in_the_engines_own_table(found: Invocation) -> None:
    assert flag_problems(flag_table(found.engine), found.argv) == []


@pytest.mark.parametrize("found", INVOCATIONS, ids=IDS)
def test_no_variable_is_left_unexpanded(found: Invocation) -> None:
    """A misspelt $(TANDEM_...) is passed on literally by the kubelet; here it fails."""
    assert not [word for word in found.argv if "$(" in word]


def test_the_multi_node_decode_takes_its_rank_and_rendezvous_from_tandem() -> None:
    decode = [f for f in INVOCATIONS if "llama-70b-sglang" in f.where and "decode" in f.pod["metadata"]["name"]]
    assert len(decode) == 2
    for found in decode:
        args = dict(word.split("=", 1) for word in found.argv if "=" in word)
        labels = found.pod["metadata"]["labels"]
        assert args["--node-rank"] == labels["tandem.dev/pod-index"]
        assert args["--nnodes"] == "2"
        leader = decode[0].pod["metadata"]["name"]
        assert args["--dist-init-addr"].startswith(f"{leader}.llama-70b-sglang.serving.svc")


def test_kubernetes_expansion_rules() -> None:
    env = {"A": "x"}
    assert expand("$(A):5000", env) == "x:5000"
    assert expand("$(B)", env) == "$(B)"  # unknown: left as it is
    assert expand("$$(A)", env) == "$(A)"  # escaped


def test_the_checker_refuses_what_the_parser_refuses() -> None:
    sglang, vllm = flag_table("sglang"), flag_table("vllm")
    ok = ["--model-path=m", "--tp-size", "2", "--disaggregation-mode", "decode", "--enable-metrics"]
    assert flag_problems(sglang, ok) == []
    assert flag_problems(sglang, ["--tp-sise=2"]) == [f"--tp-sise: not a flag of {sglang['source']}"]
    assert flag_problems(sglang, ["--disaggregation-mode=both"])[0].startswith("--disaggregation-mode: 'both' is not one of")
    assert flag_problems(sglang, ["--enable-metrics=yes"]) == ["--enable-metrics: takes no value, got 'yes'"]
    assert flag_problems(sglang, ["--port"]) == ["--port: expects a value"]
    assert flag_problems(sglang, ["model"]) == ["1 positional argument(s), the parser takes 0"]
    assert flag_problems(vllm, ["m", "--tensor-parallel-size=2"]) == []
    assert flag_problems(vllm, ["m", "n"]) == ["2 positional argument(s), the parser takes 1"]


# ----------------------------------------------------------------------------- the real parsers


def _interpreter(engine: str) -> str | None:
    """The Python that has `engine` installed: its `make engine-flags` venv, else this one."""
    venv = REPO / f".venv-engine-{engine}" / "bin" / "python"
    if venv.exists():
        return str(venv)
    module = {"sglang": "sglang", "vllm": "vllm", "sglang-router": "sglang_router", "vllm-router": "vllm_router"}[engine]
    return sys.executable if importlib.util.find_spec(module) is not None else None


def _needs(engine: str) -> str:
    python = _interpreter(engine)
    if python is None:
        message = f"{engine} is not installed here (`make engine-flags` installs it in .venv-engine-{engine})"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    return python


def _run(python: str, *args: str, stdin: str = "") -> str:
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([python, str(TOOL), *args], input=stdin, capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("engine", ENGINES)
def test_the_real_parser_accepts_every_example(engine: str) -> None:
    python = _needs(engine)
    found = [f for f in INVOCATIONS if f.engine == engine]
    results = json.loads(_run(python, "parse", engine, stdin=json.dumps([list(f.argv) for f in found])))
    assert {f.where: error for f, error in zip(found, results, strict=True) if error is not None} == {}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_real_parser_refuses_an_unknown_flag(engine: str) -> None:
    python = _needs(engine)
    example = next(list(f.argv) for f in INVOCATIONS if f.engine == engine)
    [error] = json.loads(_run(python, "parse", engine, stdin=json.dumps([[*example, "--no-such-flag-anywhere"]])))
    assert error is not None and "--no-such-flag-anywhere" in error


@pytest.mark.parametrize("engine", ENGINES)
def test_the_checked_in_table_is_what_the_parser_says(engine: str) -> None:
    python = _needs(engine)
    path = Path(__file__).parent / "engine_flags" / f"{engine}.json"
    assert _run(python, "dump", engine) == path.read_text(encoding="utf-8"), f"regenerate {path.name}: python tools/engine_flags.py dump {engine}"
