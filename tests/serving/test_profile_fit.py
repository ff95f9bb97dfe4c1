"""`tandem profile fit`: measured rows in the formats tools write, a fit that recovers the
roofline's own constants, a profile file `--gpu` and scenarios accept, bad input as one line."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tandem.errors import InputError
from tandem.sim.serving import fitting, gpu_profile, model_profile, roofline
from tandem.sim.serving.measured import Observation, parse_measured

FIXTURES = Path(__file__).parent / "measured"
SPLITWISE = Path(__file__).parents[2] / "bench" / "data" / "splitwise"
H100 = gpu_profile("h100-sxm")
LLAMA_8B = model_profile("llama-3.1-8b")


def _parse(name: str, **options: int) -> list[Observation]:
    return parse_measured(name, (FIXTURES / name).read_text(), **options)


# ------------------------------------------------------------------ the formats


def test_a_plain_csv_row_is_a_prefill_and_a_decode_step_with_defaults():
    text = "tp,prompt,batch,context,ttft_ms,itl_ms\n2,512,4,600,80,20\n4,256,,,,\n"
    with pytest.raises(InputError, match="line 3: measures nothing"):
        parse_measured("m.csv", text)
    rows = parse_measured("m.csv", "tp,prompt,batch,context,ttft_ms,itl_ms\n2,512,4,600,80,20\n4,256,,,40,\n")
    assert rows == [
        Observation("ttft", 2, 1, 512, 4, 600, 0.08, "m.csv: line 2"),
        Observation("itl", 2, 1, 512, 4, 600, 0.02, "m.csv: line 2"),
        Observation("ttft", 4, 1, 256, 1, 256, 0.04, "m.csv: line 3"),
    ]


def test_tokens_per_s_is_a_decode_step_when_itl_is_not_given():
    rows = parse_measured("m.csv", "model,gpu,tp,pp,prompt,batch,tokens_per_s\nx,h100,8,2,1000,32,1600\n")
    assert rows == [Observation("itl", 8, 2, 1000, 32, 1000, 32 / 1600, "m.csv: line 2")]


def test_vllm_bench_serve_result_reads_tp_from_its_metadata_and_the_batch_from_max_concurrency():
    rows = _parse("vllm_serve_result.json")
    # 65,536 input and 16,384 output tokens over 64 requests; concurrency 8: only decode steps
    assert rows == [Observation("itl", 2, 1, 1024, 8, 1024 + 128, 0.01975, "vllm_serve_result.json")]


def test_genai_perf_json_at_concurrency_one_gives_its_ttft_as_a_lone_prefill():
    with pytest.raises(InputError, match="tp: not in the file .* and no --tp given"):
        _parse("genai_perf_export.json")
    rows = _parse("genai_perf_export.json", tp=4)
    assert [(o.metric, o.tp, o.prompt, o.batch, o.context) for o in rows] == [("ttft", 4, 2048, 1, 2048), ("itl", 4, 2048, 1, 2048 + 128)]
    assert [o.seconds for o in rows] == pytest.approx([0.0613, 0.0091])


def test_genai_perf_csv_needs_the_concurrency_it_does_not_record():
    with pytest.raises(InputError, match="concurrency: not in the file"):
        _parse("genai_perf_export.csv", tp=8)
    rows = _parse("genai_perf_export.csv", tp=8, concurrency=4)
    assert [(o.metric, o.tp, o.prompt, o.batch, o.context, o.seconds) for o in rows] == [("itl", 8, 4096, 4, 4096 + 128, pytest.approx(0.0121))]


# ------------------------------------------------------------------ the fit


def _rows_from(gpu, model, configs) -> list[Observation]:
    return [
        Observation(metric, tp, 1, prompt, batch, context, fitting.predict(model, gpu, Observation(metric, tp, 1, prompt, batch, context, 1.0, "")), f"row {i}")
        for i, (metric, tp, prompt, batch, context) in enumerate(configs)
    ]


GRID = [
    (metric, tp, prompt, batch, prompt + 64)
    for metric in ("ttft", "itl")
    for tp in (1, 2, 4, 8)
    for prompt in (128, 1024, 4096)
    for batch in (1, 8, 32)
]


@settings(max_examples=6, deadline=None)
@given(
    mfu=st.floats(0.3, 0.9),
    mbu=st.floats(0.4, 0.95),
    iteration_overhead_us=st.floats(50, 20_000),
    all_reduce_latency_us=st.floats(1, 50),
    all_reduce_step_latency_us=st.floats(0, 60),
    all_reduce_efficiency=st.floats(0.15, 0.9),
)
def test_the_fit_recovers_the_predictions_of_the_constants_that_made_the_rows(**constants):
    truth = fitting.with_constants(H100, constants)
    rows = _rows_from(truth, LLAMA_8B, GRID)
    fit = fitting.fit_profile(LLAMA_8B, H100, rows)
    assert not fit.skipped
    worst = max(abs(math.log(r.ratio)) for r in fit.residuals)
    assert worst < 0.03, fitting.summary(fit.residuals)
    held_out = _rows_from(truth, LLAMA_8B, [("itl", 8, 2048, 16, 3000), ("ttft", 2, 8192, 1, 8192)])
    for row in held_out:
        assert fitting.predict(LLAMA_8B, fit.gpu, row) == pytest.approx(row.seconds, rel=0.05)


def test_a_fit_is_deterministic_and_its_profile_reads_back():
    rows = _rows_from(fitting.with_constants(H100, {"mbu": 0.6, "iteration_overhead_us": 5000, "all_reduce_efficiency": 0.7}), LLAMA_8B, GRID[::5])
    texts = [fitting.profile_text(fitting.fit_profile(LLAMA_8B, H100, rows, name="mine"), model="llama-3.1-8b", base="h100-sxm", sources=["m.csv"]) for _ in range(2)]
    assert texts[0] == texts[1]
    profile = fitting.parse_profile_text("mine.yaml", texts[0])
    assert profile.name == "mine" and profile.peak_tflops == H100.peak_tflops and profile.hbm_gib == H100.hbm_gib
    for row in rows:
        assert fitting.predict(LLAMA_8B, profile, row) == pytest.approx(row.seconds, rel=0.02)


def test_rows_the_replica_cannot_hold_are_skipped_and_a_tp_it_cannot_run_is_named():
    model = model_profile("llama-3.1-70b")
    rows = [Observation("itl", 1, 1, 512, 1, 512, 0.05, "m.csv: line 2"), Observation("itl", 8, 1, 512, 1, 512, 0.02, "m.csv: line 3")]
    fit = fitting.fit_profile(model, H100, rows)
    assert [(o.where, "does not fit" in why) for o, why in fit.skipped] == [("m.csv: line 2", True)]
    with pytest.raises(InputError, match=r"^m.csv: line 4: tp 3 does not divide"):
        fitting.fit_profile(model, H100, rows + [Observation("itl", 3, 1, 512, 1, 512, 0.02, "m.csv: line 4")])


def test_the_all_reduce_latency_grows_by_a_step_per_doubling_of_tp_and_the_bundled_profiles_have_none():
    assert H100.all_reduce_step_latency_us == 0 and gpu_profile("h200-sxm").all_reduce_step_latency_us == 0
    gpu = H100.model_copy(update={"all_reduce_step_latency_us": 10.0})
    for tp in (2, 4, 8):
        extra = roofline.all_reduce_seconds(gpu, tp, 4096) - roofline.all_reduce_seconds(H100, tp, 4096)
        assert extra == pytest.approx(math.log2(tp) * 10e-6)


# ------------------------------------------------------------------ the public rows


def test_the_measured_csv_is_the_conversion_of_splitwise_rows():
    spec = importlib.util.spec_from_file_location("convert", SPLITWISE / "convert.py")
    assert spec and spec.loader
    convert = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(convert)
    source = (SPLITWISE / "perf_model_llama2-70b_h100.csv").read_text()
    assert convert.converted(source) == (SPLITWISE / "measured.csv").read_text()


def test_held_out_tp_degrees_of_the_splitwise_rows_are_predicted_within_the_goal():
    model = model_profile(SPLITWISE / "llama-2-70b.yaml")
    rows = parse_measured("measured.csv", (SPLITWISE / "measured.csv").read_text())
    for held in (2, 4, 8):
        fit = fitting.fit_profile(model, H100, [o for o in rows if o.tp != held])
        test = [o for o in rows if o.tp == held and not fitting.unfit_reason(model, H100, o)]
        stats = fitting.summary(fitting.residual_table(model, fit.gpu, test))
        assert stats["all_geomean_error"] <= 0.25 and stats["all_within_half_to_double"] == 1.0, (held, stats)


# ------------------------------------------------------------------ the command


def _fit_cli(run_cli, tmp_path, *extra):
    measured = tmp_path / "m.csv"
    rows = _rows_from(fitting.with_constants(H100, {"mbu": 0.7, "all_reduce_step_latency_us": 20.0, "all_reduce_efficiency": 0.5}), LLAMA_8B, GRID[::3])
    lines = ["tp,prompt,batch,context,ttft_ms,itl_ms"]
    lines += [f"{o.tp},{o.prompt},{o.batch},{o.context},{o.seconds * 1e3:.6f}," if o.metric == "ttft" else f"{o.tp},{o.prompt},{o.batch},{o.context},,{o.seconds * 1e3:.6f}" for o in rows]
    measured.write_text("\n".join(lines) + "\n")
    return run_cli("profile", "fit", measured, "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "-o", tmp_path / "mine.yaml", *extra)


def test_fit_writes_a_profile_that_predict_and_scenarios_accept(run_cli, tmp_path):
    result = _fit_cli(run_cli, tmp_path)
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    summary = lines[-1]
    assert summary["summary"] and summary["profile"].endswith("mine.yaml") and summary["all_geomean_error"] < 0.02
    assert all("predicted_ms" in line and "measured_ms" in line for line in lines[:-1])
    assert set(summary["constants"]) == set(fitting.FITTED)
    profile = tmp_path / "mine.yaml"
    assert gpu_profile(profile).name == "mine"

    predicted = run_cli("profile", "predict", "--model", "llama-3.1-8b", "--gpu", profile, "--tp", "2", "--prompt", "1024")
    assert predicted.exit_code == 0, predicted.stderr
    assert json.loads(predicted.stdout)["gpu"] == "mine"

    from tandem.sim.scenario import _profile
    from tandem.sim.serving import GpuProfile

    loaded = _profile(GpuProfile, gpu_profile, "mine.yaml", "spec.serving[0].gpu", "s.yaml", lambda rel: (str(tmp_path / rel), (tmp_path / rel).read_text()))
    assert loaded == gpu_profile(profile)


def test_simulate_runs_a_scenario_whose_gpu_is_a_fitted_profile(run_cli, tmp_path, examples):
    assert _fit_cli(run_cli, tmp_path).exit_code == 0
    scenario = f"""
