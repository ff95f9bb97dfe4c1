"""The status explains itself (issue 25, item 3): conditions with reasons and messages in
the engine's words, unit states that tell Unschedulable and Pending from Progressing,
each unit's domain, events said once per group and reason, no idle noise, a bounded size;
and (item 5) a write the API refuses, or a Service name taken, makes the group Degraded."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from support.builders import group, role
from support.controller_world import FaultyWriter, design_group, kubelet, settle, world
from tandem.api.group_status import UNIT_STATES, InferenceGroupStatus, RoleStatus, UnitStatus, list_units
from tandem.controller.health import Health, verdict
from tandem.controller.memo import Memo
from tandem.controller.reconcile import reconcile
from tandem.errors import Forbidden


def _status(store, name="llama"):
    return store.get("InferenceGroup", "serving", name)["status"]


def _conditions(status):
    return {c["type"]: c for c in status["conditions"]}


def _events(store, type_=None):
    return [e for e in store.list("Event") if type_ is None or e["type"] == type_]


def _too_big(replicas=1):
    """A unit that needs 3 racks' worth of 8-GPU pods inside one rack: never fits."""
    return group("llama", [role("prefill", 20, 20, gpus=8, required="host")], required="rack", replicas=replicas)


def test_a_group_that_cannot_fit_says_why_in_its_conditions_units_and_state():
    store = world(_too_big())
    memo = Memo()
    for step in range(4):
        reconcile(store, float(step), memo=memo)
        kubelet(store)
    status = _status(store)
    scheduled = _conditions(status)["Scheduled"]
    # 160 GPUs in one rack of 64 could never fit: no pod is made, the reason says so (controller/fit.py)
    assert scheduled["status"] == "False" and scheduled["reason"] == "NeverFits"
    assert "in one rack; the largest rack offers 64" in scheduled["message"], scheduled["message"]
    assert status["state"] == "Unschedulable" and status["message"] == scheduled["message"]
    (unit,) = status["units"]
    assert unit["state"] == "Unschedulable" and unit["reason"] in scheduled["message"]
    assert status["unitStates"]["Unschedulable"] == 1 and status["ready"] == "prefill 0/20"
    # the engine does not run again on the same room; the status keeps its words and is not rewritten
    version = store.resource_version
    report = reconcile(store, 10.0, memo=memo)
    assert report.writes == 0 and store.resource_version == version


def test_no_condition_that_is_not_true_lacks_a_message_or_has_the_reason_none_in_a_real_run():
    store = world(design_group(), _too_big() | {"metadata": {"name": "big", "namespace": "serving"}})
    now = 0.0
    for step in range(12):
        reconcile(store, now)
        kubelet(store)
        now += 1.0
        for g in store.list("InferenceGroup"):
            for c in g["status"]["conditions"]:
                assert c["reason"] and c["reason"] != "None", c
                if c["status"] != "True":
                    assert c["message"], c
            assert g["status"]["state"]


_units = st.lists(
    st.builds(
        UnitStatus,
        index=st.integers(0, 3),
        state=st.sampled_from(UNIT_STATES),
        reason=st.sampled_from(["", "no rack has room for 3 pods of 8 GPUs", "step 2 of 3"]),
        functional=st.booleans(),
    ),
    max_size=5,
)
_roles = st.lists(
    st.builds(RoleStatus, name=st.sampled_from(["prefill", "decode"]), desired_replicas=st.integers(0, 4),
              scheduled_replicas=st.integers(0, 4), ready_replicas=st.integers(0, 4), updated_replicas=st.integers(0, 4)),
    max_size=2,
)


@settings(max_examples=300, deadline=None)
@given(units=_units, roles=_roles, available=st.booleans(), scheduled=st.booleans(), updating=st.sampled_from(["", "abc123"]),
       degraded=st.booleans(), below=st.lists(st.tuples(st.integers(0, 3), st.just("decode 0/1 Ready")), max_size=2),
       faults=st.lists(st.tuples(st.sampled_from(["WriteRejected", "ServiceNameTaken"]), st.just("create Service x: 403")), max_size=2))
def test_property_no_condition_that_is_not_true_has_an_empty_message_or_the_reason_none(units, roles, available, scheduled, updating, degraded, below, faults):
    said = verdict(Health(units, roles, available, scheduled, below, updating, degraded, tuple(faults)))
    for kind, value, reason, message in said.conditions:
        assert reason and reason != "None" and reason[0].isupper(), (kind, reason)
        if not value or kind in ("Scheduled", "Available"):
            assert message, (kind, value, reason)
    assert said.state in ("Ready", "Progressing", "Pending", "Unschedulable", "Stalled", "Degraded")
    assert bool(said.message) == (said.state != "Ready")


