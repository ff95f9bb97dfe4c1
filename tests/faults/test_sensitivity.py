"""The campaign notices a broken controller: each test breaks one guarantee on purpose
(monkeypatched for the test only) and runs a schedule that exercises it. A campaign
that reported 0 violations here would be checking nothing."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import tandem.controller.decide as decide
import tandem.cluster.replicas as replicas
import tandem.controller.recovery as recovery
import tandem.coordination.planner as planner
from support.faults.campaign import run
from support.faults.schedule import Schedule, generate
from tandem.coordination.model import Delete

FOUND = Path(__file__).parent / "found"


def native(seed: int) -> Schedule:
    """The seed's schedule with every group tandem's to place (as before delegated groups)
    and none autoscaled (as before issue 29's metric faults): the seeds below were chosen on those."""
    return generate(seed, backends=(), metrics=False)


def invariants(schedule: Schedule) -> set[str]:
    return {v.invariant for v in run(schedule).violations}


def test_a_controller_that_never_releases_a_partial_unit_breaks_partial_placement(monkeypatch):
    monkeypatch.setattr(decide, "_release", lambda draft, now, expected: None)
    assert "partial-placement" in invariants(native(70))


def test_a_controller_that_replaces_a_replica_cut_short_creates_pods_twice(monkeypatch):
    monkeypatch.setattr(replicas, "unfinished", lambda members, size, created_whole=None: False)
    assert "created-twice" in invariants(native(47))


def test_a_controller_that_gives_a_lost_leader_back_alone_anywhere_breaks_replica_pack(monkeypatch):
    """Today's code before issue 25: a replica that lost its leader read as a creation cut
    short, its new leader placed as a fresh replica would be."""
    unfinished = replicas.unfinished
    monkeypatch.setattr(replicas, "unfinished", lambda members, size, created_whole=None: unfinished(members, size, None))
    monkeypatch.setattr(recovery.Recovery, "repair", lambda self, group, found, pods_of: (found, {}))
    assert "replica-pack" in invariants(native(4))


def test_an_update_that_drains_before_it_surges_breaks_the_rollout_floor(monkeypatch):
    update = planner.next_update_step

    def draining(spec, observed, now):
        decision = update(spec, observed, now)
        old = [r for r in observed.replicas if r.revision != spec.revision and r.phase != "Failed"]
        return dataclasses.replace(decision, delete=(*decision.delete, *(Delete(r.role, r.index, "drained early") for r in old[:1])))

    monkeypatch.setattr(planner, "next_update_step", draining)
    assert "rollout-floor" in invariants(native(15))


def test_a_status_written_once_and_never_again_breaks_status(monkeypatch):
    status = decide._status

    def once(draft, now, expected):
        if not draft.group.raw.get("status"):
            status(draft, now, expected)

    monkeypatch.setattr(decide, "_status", once)
    assert "status" in invariants(native(0))


def test_a_unit_released_and_never_retried_breaks_liveness(monkeypatch):
    monkeypatch.setattr(decide, "backoff_seconds", lambda attempt: 10.0**7)
    assert "liveness" in invariants(native(87))


def test_placing_on_the_node_a_deleted_pod_still_holds_breaks_capacity(monkeypatch):
    place = decide._place

    def freed(state, drafts, now, expected, placer, *rest):
        for key in [key for key in state.pods if key not in expected]:  # deleted by this pass: let go at once
            state.memo.placement.pod(key, ("freed",), None)
        return place(state, drafts, now, expected, placer, *rest)

    monkeypatch.setattr(decide, "_place", freed)
    assert "capacity" in invariants(Schedule.load(FOUND / "deleted-pod-frees-its-node.json"))


def test_new_replicas_that_lean_on_leaving_ones_break_required_affinity(monkeypatch):
    """Issue 25: an update's new prefill counted on an old decode the update then drained."""
    import tandem.placement.gang as gang
    import tandem.placement.replica as replica
    from support.faults.stories import ten_actions
    from tandem.placement.unit_state import all_replicas

    monkeypatch.setattr(gang, "staying_replicas", all_replicas)
    monkeypatch.setattr(replica, "staying_replicas", all_replicas)
    assert "required-affinity" in invariants(ten_actions(4))


def test_a_blocked_update_step_that_is_never_reported_breaks_blocked_unreported(monkeypatch):
    """Issue 25: a surge into a full domain waited for ever with no event and no timeout."""
    import tandem.coordination.update as update
    from tandem.coordination.model import Decision

    event = decide._Draft.event
    monkeypatch.setattr(decide._Draft, "event", lambda self, type_, reason, message: None if reason == "Unschedulable" else event(self, type_, reason, message))
    monkeypatch.setattr(update, "stall_update", lambda spec, observed, status, keys, now: Decision("Progressing", "waiting", keys, (), (), status))
    assert "blocked-unreported" in invariants(native(27))
