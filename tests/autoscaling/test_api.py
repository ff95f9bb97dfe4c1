"""`spec.autoscaling` as a user writes it: defaults, the documented example, and the
explicit inputs `scale` reads from a group."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from support.autoscaling import SPEC, world
from tandem.api.autoscaling import AutoscalingSpec, gpus_per_replica
from tandem.api.loading import load_texts
from tandem.api.resources import InferenceGroup
from tandem.autoscaling import AutoscalerState, scale, group_inputs
from tandem.errors import InputError

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "autoscaling.md"


def group(autoscaling: dict | None, *, units: int = 1, decode: dict | None = None) -> InferenceGroup:
    pod = {"spec": {"containers": [{"name": "engine", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}
    decode_role = {"name": "decode", "replicas": 4, "template": pod, **(decode or {})}
    raw = {
        "apiVersion": "tandem.dev/v1alpha1",
        "kind": "InferenceGroup",
        "metadata": {"name": "llm", "namespace": "serving"},
        "spec": {"replicas": units, "roles": [{"name": "prefill", "replicas": 2, "minReplicas": 2, "template": pod}, decode_role]},
    }
    if autoscaling is not None:
        raw["spec"]["autoscaling"] = autoscaling
    return load_texts([("group.yaml", yaml.safe_dump(raw))]).groups[0]


def test_defaults_follow_the_anchors() -> None:
    autoscaling = AutoscalingSpec.model_validate(
        {"policy": "FixedRatio", "roles": {"prefill": {"maxReplicas": 4}, "decode": {"maxReplicas": 8}},
         "fixedRatio": {"ratio": {"prefill": 1, "decode": 2}, "decodeTokensPerSecondPerReplica": 1500}}
    )
    assert autoscaling.managed_roles == ("prefill", "decode")
    assert (autoscaling.interval_seconds, autoscaling.metric_max_age_seconds) == (15, 60)
    assert (autoscaling.stabilization.scale_up_seconds, autoscaling.stabilization.scale_down_seconds) == (0, 300)  # HPA
    assert (autoscaling.panic.threshold_percent, autoscaling.panic.window_seconds) == (200, 60)  # Knative
    assert autoscaling.roles["prefill"].min_replicas is None
    assert autoscaling.policy_block() is autoscaling.fixed_ratio


def test_a_group_without_autoscaling_has_none() -> None:
    assert group(None).spec.autoscaling is None


def test_the_documented_example_is_valid_and_scales() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    example = next(block for block in blocks if "kind: InferenceGroup" in block)
    loaded = load_texts([("docs/autoscaling.md", example)]).groups[0]
    assert loaded.spec.autoscaling is not None and loaded.spec.autoscaling.policy == "FixedRatio"
    inputs = group_inputs(loaded)
    assert dict(inputs.bounds) == {"prefill": (1, 8), "decode": (1, 16)}
    decision = scale(loaded.spec.autoscaling, inputs.bounds, inputs.gpus_per_replica, inputs.current, inputs.units,
                      world(30.0, inputs.current, inputs.units, 0.0), AutoscalerState(), 0.0)
    assert decision.changed and decision.desired["decode"] == 8  # 12,000 tok/s / 1,500


def test_every_policy_of_the_suggested_shape_validates() -> None:
    for policy in ("FixedRatio", "PreferredBand", "SLO", "Independent"):
        loaded = group({**SPEC, "policy": policy, "roles": {"prefill": {"maxReplicas": 8}, "decode": {"maxReplicas": 16}}})
        assert loaded.spec.autoscaling.policy == policy


def test_group_inputs_default_the_minimum_to_the_roles_own() -> None:
    inputs = group_inputs(group({**SPEC, "roles": {"prefill": {"maxReplicas": 8}, "decode": {"maxReplicas": 16}}}, units=3))
    # prefill's own minReplicas is 2; decode has none, so one complete replica
    assert dict(inputs.bounds) == {"prefill": (2, 8), "decode": (1, 16)}
    assert dict(inputs.current) == {"prefill": 2, "decode": 4}
    assert dict(inputs.gpus_per_replica) == {"prefill": 8, "decode": 8}
    assert inputs.units == 3


def test_gpus_per_replica_counts_the_leader_and_every_worker() -> None:
    worker = {"spec": {"containers": [{"name": "w", "resources": {"limits": {"nvidia.com/gpu": 4}}}, {"name": "side", "resources": {"requests": {"nvidia.com/gpu": "500m"}}}]}}
    loaded = group(None, decode={"podsPerReplica": 3, "workerTemplate": worker})
    # leader 8; each worker 4 (a limit counts as the request) + 0.5 rounded up = 5
    assert gpus_per_replica(loaded.role("decode")) == 8 + 2 * 5
    assert gpus_per_replica(loaded.role("prefill")) == 8


def test_the_budget_rule_counts_units_and_workers() -> None:
    slo = {**SPEC["slo"], "gpuBudget": 47}
    autoscaling = {**SPEC, "policy": "SLO", "slo": slo, "roles": {"prefill": {"maxReplicas": 8}, "decode": {"maxReplicas": 16}}}
    # minimums: prefill 2 x 8 + decode 1 x 8 = 24 GPUs per unit; 2 units need 48
    with pytest.raises(InputError, match=r"spec.autoscaling.slo.gpuBudget: must hold the minimums: 2 unit\(s\) x 24 GPUs = 48, more than 47"):
        group(autoscaling, units=2)
    group({**autoscaling, "slo": {**slo, "gpuBudget": 48}}, units=2)


def test_group_inputs_need_autoscaling() -> None:
    with pytest.raises(ValueError, match="has no spec.autoscaling"):
        group_inputs(group(None))
