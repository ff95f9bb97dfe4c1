"""`tandem simulate` on a small scenario: the report files, and one-line errors."""

from __future__ import annotations

import json

import yaml

SCENARIO = """
apiVersion: tandem.dev/v1alpha1
kind: Scenario
metadata: {name: small}
spec:
  seed: 1
  durationSeconds: 400
  cluster: {shape: "block=1,rack=2,host=4", gpus: 8}
  groups:
    - {at: 0, file: group.yaml}
  faults:
    - {at: 200, rack: rack-0, recoverAfterSeconds: 100}
"""


def _group(examples):
    docs = list(yaml.safe_load_all((examples / "llama-70b.yaml").read_text()))
    docs[0]["spec"]["replicas"] = 1
    return yaml.safe_dump(docs[0])


def test_simulate_writes_summary_plots_and_report(tmp_path, run_cli, examples):
    (tmp_path / "scenario.yaml").write_text(SCENARIO)
    (tmp_path / "group.yaml").write_text(_group(examples))
    out = tmp_path / "out"
    result = run_cli("simulate", tmp_path / "scenario.yaml", "--compare", "--out", out)
    assert result.exit_code == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"tandem", "independent", "sequential"}
    figures = summary["tandem"]["groups"]["serving/llama-70b"]
    assert set(figures) == {
        "time_to_first_functional_s",
        "time_to_target_s",
        "available_fraction",
        "max_ratio_deviation",
        "partial_gpu_seconds",
        "stalls",
        "affinity_satisfied_fraction",
    }
    assert figures["partial_gpu_seconds"] == 0 and figures["time_to_first_functional_s"] is not None
    page = (out / "index.html").read_text()
    for image in ("functional.svg", "ratio.svg", "allocated.svg", "topology.svg"):
        assert (out / image).stat().st_size > 1000 and f'src="{image}"' in page
    stranded = any(g["partial_gpu_seconds"] for figures in summary.values() for g in figures["groups"].values())
    assert ('src="partial.svg"' in page) == bool(stranded), "the headline plot when a run held GPUs in non-functional units"


def test_a_bad_scenario_is_one_line_and_exit_2(tmp_path, run_cli):
    (tmp_path / "scenario.yaml").write_text(SCENARIO.replace("durationSeconds: 400", "durationSeconds: -1"))
    result = run_cli("simulate", tmp_path / "scenario.yaml", "--out", tmp_path / "out")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "spec.durationSeconds" in lines[0]
    (tmp_path / "scenario.yaml").write_text(SCENARIO)
    result = run_cli("simulate", tmp_path / "scenario.yaml", "--out", tmp_path / "out")
    assert result.exit_code == 2 and "group.yaml" in result.stderr


def test_the_bundled_demo_scenario_loads(examples):
    from tandem.sim.scenario import load_scenario

    path = examples / "scenarios" / "demo.yaml"
    scenario = load_scenario(str(path), path.read_text(), lambda rel: (str(path.parent / rel), (path.parent / rel).read_text()))
    assert len([n for n in scenario.cluster if n["kind"] == "Node"]) * 8 == 1024
    assert len(scenario.arrivals) == 4 and len(scenario.changes) == 2
    assert len(scenario.faults) == 1 and len(scenario.faults[0].nodes) == 8


SERVING_SCENARIO = """
apiVersion: tandem.dev/v1alpha1
kind: Scenario
metadata: {name: seeds}
spec:
  seed: 5
  seeds: 3
  durationSeconds: 240
  cluster: {shape: "block=1,rack=2,host=2", gpus: 8}
  startup:
    "*": {imagePullSeconds: 5, modelLoadMedianSeconds: 30, modelLoadSigma: 0.1}
  groups:
    - {at: 0, file: group.yaml}
  serving:
    - group: serving/llama-70b-chat
      model: llama-3.1-70b
      gpu: h100-sxm
      slo: {ttftSeconds: 1.0, itlSeconds: 0.05}
      synthetic: {rate: 4}
      startAt: 30
  compare:
    - {name: fixed-ratio, autoscaling: FixedRatio}
    - {name: band-raise, autoscaling: PreferredBand, autoscalingPatch: {ratioEnforcement: raiseShort}}
    - {name: hpa-slow, autoscaling: Independent, speedFactor: 0.7}
"""


def test_seeds_give_means_and_intervals_and_the_same_seeds_the_same_bytes(tmp_path, run_cli, examples):
    (tmp_path / "scenario.yaml").write_text(SERVING_SCENARIO)
    (tmp_path / "group.yaml").write_text((examples / "llama-70b-autoscaled.yaml").read_text())
    outs = [tmp_path / "one", tmp_path / "two"]
    for out in outs:
        result = run_cli("simulate", tmp_path / "scenario.yaml", "--compare", "--seeds", "2", "--run", "fixed-ratio", "--run", "band-raise", "--out", out)
        assert result.exit_code == 0, result.stderr
    written = sorted(p.name for p in outs[0].iterdir())
    assert written == sorted(p.name for p in outs[1].iterdir())
    for name in written:  # summary.json, every plot and index.html
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), f"{name} differs between two runs of the same inputs"
    summary = json.loads((outs[0] / "summary.json").read_text())
    assert set(summary) == {"fixed-ratio", "band-raise"}, "--run picks runs of the compare list"
    across = summary["fixed-ratio"]["across_seeds"]
    assert across["seeds"] == [5, 6], "--seeds overrides the scenario's 3"
    slo = across["serving"]["serving/llama-70b-chat"]["slo_attainment"]
    assert slo["n"] == 2 and slo["values"][0] == summary["fixed-ratio"]["serving"]["serving/llama-70b-chat"]["slo_attainment"]
    assert slo["ci95"][0] <= slo["mean"] <= slo["ci95"][1]
    assert "serving across 2 seeds" in result.stdout
    page = (outs[0] / "index.html").read_text()
    assert "Across 2 seeds" in page and 'src="serving_seeds.svg"' in page
    assert (outs[0] / "serving_seeds.svg").stat().st_size > 1000


def test_an_unknown_run_is_named(tmp_path, run_cli, examples):
    (tmp_path / "scenario.yaml").write_text(SERVING_SCENARIO)
    (tmp_path / "group.yaml").write_text((examples / "llama-70b-autoscaled.yaml").read_text())
    result = run_cli("simulate", tmp_path / "scenario.yaml", "--compare", "--run", "nope", "--out", tmp_path / "out")
    assert result.exit_code == 2 and "--run" in result.stderr and "fixed-ratio, band-raise, hpa-slow" in result.stderr
