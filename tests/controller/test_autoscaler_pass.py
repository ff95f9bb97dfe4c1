"""The autoscaler's pass in the pass shape: observe reads, decide is pure, apply writes."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from tandem.autoscaling.signals import RoleSignals, Signals
from tandem.cluster.memory import MemoryStore
from tandem.controller.autoscaler import GroupScaling, Skipped, apply_scaling, autoscale, decide_scaling, observe_autoscaling

GROUP = Path(__file__).resolve().parents[2] / "examples" / "llama-70b-autoscaled.yaml"


def _signals(now: float, decode_tokens: float) -> Signals:
    role = RoleSignals(replicas=1, queue_depth=0.0, busy_fraction=0.5, kv_utilization=0.5, tokens_per_s=decode_tokens)
    return Signals(now, 60.0, {"prefill": role, "decode": role}, 5.0, 5000.0, decode_tokens, 0.2, 0.02)


def _store(*names: str) -> MemoryStore:
    store = MemoryStore()
    for name in names:
        group = yaml.safe_load(GROUP.read_text())
        group["metadata"]["name"] = name
        store.create(group)
    return store


def test_decide_is_a_pure_function_of_what_observe_read_and_the_time():
    store = _store("a", "b")
    observed = observe_autoscaling(store.snapshot(), 0.0, lambda ns, name, now: _signals(now, 12_000.0))
    frozen = copy.deepcopy(observed)
    first, second = decide_scaling(observed, 0.0), decide_scaling(observed, 0.0)
    assert first == second and observed == frozen, "same observation and time, same decisions; the observation untouched"
    assert all(isinstance(g, GroupScaling) and g.roles_patch is not None for g in first.groups)
    assert [r["replicas"] for r in store.get("InferenceGroup", "serving", "a")["spec"]["roles"]] == [2, 1], "deciding wrote nothing"
    report = apply_scaling(store, first, 0.0)
    assert report.changes == [("serving/a", {"decode": 4, "prefill": 8}), ("serving/b", {"decode": 4, "prefill": 8})]
    assert report.requeue_after == 15.0


def test_observe_reads_signals_only_for_groups_due_a_decision():
    store = _store("a")
    autoscale(store, 0.0, lambda ns, name, now: _signals(now, 12_000.0))
    asked: list[str] = []
    observed = observe_autoscaling(store.snapshot(), 5.0, lambda ns, name, now: asked.append(name))  # type: ignore[func-returns-value]
    assert asked == [] and observed.groups == (Skipped("serving/a", due_at=15.0),)
    assert apply_scaling(store, decide_scaling(observed, 5.0), 5.0).requeue_after == 10.0


def test_an_invalid_group_is_named_and_skipped_while_the_others_scale():
    store = _store("a", "b")
    roles = copy.deepcopy(store.get("InferenceGroup", "serving", "a")["spec"]["roles"])
    roles[0] = {**roles[0], "replicas": 1, "minReplicas": 3}  # a cross-field rule the model alone does not check
    store.patch("InferenceGroup", "serving", "a", {"spec": {"roles": roles}})
    report = autoscale(store, 0.0, lambda ns, name, now: _signals(now, 12_000.0))
    assert [key for key, _ in report.changes] == ["serving/b"]
    assert len(report.events) == 2 and report.events[0].startswith("serving/a: autoscaler: invalid, skipped:")


def _active(store: MemoryStore, name: str = "a") -> dict | None:
    conditions = store.get("InferenceGroup", "serving", name).get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == "ScalingActive"), None)


def test_a_figure_the_policy_needs_missing_holds_the_counts_and_names_it():
    store = _store("a")
    report = autoscale(store, 0.0, lambda ns, name, now: _signals(now, float("nan")))
    assert report.changes == [] and [d.outcome for d in report.decided] == ["MissingSignal"]
    condition = _active(store)
    assert condition is not None and condition["status"] == "False" and condition["reason"] == "MissingSignal"
    assert "decode" in condition["message"] and "NaN" in condition["message"] and "->" not in condition["message"]


def test_the_condition_is_written_once_and_a_concurrent_status_write_is_not_overwritten():
    store = _store("a")
    observed = observe_autoscaling(store.snapshot(), 0.0, None)
    decisions = decide_scaling(observed, 0.0)
    # the reconcile pass writes its conditions between the autoscaler's read and its write
    store.patch_status("InferenceGroup", "serving", "a", {"status": {"conditions": [
        {"type": "Accepted", "status": "True", "reason": "Valid", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    apply_scaling(store, decisions, 0.0)
    status = store.get("InferenceGroup", "serving", "a")["status"]
    assert [c["type"] for c in status["conditions"]] == ["Accepted"], "the stale list is not written over the newer one"
    assert status["autoscaling"]["lastDecisionAt"], "the memory is written all the same"
    autoscale(store, 15.0, None)  # the next decision writes the condition beside the newer list
    assert [c["type"] for c in store.get("InferenceGroup", "serving", "a")["status"]["conditions"]] == ["Accepted", "ScalingActive"]
    version = store.get("InferenceGroup", "serving", "a")["metadata"]["resourceVersion"]
    autoscale(store, 30.0, None)
    assert _active(store)["lastTransitionTime"] == "1970-01-01T00:00:15Z"
    warnings = [e for e in store.list("Event") if e["reason"] == "NoMetricsSource"]
    assert len(warnings) == 1 and warnings[0].get("count", 1) == 1, "one Warning when it turned, none while it stays"
    assert store.get("InferenceGroup", "serving", "a")["metadata"]["resourceVersion"] != version, "the memory still moves"
