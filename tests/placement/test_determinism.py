"""Byte-identical output across processes, whatever Python's hash seed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _plan_json(hash_seed: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    files = [str(EXAMPLES / name) for name in ("llama-70b.yaml", "llama-405b.yaml", "llama-8b.yaml")]
    command = [sys.executable, "-m", "tandem.cli.main", "plan", "--cluster", str(EXAMPLES / "cluster.yaml"), *files, "-o", "json"]
    result = subprocess.run(command, env=env, capture_output=True, check=True, timeout=120)
    return result.stdout


def test_plan_is_byte_identical_across_processes():
    first = _plan_json("1")
    assert first == _plan_json("4242")
    assert b'"state": "MinimumPlaced"' in first and b'"state": "Placed"' in first