def test_units_state_pending_progressing_and_complete_and_name_their_domain_without_idle_noise():
    store = world(design_group())
    seen = set()
    now = 0.0
    for _ in range(30):
        report = reconcile(store, now)
        seen |= {u["state"] for u in _status(store)["units"]}
        if kubelet(store) == 0 and report.writes == 0:
            break
        now += 1.0
    assert {"Pending", "Complete"} <= seen and "Unschedulable" not in seen
    (unit,) = _status(store)["units"]
    assert unit == {"index": 0, "state": "Complete", "domain": "rack/rack-0", "functional": True}, "no empty goal/step/revision"
    status = _status(store)
    assert status["state"] == "Ready" and status["ready"] == "prefill 4/4, decode 2/2" and status["message"] == ""


def test_a_scale_beyond_the_cluster_writes_one_warning_event_per_reason_per_pass():
    store = world(design_group(replicas=1), shape="block=2,rack=2,host=12")  # 48 nodes
    settle(store, store)
    store.patch("InferenceGroup", "serving", "llama", {"spec": {"replicas": 300}})
    lines = []
    for step in range(6):
        report = reconcile(store, 100.0 + step)
        kubelet(store)
        lines += [line for line in report.events if "Unschedulable" in line]
        warnings = [line for line in report.warnings if ": Unschedulable: " in line]
        assert len(warnings) <= 1, "one Unschedulable event per group per pass"
    warning_events = _events(store, "Warning")
    assert 1 <= len(warning_events) <= 6, [e["message"][:80] for e in warning_events]
    assert len(lines) <= 6, "one log line per event, not one per unit"
    message = next(e["message"] for e in warning_events if e["reason"] == "Unschedulable")
    assert message.startswith("units ") and len(message) <= 1024, message
    status = _status(store)
    assert status["unitStates"]["Unschedulable"] > 250 and status["state"] == "Unschedulable"


def test_a_group_beyond_the_listed_units_that_does_not_fit_settles_whether_the_engine_runs_or_not():
    # the engine does not run again on the same room: the status it writes then (words read
    # back from the status, kept for the first 100 units only) must equal the one it wrote
    # when it did run (words for every unit), or each pass rewrites the status
    store = world(group("wide", [role("prefill", 1, 1, gpus=8, required="host")], replicas=1), shape="block=2,rack=2,host=12")
    memo = Memo()
    for step in range(3):
        reconcile(store, float(step), memo=memo)
        kubelet(store)
    store.patch("InferenceGroup", "serving", "wide", {"spec": {"replicas": 300}})
    for step in range(10):
        reconcile(store, 10.0 + step, memo=memo)
        kubelet(store)
    version = store.resource_version
    reports = [reconcile(store, 30.0 + step, memo=memo) for step in range(4)]
    assert [r.writes for r in reports] == [0, 0, 0, 0] and store.resource_version == version
    assert "152 more units unschedulable" in _status(store, "wide")["message"], "words for the first 100 units only"


def test_a_thousand_units_keep_the_status_bounded():
    store = world(group("llama", [role("prefill", 1, 1, gpus=8, required="host")], replicas=1000), shape="block=2,rack=2,host=12")
    memo = Memo()
    for step in range(4):
        reconcile(store, float(step), memo=memo)
        kubelet(store)
    status = _status(store)
    size = len(json.dumps(status))
    assert size < 256 * 1024, size  # etcd takes 1.5 MiB per object
    assert sum(status["unitStates"].values()) == 1000
    listed = status["units"]
    assert len(listed) < 1000 and all(u["state"] != "Complete" for u in listed[100:])
    assert sum(1 for u in listed if u.get("reason")) <= 100, "words for the first 100 listed units only"


def test_list_units_keeps_every_unit_up_to_the_limit_and_then_only_those_not_quiet():
    quiet = [UnitStatus(index=i, state="Complete", functional=True, domain="rack/r") for i in range(5)]
    loud = [UnitStatus(index=5 + i, state="Unschedulable", reason="no rack has room") for i in range(3)]
    assert list_units(quiet + loud, limit=10) == quiet + loud
    kept = list_units(quiet + loud, limit=2)
    assert [u.index for u in kept] == [5, 6, 7] and [u.reason for u in kept] == ["no rack has room", "no rack has room", ""]
    assert InferenceGroupStatus(units=kept).unit(0) is None, "an unlisted unit reads as quiet"
    assert [u.index for u in list_units(quiet + loud, limit=2, most=2)] == [5, 6], "never more than `most`"


