"""Serving realism in the simulated cluster: the scenario fields, cold start from the model's
size, drains on scale-down, and Mooncake prefix hashes from trace to summary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from tandem.errors import InputError
from tandem.sim.runner import simulate
from tandem.sim.scenario import ColdStartSpec, cold_start_seconds, load_scenario
from tandem.sim.serving import model_profile
from tandem.sim.summary import summarize
from tandem.sim.traces import parse_trace, replay

ROOT = Path(__file__).resolve().parents[2]
GROUP = ROOT / "examples" / "llama-70b-autoscaled.yaml"

SCENARIO = """
apiVersion: tandem.dev/v1alpha1
kind: Scenario
metadata: {name: realism}
spec:
  seed: 3
  durationSeconds: 900
  cluster: {shape: "block=1,rack=2,host=2", gpus: 8}
  startup:
    "*": {imagePullSeconds: 5, modelLoadMedianSeconds: 30, modelLoadSigma: 0}
  groups:
    - {at: 0, file: group.yaml}
  changes:
    - {at: 500, group: serving/llama-70b-chat, patch: {spec: {roles: ROLES}}}
  serving:
    - group: serving/llama-70b-chat
      model: llama-3.1-70b
      gpu: h100-sxm
      slo: {ttftSeconds: 1.0, itlSeconds: 0.05}
      SOURCE
      startAt: 200
EXTRA
"""


def _load(tmp_path: Path, source: str = "synthetic: {rate: 6}", extra: str = ""):
    group = yaml.safe_load(GROUP.read_text())
    group["spec"].pop("autoscaling", None)  # sized by hand: 2 prefill, then 1 at t = 500 s
    (tmp_path / "group.yaml").write_text(yaml.safe_dump(group))
    roles = [dict(role, replicas=1) if role["name"] == "prefill" else role for role in group["spec"]["roles"]]
    text = SCENARIO.replace("SOURCE", source).replace("EXTRA", extra).replace("ROLES", json.dumps(roles))
    return load_scenario("scenario.yaml", text, lambda rel: (rel, (tmp_path / rel).read_text()))


@pytest.mark.parametrize(
    "extra, path",
    [
        ("      kvCache: {preemption: evict}", "spec.serving.0.kvCache.preemption"),
        ("      kvCache: {blockTokens: 0}", "spec.serving.0.kvCache.blockTokens"),
        ("      coldStart: {loadGbPerSecond: 0}", "spec.serving.0.coldStart.loadGbPerSecond"),
        ("      drain: {gracePeriodSeconds: -1}", "spec.serving.0.drain.gracePeriodSeconds"),
        ("      maxNumBatchedTokens: 4", "spec.serving.0.maxNumBatchedTokens"),
        ("      chunkedPrefill: sometimes", "spec.serving.0.chunkedPrefill"),
        ("      drain: {graceSeconds: 3}", "spec.serving.0.drain.graceSeconds"),
    ],
)
def test_bad_serving_fields_are_one_line_errors_naming_the_field(tmp_path, extra, path):
    with pytest.raises(InputError) as raised:
        _load(tmp_path, source="synthetic: {rate: 6}\n" + extra)
    message = str(raised.value)
    assert path in message and "\n" not in message.strip()


def test_cold_start_grows_with_the_weights_a_node_loads_and_can_be_stated():
    l70, l8 = model_profile("llama-3.1-70b"), model_profile("llama-3.1-8b")
    spec = ColdStartSpec()
    # 141 GB over 2 GB/s + 30 s: minutes for 70B (any TP within one node), well under one for 8B
    assert cold_start_seconds(l70, 1, spec) == pytest.approx(70_553_706_496 * 2 / 2e9 + 30)
    assert 90 < cold_start_seconds(l70, 1, spec) < 600
    assert cold_start_seconds(l8, 1, spec) < 45
    assert cold_start_seconds(l70, 2, spec) < cold_start_seconds(l70, 1, spec)  # two nodes load in parallel
    assert cold_start_seconds(l70, 1, ColdStartSpec(model_load_seconds=12)) == 12


def test_serving_pods_become_ready_only_after_the_model_is_loaded(tmp_path):
    scenario = _load(tmp_path)
    result = simulate(scenario)
    load = scenario.serving[0]
    cold = cold_start_seconds(load.model, 1, ColdStartSpec())
    bound = {line.split()[1]: t for t, line in result.log if line.startswith("bound llama-70b-chat-")}
    ready = {line.split()[0]: t for t, line in result.log if line.endswith(" Ready") and line.startswith("llama-70b-chat-")}
    assert bound and set(ready) <= set(bound)
    for pod, at in ready.items():
        assert at - bound[pod] == pytest.approx(5 + cold, abs=1e-6), pod  # pull + load (sigma 0), not the 30 s of "*"


def test_a_scale_down_drains_instead_of_restarting_and_the_summary_counts_it(tmp_path):
    scenario = _load(tmp_path)
    result = simulate(scenario)
    served = result.serving["serving/llama-70b-chat"]
    figures = summarize(scenario, result)["serving"]["serving/llama-70b-chat"]
    assert figures["drained_replicas"] >= 1
    assert figures["drained_replicas"] == int((~np.isnan(served.replica_drain_s)).sum())
    assert served.restarts.sum() == 0 and figures["drain_requeued"] == 0
    drained = ~np.isnan(served.replica_drain_s)
    assert np.all(served.replica_left_s[drained] >= served.replica_drain_s[drained])
    # the same scale-down without drains restarts what the removed replicas held
    forced = _load(tmp_path, extra="      drain: {enabled: false}")
    forced_result = simulate(forced)
    assert np.isnan(forced_result.serving["serving/llama-70b-chat"].replica_drain_s).all()


MOONCAKE = "\n".join(
    json.dumps({"timestamp": 1000 * i, "input_length": 1500, "output_length": 20, "hash_ids": [0, 1, 2 + i % 3]})
    for i in range(300)
)


def test_mooncake_hash_ids_survive_replay_and_give_a_hit_rate_in_the_summary(tmp_path):
    trace = parse_trace(MOONCAKE, "m.jsonl")
    assert trace.prefix_hashes[4] == (0, 1, 3)
    window = replay(trace, rate=2.0, start_s=10.0, end_s=20.0)
    assert window.prefix_hashes == trace.prefix_hashes[10:20]
    (tmp_path / "m.jsonl").write_text(MOONCAKE)
    scenario = _load(tmp_path, source="trace: {file: m.jsonl}")
    assert scenario.serving[0].trace.prefix_hashes == trace.prefix_hashes
    first = summarize(scenario, simulate(scenario))
    again = summarize(scenario, simulate(scenario))
    assert json.dumps(first, sort_keys=True) == json.dumps(again, sort_keys=True)
    rate = first["serving"]["serving/llama-70b-chat"]["prefix_cache_hit_rate"]
    # two shared 512-token blocks of 1,500 always hit once warm; the third of three often does
    assert 1024 / 1500 * 0.9 < rate <= 1499 / 1500
    off = _load(tmp_path, source="trace: {file: m.jsonl}\n      prefixCaching: false")
    assert summarize(off, simulate(off))["serving"]["serving/llama-70b-chat"]["prefix_cache_hit_rate"] == 0.0


def test_mooncake_hash_ids_must_be_integers():
    with pytest.raises(InputError, match=r"line 1: hash_ids: .* is not a list of integers"):
        parse_trace('{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": [1, "x"]}\n', "m.jsonl")
