"""What a pass changed, in words: a line per decision (a replica's pods created and placed
are one line), read from the writes that succeeded."""

from __future__ import annotations

from tandem.api.timestamps import rfc3339
from tandem.controller.actions import CreateObject, DeleteObject, GroupActions, PatchObject, PatchStatus
from tandem.controller.changes import describe

GROUP = GroupActions("serving", "llama")
NOW = 1_764_000_000.0


def pod(unit: int, role: str, replica: int, index: int, node: str | None = None) -> dict:
    spec: dict = {"containers": []}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    labels = {"tandem.dev/unit": str(unit), "tandem.dev/role": role, "tandem.dev/replica": str(replica)}
    return {"kind": "Pod", "metadata": {"name": f"llama-{unit}-{role}-{replica}-{index}", "namespace": "serving", "labels": labels}, "spec": spec}


def lines(*writes, now=NOW) -> list[str]:
    return [c.line for c in describe(GROUP, writes, now)]


def test_a_replicas_pods_created_and_placed_are_one_line_naming_its_nodes_leader_first():
    writes = [CreateObject(pod(0, "decode", 1, 1, "n-4"), "unit 0: decode replica 1, placed on n-4"),
              CreateObject(pod(0, "decode", 1, 0, "n-3"), "unit 0: decode replica 1, placed on n-3"),
              CreateObject(pod(0, "prefill", 0, 0), "unit 0: prefill replica 0")]
    assert lines(*writes) == ["group serving/llama unit 0: decode replica 1 created, placed on n-3, n-4",
                              "group serving/llama unit 0: prefill replica 0 created"]
    change = describe(GROUP, writes[:2])[0]
    assert change.fields() == {"group": "serving/llama", "unit": 0, "change": "decode replica 1 created, placed on n-3, n-4", "nodes": ["n-3", "n-4"]}


def test_admissions_placements_deletions_and_completions_say_so():
    admit = {"metadata": {"annotations": {"tandem.dev/admitted": "true"}}}
    place = {"spec": {"nodeSelector": {"kubernetes.io/hostname": "n-7"}}}
    writes = [
        PatchObject("Pod", "serving", "llama-1-prefill-2-0", {**admit, **place}, "5", "admitted and placed on n-7"),
        PatchObject("Pod", "serving", "llama-1-decode-0-0", place, "6", "placed on n-7"),
        DeleteObject("Pod", "serving", "llama-0-decode-0-1", why="coordination: failed"),
        DeleteObject("Pod", "serving", "llama-0-decode-0-0", why="coordination: failed"),
        CreateObject(pod(2, "my-role", 0, 1, "n-9"), "unit 2: my-role replica 0 completed, placed on n-9"),
    ]
    assert lines(*writes) == [
        "group serving/llama unit 1: prefill replica 2 admitted, placed on n-7",
        "group serving/llama unit 1: decode replica 0 placed on n-7",
        "group serving/llama unit 0: decode replica 0 deleted (2 pods: coordination: failed)",
        "group serving/llama unit 2: my-role replica 0: 1 missing pod created, placed on n-9",
    ]


def test_companions_are_named_for_what_they_are():
    writes = [CreateObject({"kind": "Service", "metadata": {"name": "llama", "namespace": "serving"}}, "the group's headless Service"),
              CreateObject({"kind": "ConfigMap", "metadata": {"name": "llama-0-peers", "namespace": "serving"}}, "unit 0: peers file"),
              PatchObject("ConfigMap", "serving", "llama-1-peers", {"data": {}}, "3", "unit 1: peers changed"),
              DeleteObject("ConfigMap", "serving", "llama-2-peers", why="unit 2 is beyond spec.replicas")]
    assert lines(*writes) == ["group serving/llama: headless Service created", "group serving/llama unit 0: peers file created",
                              "group serving/llama unit 1: peers updated",
                              "group serving/llama unit 2: peers file deleted (unit 2 is beyond spec.replicas)"]


def test_a_status_write_is_news_when_a_condition_turned_and_bookkeeping_otherwise():
    turned = {"type": "Available", "status": "True", "reason": "MinimumsReady", "lastTransitionTime": rfc3339(NOW)}
    held = {"type": "Accepted", "status": "True", "reason": "Valid", "lastTransitionTime": rfc3339(NOW - 60)}
    news = PatchStatus("InferenceGroup", "serving", "llama", {"status": {"replicas": 1, "functionalUnits": 1, "conditions": [held, turned]}})
    [change] = describe(GROUP, [news], NOW)
    assert change.line == "group serving/llama: status: Available True (MinimumsReady); 1 unit, 1 functional" and not change.quiet
    stalled = {"type": "Stalled", "status": "True", "reason": "StepTimedOut", "message": "unit 0: step 2 not Scheduled in 600s",
               "lastTransitionTime": rfc3339(NOW)}
    [why] = describe(GROUP, [PatchStatus("InferenceGroup", "serving", "llama", {"status": {"conditions": [stalled]}})], NOW)
    assert why.line == "group serving/llama: status: Stalled True (StepTimedOut: unit 0: step 2 not Scheduled in 600s)"
    [books] = describe(GROUP, [news], NOW + 5)
    assert books.quiet and books.line == "group serving/llama: status: 1 unit, 1 functional"


def test_nothing_done_nothing_said():
    assert describe(GROUP, []) == []
