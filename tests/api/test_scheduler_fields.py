"""`spec.scheduler.queue` and `spec.scheduler.qosClass`: names as Kubernetes names the queue
objects, Koordinator's QoS classes, and qosClass only with backend koordinator."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from support.builders import group, role
from tandem.api.resources import InferenceGroup
from tandem.api.validation import check_group


def _group(**scheduler: str) -> dict:
    g = group("llama", [role("prefill", 1, 1)])
    g["spec"]["scheduler"] = scheduler
    return g


@pytest.mark.parametrize("queue", ["default", "team-a", "team-a.inference", "q" * 63])
def test_a_queue_named_as_kubernetes_names_objects_is_accepted(queue: str) -> None:
    assert InferenceGroup.model_validate(_group(backend="volcano", queue=queue)).spec.scheduler.queue == queue


@pytest.mark.parametrize("queue", ["Team", "team_a", "-a", "a.", "", "q" * 64])
def test_a_queue_that_is_no_object_name_or_label_value_is_refused(queue: str) -> None:
    with pytest.raises(ValidationError) as exc:
        InferenceGroup.model_validate(_group(backend="kai", queue=queue))
    errors = exc.value.errors()
    assert [e["loc"] for e in errors] == [("spec", "scheduler", "queue")]
    assert "DNS-1123 subdomain" in errors[0]["msg"] or "at most 63 characters" in errors[0]["msg"]


@pytest.mark.parametrize("qos", ["LSE", "LSR", "LS", "BE", "SYSTEM"])
def test_koordinators_qos_classes_are_accepted_for_koordinator(qos: str) -> None:
    g = InferenceGroup.model_validate(_group(backend="koordinator", qosClass=qos))
    assert g.spec.scheduler.qos_class == qos and check_group(g, None) == []


def test_an_unknown_qos_class_is_refused() -> None:
    with pytest.raises(ValidationError) as exc:
        InferenceGroup.model_validate(_group(backend="koordinator", qosClass="Guaranteed"))
    errors = exc.value.errors()
    assert [e["loc"] for e in errors] == [("spec", "scheduler", "qosClass")]
    assert all(f"'{qos}'" in errors[0]["msg"] for qos in ("LSE", "LSR", "LS", "BE", "SYSTEM"))


@pytest.mark.parametrize("backend", ["native", "volcano", "kai", "kueue", "workload-api"])
def test_a_qos_class_for_another_backend_is_a_problem_at_its_path(backend: str) -> None:
    problems = check_group(InferenceGroup.model_validate(_group(backend=backend, qosClass="LS")), None)
    assert [p.path for p in problems] == ["spec.scheduler.qosClass"]
    assert backend in problems[0].message
