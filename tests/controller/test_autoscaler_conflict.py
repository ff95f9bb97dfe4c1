"""A group with `spec.autoscaling` that an HPA or KEDA ScaledObject also scales (made before
the operator, or the webhook bypassed): the autoscaler pass leaves its counts alone, reads
no signals for it, says why (ScalingActive=False ConflictingAutoscaler, naming the other,
a Warning event once) and goes on with the other groups; once the other goes, it scales."""

from __future__ import annotations

from pathlib import Path

import yaml

from tandem.autoscaling.signals import RoleSignals, Signals
from tandem.cluster.memory import MemoryStore
from tandem.controller.autoscaler import CONFLICTING_AUTOSCALER, autoscale

GROUP = Path(__file__).resolve().parents[2] / "examples" / "llama-70b-autoscaled.yaml"


def _signals(now: float) -> Signals:
    role = RoleSignals(replicas=1, queue_depth=0.0, busy_fraction=0.5, kv_utilization=0.5, tokens_per_s=12_000.0)
    return Signals(now, 60.0, {"prefill": role, "decode": role}, 5.0, 5000.0, 12_000.0, 0.2, 0.02)


def _store() -> MemoryStore:
    store = MemoryStore()
    store.register_kind("HorizontalPodAutoscaler", cluster_scoped=False, status=True)
    store.register_kind("ScaledObject", cluster_scoped=False, status=True)
    for name in ("a", "b"):
        group = yaml.safe_load(GROUP.read_text())
        group["metadata"]["name"] = name
        store.create(group)
    store.create({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "queue", "namespace": "serving"},
                  "spec": {"scaleTargetRef": {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "name": "a"}}})
    store.create({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "keda-hpa-queue", "namespace": "serving"},
                  "spec": {"scaleTargetRef": {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "name": "a"}}})
    return store


def _condition(store: MemoryStore, name: str) -> dict:
    conditions = store.get("InferenceGroup", "serving", name)["status"]["conditions"]
    [condition] = [c for c in conditions if c["type"] == "ScalingActive"]
    return condition


def test_a_group_another_autoscaler_scales_is_left_alone_said_once_and_the_others_scale():
    store = _store()
    asked: list[str] = []

    def metrics(namespace: str, name: str, now: float) -> Signals:
        asked.append(name)
        return _signals(now)

    before = store.get("InferenceGroup", "serving", "a")["spec"]
    report = autoscale(store, 0.0, metrics)
    assert asked == ["b"], "no signals read for a group tandem does not scale"
    assert [key for key, _ in report.changes] == ["serving/b"]
    assert store.get("InferenceGroup", "serving", "a")["spec"] == before, "its roles untouched"
    condition = _condition(store, "a")
    assert (condition["status"], condition["reason"]) == ("False", CONFLICTING_AUTOSCALER)
    assert condition["message"].startswith('the group\'s units are scaled by HorizontalPodAutoscaler "keda-hpa-queue", ScaledObject "queue"')
    warnings = [e for e in store.list("Event", "serving") if e["reason"] == CONFLICTING_AUTOSCALER]
    assert len(warnings) == 1 and warnings[0]["type"] == "Warning" and warnings[0]["involvedObject"]["name"] == "a"
    assert [d.outcome for d in report.decided if d.name == "a"] == [CONFLICTING_AUTOSCALER]

    autoscale(store, 15.0, metrics)
    assert len([e for e in store.list("Event", "serving") if e["reason"] == CONFLICTING_AUTOSCALER]) == 1, "said when it turns, not every pass"

    store.delete("HorizontalPodAutoscaler", "serving", "keda-hpa-queue")
    store.delete("ScaledObject", "serving", "queue")
    report = autoscale(store, 30.0, metrics)
    assert "serving/a" in [key for key, _ in report.changes], "the other autoscaler gone: tandem scales the group again"
    assert _condition(store, "a")["reason"] != CONFLICTING_AUTOSCALER