apiVersion: tandem.dev/v1alpha1
kind: Scenario
metadata: {{name: fitted}}
spec:
  seed: 1
  durationSeconds: 120
  cluster: {{shape: "block=1,rack=1,host=2", gpus: 8}}
  groups:
    - {{at: 0, file: group.yaml}}
  serving:
    - group: serving/llama-70b-chat
      model: llama-3.1-70b
      gpu: mine.yaml
      slo: {{ttftSeconds: 1.0, itlSeconds: 0.05}}
      synthetic: {{rate: 1}}
      startAt: 30
"""
    (tmp_path / "scenario.yaml").write_text(scenario)
    (tmp_path / "group.yaml").write_text((examples / "llama-70b-autoscaled.yaml").read_text())
    result = run_cli("simulate", tmp_path / "scenario.yaml", "--out", tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    broken = tmp_path / "mine.yaml"
    broken.write_text(broken.read_text().replace("mbu: ", "mbu: 1.5 #"))
    result = run_cli("simulate", tmp_path / "scenario.yaml", "--out", tmp_path / "out2")
    assert result.exit_code == 2 and "mine.yaml: mbu: " in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "m.csv: empty: needs a CSV header"),
        ("tp,prompt,ttft_ms\n", "m.csv: has a header but no rows"),
        ("prompt,ttft_ms\n512,40\n", "m.csv: line 1: needs a 'tp' column"),
        ("tp,prompt,batch\n2,512,1\n", "m.csv: line 1: needs a measured column"),
        ("tp,prompt,speed\n2,512,1\n", "m.csv: line 1, column 3: 'speed' is not one of model,gpu,tp,pp"),
        ("tp,prompt,ttft_ms\n2,512,40\n2,abc,40\n", "m.csv: line 3, prompt: must be a whole number, got 'abc'"),
        ("tp,prompt,ttft_ms\n2,512,fast\n", "m.csv: line 2, ttft_ms: must be a number, got 'fast'"),
        ("tp,prompt,ttft_ms\n2,512,-4\n", "m.csv: line 2, ttft_ms: must be a positive number"),
        ("tp,prompt,ttft_ms\n2,512\n", "m.csv: line 2: has 2 cells, the header 3"),
        ("model,tp,prompt,itl_ms\na,2,512,40\nb,2,512,40\n", "m.csv: line 3, model: 'b' differs from 'a' (line 2)"),
        ("tp,prompt,itl_ms\n3,512,40\n", "m.csv: line 2: tp 3 does not divide"),
        ('{"mean_tpot_ms": 20, "completed": 4}', "m.csv: tp: not in the file (vllm bench serve --metadata tp=N) and no --tp given"),
        ('{"x": 1}', "m.csv: a JSON file must be"),
    ],
)
def test_bad_measured_rows_are_one_line_naming_the_row_and_column(run_cli, tmp_path, text, message):
    measured = tmp_path / "m.csv"
    measured.write_text(text)
    output = tmp_path / "out.yaml"
    result = run_cli("profile", "fit", measured, "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "-o", output)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"error: {tmp_path}/{message}") or result.stderr.startswith(f"error: {message}"), result.stderr
    assert result.stderr.count("\n") == 1 and not output.exists()


def test_bad_options_are_named(run_cli, tmp_path):
    (tmp_path / "m.csv").write_text("tp,prompt,ttft_ms\n2,512,40\n")
    result = run_cli("profile", "fit", tmp_path / "m.csv", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "-o", tmp_path / "out.txt")
    assert result.exit_code == 2 and result.stderr.startswith("error: --output: must end in .yaml or .yml")
    result = run_cli("profile", "fit", tmp_path / "m.csv", "--model", "llama-3.1-8b", "--gpu", "nope", "-o", tmp_path / "out.yaml")
    assert result.exit_code == 2 and result.stderr.startswith("error: --gpu: unknown GPU 'nope'")
    result = run_cli("profile", "fit", tmp_path / "none.csv", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "-o", tmp_path / "out.yaml")
    assert result.exit_code == 2 and "none.csv: cannot read" in result.stderr
