"""`tandem profile predict`: the roofline's figures as JSON, bad input as one `error:` line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tandem.sim.serving import gpu_profile, model_profile, profiles
from tandem.sim.serving.roofline import Parallel, decode_step_seconds, kv_capacity_tokens, prefill_seconds


def test_predict_prints_the_roofline_figures(run_cli):
    result = run_cli("profile", "predict", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "8",
                     "--prompt", "2048", "--batch", "4", "--context", "3000")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    model, gpu = model_profile("llama-3.1-70b"), gpu_profile("h100-sxm")
    prefill = prefill_seconds(model, gpu, Parallel(8), 4 * 2048, [2048] * 4)
    step = decode_step_seconds(model, gpu, Parallel(8), 4, 4 * 3000)
    assert out["prefill_s"] == pytest.approx(prefill) and out["decode_step_s"] == pytest.approx(step)
    assert out["prefill_tokens_per_s"] == pytest.approx(4 * 2048 / prefill)
    assert out["decode_tokens_per_s"] == pytest.approx(4 / step)
    assert out["kv_capacity_tokens"] == kv_capacity_tokens(model, gpu, Parallel(8))
    assert (out["tp"], out["pp"], out["batch"], out["context"], out["kv_fits"]) == (8, 1, 4, 3000, True)


def test_predict_takes_a_profile_path_and_the_context_defaults_to_the_prompt(run_cli, tmp_path):
    path = tmp_path / "gpu.yaml"
    path.write_text((Path(profiles.__file__).parent / "data" / "gpus" / "h200-sxm.yaml").read_text())
    result = run_cli("profile", "predict", "--model", "mixtral-8x7b", "--gpu", path, "--tp", "2", "--prompt", "512")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["context"] == 512 and out["batch"] == 1
    assert out["active_params"] < out["params"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "llama-9", "--gpu", "h100-sxm", "--prompt", "10"], "error: --model: unknown model 'llama-9'"),
        (["--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--prompt", "10", "--tp", "3"], "error: --tp: 3 does not divide"),
        (["--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--prompt", "10"], "error: --tp: llama-3.1-70b does not fit on 1 x h100-sxm"),
        (["--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--prompt", "10", "--tp", "8", "--pp", "81"], "error: --pp: 81 stages"),
        (["--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--prompt", "10", "--tp", "8", "--expert-parallel"],
         "error: --expert-parallel: llama-3.1-70b has no experts"),
        (["--model", "llama-3.1-8b", "--gpu", "nowhere.yaml", "--prompt", "10"], "error: --gpu: unknown GPU 'nowhere.yaml'"),
    ],
)
def test_bad_input_is_one_error_line_naming_the_option(run_cli, args, message):
    result = run_cli("profile", "predict", *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1


def test_a_bad_number_is_a_usage_error_naming_the_option():
    from tandem.cli.main import main

    assert main(["profile", "predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prompt", "0"]) == 2
    assert main(["profile", "predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prompt", "5", "--batch", "x"]) == 2