class _RefusesServices(FaultyWriter):
    """Refuses every Service create with a 403, as a cluster whose RBAC lacks it."""

    refuse = True

    def create(self, obj):
        if self.refuse and obj["kind"] == "Service":
            raise Forbidden('services is forbidden: User "tandem" cannot create resource "services"')
        return super().create(obj)


def test_a_refused_write_makes_the_group_degraded_with_one_warning_event_and_one_log_line():
    store = world(design_group())
    writer = _RefusesServices(store)
    memo = Memo()
    first = reconcile(writer, 0.0, memo=memo)
    assert [line for line in first.warnings if "403 Forbidden" in line], first.warnings
    assert first.requeue_after is not None and first.requeue_after <= 0.1, "the next pass soon, to say so"
    later = [reconcile(writer, 1.0 + step, memo=memo) for step in range(3)]
    status = _status(store)
    degraded = _conditions(status)["Degraded"]
    assert degraded["status"] == "True" and degraded["reason"] == "WriteRejected"
    assert "create Service serving/llama" in degraded["message"] and "403" in degraded["message"]
    assert status["state"] == "Degraded" and status["message"] == degraded["message"]
    said = [line for r in (first, *later) for line in r.warnings if "403 Forbidden" in line]
    assert len(said) == 2 and "WriteRejected" in said[1], "the refusal once, when met; the event once, when the status says it"
    assert all(r.known for r in later) and not any(r.fresh_errors for r in later)
    assert len([e for e in _events(store, "Warning") if e["reason"] == "WriteRejected"]) == 1
    writer.refuse = False  # RBAC fixed
    settle(writer, store, start=10.0)
    assert _conditions(_status(store))["Degraded"]["status"] == "False"  # (settle keeps no memo: a fresh one forgets)


def test_a_service_named_like_the_group_that_is_not_its_own_is_reported_not_fought_over():
    store = world(design_group())
    store.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "llama", "namespace": "serving"},
                  "spec": {"selector": {"app": "something-else"}}})
    memo = Memo()
    reports = []
    for step in range(6):
        reports.append(reconcile(store, float(step), memo=memo))
        kubelet(store)
    assert not any(r.errors for r in reports), "no create of a name that is taken"
    degraded = _conditions(_status(store))["Degraded"]
    assert degraded["status"] == "True" and degraded["reason"] == "ServiceNameTaken"
    assert "Service serving/llama exists and is not this group's" in degraded["message"]
    assert [e["reason"] for e in _events(store, "Warning")] == ["ServiceNameTaken"]
    store.delete("Service", "serving", "llama")
    for step in range(6, 12):
        reconcile(store, float(step), memo=memo)
        kubelet(store)
    assert store.get("Service", "serving", "llama")["metadata"]["labels"]
    assert _conditions(_status(store))["Degraded"]["status"] == "False"


def test_normal_events_tell_scaling_and_an_update_from_start_to_finish():
    store = world(design_group())
    now = settle(store, store)
    assert {e["reason"] for e in _events(store, "Normal")} >= {"Placed"}
    store.patch("InferenceGroup", "serving", "llama", {"spec": {"replicas": 2}})
    now = settle(store, store, start=now)
    scaled = [e["message"] for e in _events(store) if e["reason"] == "ScaledTo"]
    assert scaled == ["2 units: prefill 8, decode 4 replicas (was 1 unit: prefill 4, decode 2)"]
    store.patch("InferenceGroup", "serving", "llama", {"spec": {"replicas": 1}})  # room for the update's surge
    now = settle(store, store, start=now)
    g = store.get("InferenceGroup", "serving", "llama")
    for r in g["spec"]["roles"]:
        r["template"]["spec"]["containers"][0]["image"] = "engine:v2"
    store.patch("InferenceGroup", "serving", "llama", {"spec": {"roles": g["spec"]["roles"]}})
    settle(store, store, start=now, passes=80)
    reasons = [e["reason"] for e in _events(store, "Normal")]
    assert "UpdateStarted" in reasons and "UpdateFinished" in reasons
