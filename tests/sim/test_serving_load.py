"""Serving load in the simulated cluster: scenarios with traces, the autoscaler's pass
through the controller, the summary keys and the report, and the bundled trace scenarios."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from tandem.autoscaling.signals import RoleSignals, Signals
from tandem.cluster.memory import MemoryStore
from tandem.controller import autoscale
from tandem.controller.reconcile import reconcile
from tandem.errors import InputError
from tandem.sim.runner import simulate
from tandem.sim.scenario import load_scenario, with_variant
from tandem.sim.summary import summarize

ROOT = Path(__file__).resolve().parents[2]
SHARED_TRACES = ROOT.parent / "shared" / "traces"
GROUP = ROOT / "examples" / "llama-70b-autoscaled.yaml"

SCENARIO = """
apiVersion: tandem.dev/v1alpha1
kind: Scenario
metadata: {name: small-serving}
spec:
  seed: 3
  durationSeconds: 420
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
      synthetic: {rate: 25, arrivals: gamma, burstiness: 2}
      startAt: 60
  compare:
    - {name: fixed-ratio, autoscaling: FixedRatio}
    - {name: independent-hpa, autoscaling: Independent}
"""


def _load(text: str, tmp_path: Path, group_text: str | None = None):
    (tmp_path / "group.yaml").write_text(group_text if group_text is not None else GROUP.read_text())
    return load_scenario("scenario.yaml", text, lambda rel: (rel, (tmp_path / rel).read_text()))


def test_a_synthetic_load_is_served_and_scaled_through_the_coordination_planner(tmp_path):
    scenario = _load(SCENARIO, tmp_path)
    result = simulate(with_variant(scenario, scenario.variants[0]))
    served = result.serving["serving/llama-70b-chat"]
    assert served.completed.sum() > 0.9 * len(served.arrival_s)
    events = result.scale_events["serving/llama-70b-chat"]
    assert events, "a 25 req/s load on 2 prefill : 1 decode must make the autoscaler act"
    # The autoscaler writes the desired counts; reconcile moves to them in maxSkew steps,
    # so Ready counts never jump past the desired ones and end at them.
    final = result.store.get("InferenceGroup", "serving", "llama-70b-chat")
    assert {r["name"]: r["replicas"] for r in final["spec"]["roles"]} == events[-1][1]
    assert final["status"]["autoscaling"]["desired"] == events[-1][1]
    assert "coordination" in final["status"]["units"][0], "reconcile's status must keep its own keys"
    assert result.store.get("InferenceGroup", "serving", "llama-70b-chat")["status"]["autoscaling"]["state"]["history"]
    # FixedRatio keeps prefill:decode at the configured 2:1 (within rounding of the split).
    for _, desired in events:
        assert abs(desired["prefill"] - 2 * desired["decode"]) <= 2
    # The first change (2:1 -> 4:2) goes through the scaling planner in maxSkew 1 steps:
    # {3,2} first, the fourth prefill only once that step is Scheduled, so the binds of
    # the change come at two different times, at most one new replica per role first.
    at, desired = events[0]
    assert desired == {"prefill": 4, "decode": 2}
    binds = [(t, line.split()[1]) for t, line in result.log if at <= t < at + 30 and line.startswith("bound llama-70b-chat-")]
    first = min(t for t, _ in binds)
    assert len(binds) == 3 and len({t for t, _ in binds}) == 2
    early = [pod for t, pod in binds if t == first]
    assert sum("-prefill-" in pod for pod in early) <= 1 and sum("-decode-" in pod for pod in early) <= 1
    # Ready counts never pass the largest desired count asked for so far.
    most: dict[str, int] = {}
    for sample in result.samples:
        for role, count in sample.desired.get("serving/llama-70b-chat", {}).items():
            most[role] = max(most.get(role, 0), count)
        for role, count in sample.ready.get("serving/llama-70b-chat", {}).items():
            assert count <= most[role]


def test_summary_has_the_documented_serving_keys_and_is_deterministic(tmp_path):
    scenario = _load(SCENARIO, tmp_path)
    run = with_variant(scenario, scenario.variants[0])
    first = summarize(run, simulate(run))
    second = summarize(run, simulate(run))
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    figures = first["serving"]["serving/llama-70b-chat"]
    assert set(figures) == {
        "requests", "completed", "restarts", "ttft_s", "itl_s", "e2e_s", "kv_transfer_s", "slo",
        "slo_attainment", "goodput_rps_per_gpu", "mean_gpus", "gpu_utilisation", "scale_events", "replicas",
        "gpu_utilisation_over_time", "preempted", "preemptions", "prefix_cache_hit_rate", "drained_replicas",
        "drain_requeued",
    }
    over_time = figures["gpu_utilisation_over_time"]
    assert over_time and all(0 <= u <= 1 for _, u in over_time)
    assert [t for t, _ in over_time] == sorted(t for t, _ in over_time)
    kinds = {r["kind"] for r in figures["replicas"]}
    assert kinds == {"prefill", "decode"}
    for replica in figures["replicas"]:
        assert 0 <= replica["busy_fraction"] <= 1 and replica["tokens_per_s"] >= 0
        assert (replica["peak_kv_utilization"] is None) == (replica["kind"] == "prefill")
    assert 0 < figures["slo_attainment"] <= 1 and 0 < figures["gpu_utilisation"] <= 1
    assert figures["ttft_s"]["p50"] <= figures["ttft_s"]["p90"] <= figures["ttft_s"]["p99"]
    # goodput per GPU is exactly the SLO-meeting requests per second of load per GPU held
    load_s = run.duration_s - 60.0
    met = figures["slo_attainment"] * figures["requests"]
    # (to the summary's rounding: 5 decimals of goodput, 4 of attainment, 2 of mean GPUs)
    assert figures["goodput_rps_per_gpu"] == pytest.approx(met / load_s / figures["mean_gpus"], rel=5e-3)


def test_compare_runs_every_policy_on_the_same_requests_and_writes_the_report(tmp_path, run_cli):
    (tmp_path / "scenario.yaml").write_text(SCENARIO)
    (tmp_path / "group.yaml").write_text(GROUP.read_text())
    out = tmp_path / "out"
    result = run_cli("simulate", tmp_path / "scenario.yaml", "--compare", "--out", out)
    assert result.exit_code == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"fixed-ratio", "independent-hpa"}
    requests = {name: figures["serving"]["serving/llama-70b-chat"]["requests"] for name, figures in summary.items()}
    assert len(set(requests.values())) == 1, "every policy must see the same trace"
    page = (out / "index.html").read_text()
    for image in ("serving_slo.svg", "serving_latency.svg", "serving_replicas.svg", "serving_utilisation.svg", "serving_replica_load.svg"):
        assert (out / image).stat().st_size > 1000 and f'src="{image}"' in page
    assert "Goodput (SLO-met requests/s per GPU)" in page and "SLO met" in result.stdout


@pytest.mark.parametrize(
    "edit, path",
    [
        (lambda s: s.replace("group: serving/llama-70b-chat", "group: serving/nope"), "spec.serving[0].group"),
        (lambda s: s.replace("gpu: h100-sxm", "gpu: tpu-v9"), "spec.serving[0].gpu"),
        (lambda s: s.replace("model: llama-3.1-70b", "model: gpt-9"), "spec.serving[0].model"),
        (lambda s: s.replace("      startAt: 60", "      decodeRole: generate"), "spec.serving[0].decodeRole"),
        (lambda s: s.replace("synthetic: {rate: 25, arrivals: gamma, burstiness: 2}", "trace: {name: azure-conv-2023}"), "spec.serving[0].trace.name"),
        (lambda s: s.replace("synthetic: {rate: 25, arrivals: gamma, burstiness: 2}", "synthetic: {rate: -1}"), "spec.serving.0.synthetic.rate"),
        (lambda s: s.replace("autoscaling: Independent", "autoscaling: Magic"), "spec.compare.1.autoscaling"),
        (lambda s: s.replace("      startAt: 60", "      decodeRole: prefill"), "spec.serving[0].decodeRole: 'prefill' differs from the group's spec.autoscaling.decodeRole"),
        (lambda s: s.replace("arrivals: gamma, burstiness: 2", "burstiness: 2"), "spec.serving[0].synthetic.burstiness: applies to gamma arrivals only"),
        (lambda s: s.replace("burstiness: 2}", "burstiness: 2, input: {median: 10, maximum: 5, distribution: fixed}}"), "spec.serving[0].synthetic.input.median"),
    ],
)
def test_bad_serving_settings_name_their_field(tmp_path, edit, path):
    with pytest.raises(InputError) as caught:
        _load(edit(SCENARIO), tmp_path)
    assert path in str(caught.value) and "\n" not in str(caught.value)


def test_a_comparison_that_would_leave_a_group_invalid_is_refused(tmp_path):
    group = yaml.safe_load(GROUP.read_text())
    del group["spec"]["autoscaling"]["slo"]
    scenario = SCENARIO.replace("- {name: independent-hpa, autoscaling: Independent}", "- {name: slo, autoscaling: SLO}")
    with pytest.raises(InputError) as caught:
        _load(scenario, tmp_path, yaml.safe_dump(group))
    assert "spec.compare[1].autoscaling: makes serving/llama-70b-chat invalid: spec.autoscaling" in str(caught.value)


TRACE = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.0000000,374,44\n2023-11-16 18:15:50.0000000,396,109\n"


@pytest.mark.parametrize(
    "trace, text, expected",
    [
        ("{file: t.csv, startSeconds: 100}", TRACE, "scenario.yaml: spec.serving[0].trace:"),
        ("{file: t.csv}", TRACE.replace(",109", ",lots"), "t.csv: line 3"),
        ("{name: azure-conv-2023}", TRACE, "scenario.yaml: spec.serving[0].trace.name: AzureLLMInferenceTrace_conv.csv is not in"),
        ("{name: sharegpt}", TRACE, "scenario.yaml: spec.serving[0].trace.name: no trace called 'sharegpt'"),
    ],
)
def test_trace_problems_name_the_scenario_field_or_the_trace_line(tmp_path, run_cli, trace, text, expected):
    (tmp_path / "t.csv").write_text(text)
    (tmp_path / "group.yaml").write_text(GROUP.read_text())
    scenario = SCENARIO.replace("synthetic: {rate: 25, arrivals: gamma, burstiness: 2}", f"trace: {trace}")
    (tmp_path / "scenario.yaml").write_text(scenario)
    result = run_cli("simulate", tmp_path / "scenario.yaml", "--traces", tmp_path / "empty", "--out", tmp_path / "out")
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert expected in result.stderr.replace(str(tmp_path) + "/", ""), result.stderr


def _signals(now: float, decode_tokens: float) -> Signals:
    role = RoleSignals(replicas=1, queue_depth=0.0, busy_fraction=0.5, kv_utilization=0.5, tokens_per_s=decode_tokens)
    return Signals(now, 60.0, {"prefill": role, "decode": role}, 5.0, 5000.0, decode_tokens, 0.2, 0.02)


def test_the_autoscaler_pass_writes_spec_and_status_with_compare_and_swap():
    store = MemoryStore()
    group = yaml.safe_load(GROUP.read_text())
    store.create(group)
    report = autoscale(store, 0.0, lambda ns, name, now: _signals(now, 12_000.0))
    assert report.changes == [("serving/llama-70b-chat", {"decode": 4, "prefill": 8})]
    stored = store.get("InferenceGroup", "serving", "llama-70b-chat")
    assert [r["replicas"] for r in stored["spec"]["roles"]] == [8, 4]
    assert stored["metadata"]["generation"] == 2 and stored["status"]["autoscaling"]["lastDecisionAt"] == "1970-01-01T00:00:00Z"
    # Not due again before intervalSeconds; the controller's status write keeps the autoscaler's memory.
    assert autoscale(store, 5.0, lambda *a: _signals(5.0, 0.0)).changes == []
    reconcile(store, 6.0)
    assert store.get("InferenceGroup", "serving", "llama-70b-chat")["status"]["autoscaling"]["lastDecisionAt"] == "1970-01-01T00:00:00Z"
    # A group changed by someone else between read and write is left for the next pass.
    def racing_snapshot():
        reader = MemoryStore.snapshot(store)
        store.patch("InferenceGroup", "serving", "llama-70b-chat", {"metadata": {"labels": {"touched": "yes"}}})
        return reader

    store.snapshot = racing_snapshot  # type: ignore[method-assign]
    report = autoscale(store, 400.0, lambda *a: _signals(400.0, 100.0))
    assert report.conflicts == 1 and report.changes == []
    assert [r["replicas"] for r in store.get("InferenceGroup", "serving", "llama-70b-chat")["spec"]["roles"]] == [8, 4]


def test_missing_metrics_change_nothing():
    store = MemoryStore()
    store.create(yaml.safe_load(GROUP.read_text()))
    report = autoscale(store, 0.0, lambda *a: None)
    assert report.changes == []
    assert [r["replicas"] for r in store.get("InferenceGroup", "serving", "llama-70b-chat")["spec"]["roles"]] == [2, 1]


needs_traces = pytest.mark.skipif(
    not (SHARED_TRACES / "azure_llm_2023_conv.csv").is_file(),
    reason=f"the Azure trace copy is not at {SHARED_TRACES} (a user fetches it with 'tandem trace fetch azure-conv-2023')",
)


@needs_traces
def test_the_bundled_azure_scenario_compares_the_policies_on_the_real_trace(tmp_path, run_cli):
    """One seed of two of its runs (the whole comparison, 14 runs x 5 seeds, takes minutes)."""
    out = tmp_path / "azure"
    runs = ("preferred-band", "preferred-band-raise")
    picks = [arg for name in runs for arg in ("--run", name)]
    result = run_cli("simulate", ROOT / "examples/scenarios/azure-conv.yaml", "--compare", "--seeds", "1", *picks, "--traces", SHARED_TRACES, "--out", out)
    assert result.exit_code == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == set(runs)
    serving = {name: figures["serving"]["serving/llama-70b-chat"] for name, figures in summary.items()}
    assert {s["requests"] for s in serving.values()} == {19_366}
    # What holds across the seeds (docs/autoscaling.md): raiseShort pays GPUs for keeping
    # every role at its own need; keepTotal holds the fewest.
    assert serving["preferred-band"]["mean_gpus"] < serving["preferred-band-raise"]["mean_gpus"]


@needs_traces
def test_the_rack_affinity_keeps_every_prefill_near_decode_and_locality_keeps_transfers_short(tmp_path, run_cli):
    out = tmp_path / "affinity"
    picks = ("--seeds", "1", "--run", "with-affinity", "--run", "without-affinity")
    result = run_cli("simulate", ROOT / "examples/scenarios/azure-conv-affinity.yaml", "--compare", *picks, "--traces", SHARED_TRACES, "--out", out)
    assert result.exit_code == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    near, far = (summary[n]["serving"]["serving/llama-70b-chat"] for n in ("with-affinity", "without-affinity"))
    assert near["requests"] == far["requests"] and near["mean_gpus"] == far["mean_gpus"]
    # judged by the rule the comparison dropped, the run without it placed fewer prefill replicas near decode
    satisfied = {n: summary[n]["groups"]["serving/llama-70b-chat"]["affinity_satisfied_fraction"] for n in ("with-affinity", "without-affinity")}
    assert satisfied["with-affinity"] == 1.0 > satisfied["without-affinity"]
    # Without the rule, locality alone keeps prefill on the decode replicas' hosts more
    # often (docs/autoscaling.md): a rack rule guarantees the rack, not the host, so the
    # KV transfers of that run are not longer. Either way distance costs only milliseconds.
    assert far["kv_transfer_s"]["p50"] <= near["kv_transfer_s"]["p50"] < 0.05
    assert abs(near["ttft_s"]["p50"] - far["ttft_s"]["p50"]) < 0.02


def test_the_autoscaler_and_the_reconcile_pass_each_patch_only_their_own_status_keys():
    """The autoscaler's memory is a merge patch of `status.autoscaling` alone: a reconcile
    status written between its read and its write survives, and is not copied back."""
    store = MemoryStore()
    store.create(yaml.safe_load(GROUP.read_text()))

    def racing_snapshot():
        reader = MemoryStore.snapshot(store)
        del store.snapshot  # once
        reconcile(store, 0.0)  # the controller writes its status meanwhile
        return reader

    store.snapshot = racing_snapshot  # type: ignore[method-assign]
    report = autoscale(store, 0.0, lambda ns, name, now: _signals(now, 12_000.0))
    assert report.changes == [] and report.conflicts == 1, "the spec was decided from an old version: not written"
    status = store.get("InferenceGroup", "serving", "llama-70b-chat")["status"]
    assert status["conditions"] and "autoscaling" not in status, "the reconcile pass wrote its keys, and only those"
    autoscale(store, 20.0, lambda ns, name, now: _signals(now, 12_000.0))
    memory = store.get("InferenceGroup", "serving", "llama-70b-chat")["status"]["autoscaling"]
    assert memory["desired"] == {"decode": 4, "prefill": 8} and memory["state"]["history"], "remembered"
    reconcile(store, 21.0)
    assert store.get("InferenceGroup", "serving", "llama-70b-chat")["status"]["autoscaling"] == memory



def test_serving_figures_are_sampled_evenly_without_an_autoscaler(tmp_path):
    """A group without `spec.autoscaling` gets no autoscaler decisions, yet its curves are
    sampled every 30 s: the demo's utilisation once rose as a straight line from 0 to 0.3
    because it was drawn between the few samples taken when the Ready set changed."""
    from tandem.sim.summary import utilisation_over_time

    group = yaml.safe_load(GROUP.read_text())
    del group["spec"]["autoscaling"]
    text = SCENARIO.replace("durationSeconds: 420", "durationSeconds: 900").split("  compare:")[0]
    scenario = _load(text, tmp_path, yaml.safe_dump(group))
    result = simulate(scenario)
    points = [(t, u) for t, u in utilisation_over_time(result.serving["serving/llama-70b-chat"]) if t >= 300.0]
    times = [t for t, _ in points]
    assert len(points) >= 15 and max(np.diff(times)) <= 30.0 + 1e-6
    values = np.array([u for _, u in points])
    assert values.min() > 0 and abs(values[len(values) // 2 :].mean() - values[: len(values) // 2].mean()) < 0.15
