"""The ClusterTopology's status: what the levels hold, the conditions, and the merge patch."""

from __future__ import annotations

from tandem.api.topology_status import ClusterTopologyStatus
from tandem.api.timestamps import rfc3339
from tandem.topology_controller.node_paths import NodePaths
from tandem.topology_controller.status import Finding, status_patch, topology_status, unlabeled_finding

LEVELS = [("block", "b"), ("rack", "r")]
RAW = {"metadata": {"name": "default", "generation": 3}}


def _paths():
    return NodePaths.of(("b", "r"), [(f"n{i}", {"b": "x", "r": str(i % 2)}) for i in range(6)] + [(f"u{i}", {"b": "x"}) for i in range(7)])


def test_status_validates_and_counts_levels():
    counts = _paths().counts(5)
    status = topology_status(RAW, LEVELS, counts, 13, ["a/g1", "b/g2"], ["volcano"], [unlabeled_finding(counts, LEVELS)], 100.0)
    typed = ClusterTopologyStatus.model_validate(status)
    assert typed.observed_generation == 3
    assert (typed.nodes, typed.placeable_nodes, typed.unlabeled_nodes) == (13, 6, 7)
    assert typed.level_names == "block/rack" and typed.domain_counts == "1/2"
    assert [(lv.name, lv.domains, lv.nodes, lv.unlabeled_nodes) for lv in typed.levels] == [("block", 1, 13, 0), ("rack", 2, 6, 7)]
    assert typed.levels[1].unlabeled_examples == ["u0", "u1", "u2", "u3", "u4"]
    assert typed.used_by == ["a/g1", "b/g2"] and typed.used_by_count == 2
    ready, degraded = typed.conditions
    assert (ready.type, ready.status, ready.observed_generation) == ("Ready", "True", 3)
    assert (degraded.status, degraded.reason) == ("True", "UnlabeledNodes")
    assert "7 of 13 nodes" in degraded.message and "u0, u1, u2, u3, u4, ..." in degraded.message


def test_transition_time_kept_while_the_status_value_holds():
    counts = _paths().counts(5)
    first = topology_status(RAW, LEVELS, counts, 13, [], [], [], 100.0)
    later = topology_status({**RAW, "status": first}, LEVELS, counts, 13, [], [], [Finding("BackendRefused", "kai: no")], 200.0)
    ready = {c["type"]: c for c in later["conditions"]}
    assert ready["Ready"]["lastTransitionTime"] == rfc3339(100.0)  # still True
    assert ready["Degraded"]["lastTransitionTime"] == rfc3339(200.0)  # False -> True
    again = topology_status({**RAW, "status": later}, LEVELS, counts, 13, [], [], [Finding("BackendRefused", "kai: other words")], 300.0)
    assert {c["type"]: c for c in again["conditions"]}["Degraded"]["lastTransitionTime"] == rfc3339(200.0)


def test_deletion_blocked_turns_ready_false_and_reasons_are_ordered():
    counts = _paths().counts(5)
    findings = [Finding("UnlabeledNodes", "u"), Finding("DeletionBlocked", "deletion waits while 1 InferenceGroup(s) name it: ns/g")]
    status = topology_status(RAW, LEVELS, counts, 13, ["ns/g"], [], findings, 1.0)
    ready, degraded = status["conditions"]
    assert (ready["status"], ready["reason"]) == ("False", "DeletionBlocked") and "ns/g" in ready["message"]
    assert degraded["reason"] == "DeletionBlocked" and degraded["message"].endswith("; u")


def test_invalid_topology_has_no_levels():
    status = topology_status(RAW, None, None, 4, [], [], [Finding("InvalidSpec", "spec.levels[1].name: duplicate")], 1.0)
    ClusterTopologyStatus.model_validate(status)
    assert "levels" not in status and status["conditions"][0]["reason"] == "InvalidSpec"


def test_status_patch_nulls_what_is_gone_and_is_none_when_equal():
    assert status_patch({"a": 1, "b": [1]}, {"a": 1, "b": [1]}) is None
    assert status_patch({"a": 1, "b": [1], "c": "x"}, {"a": 2, "b": [1]}) == {"status": {"a": 2, "c": None}}
    assert status_patch(None, {"a": 1}) == {"status": {"a": 1}}
