"""The roofline against NVIDIA aiconfigurator (the `calibrate` extra): the fidelity goal of
bench/fidelity.py, and the calibration it documents. Skipped, with the reason, where
aiconfigurator is not installed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tandem.sim.serving import gpu_profile, reference

ROOT = Path(__file__).resolve().parents[2]
needs_reference = pytest.mark.skipif(reference.unavailable() is not None, reason=str(reference.unavailable()))


@needs_reference
def test_every_computable_row_is_within_twenty_percent_of_aiconfigurator():
    rows = list(reference.rows())
    summary = reference.summary(rows)
    assert summary["rows"] >= 200  # most of the grid fits; the rest is skipped with a reason
    bad = [r.as_json() for r in rows if not r.skipped and (abs(r.ttft_error) > 0.2 or abs(r.itl_error) > 0.2)]
    assert not bad, bad[:5]
    assert all(r.skipped in ("weights do not fit",) or r.skipped.startswith("KV of ") for r in rows if r.skipped)


@needs_reference
def test_the_profiles_all_reduce_is_the_fit_to_the_measured_table():
    for name in ("h100-sxm", "h200-sxm"):
        gpu = gpu_profile(name)
        fit = reference.fit_all_reduce(gpu)
        assert fit["all_reduce_latency_us"] == pytest.approx(gpu.all_reduce_latency_us, rel=0.02)
        for degree, value in fit["all_reduce_efficiency"].items():
            assert value == pytest.approx(gpu.all_reduce_efficiency[degree], rel=0.02)


def test_bench_fidelity_prints_rows_and_a_summary_or_says_why_not():
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "fidelity.py"), "--models", "llama-3.1-8b", "--gpus", "h200-sxm", "--tp", "2"],
        capture_output=True, text=True, check=True, timeout=600,
    )
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    if reference.unavailable():
        assert lines == [{"suite": "fidelity", "unavailable": reference.unavailable()}]
        return
    assert len(lines) == 4 * 5 + 1
    assert lines[-1]["summary"] and lines[-1]["ttft_within"] == 1.0 and lines[-1]["itl_within"] == 1.0
    computed = [line for line in lines[:-1] if "skipped" not in line]
    assert {"ttft_ms", "ttft_ref_ms", "ttft_error", "itl_ms", "itl_ref_ms", "itl_error"} <= set(computed[0])
