"""A rolling update step that cannot complete (issue 25, item 2): it always either
progresses or is Stalled by its timeout, rolling back what it holds half-done; and with
maxUnavailable it replaces in place the replicas the engine found no room for."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from support.coordination_world import run
from coordination.test_properties import SETTINGS, update_cases
from tandem.coordination.model import CoordinationStatus, Observed, Replica, RoleSpec, UnitSpec
from tandem.coordination.planner import next_step
from tandem.coordination.walkthrough import replicas_of

TIMEOUT = 10.0


@SETTINGS
@given(update_cases(), st.sampled_from(["prefill", "decode"]))
def test_an_update_step_always_progresses_or_is_stalled_by_its_timeout(case, stuck):
    """New replicas of one role never get a node: within the step timeout (plus a tick)
    of the step that made them, the unit is Stalled, the stuck replicas are rolled back,
    and nothing of the old revision that runs is deleted by the rollback."""
    spec, initial = case
    spec = replace(spec, step_timeout=TIMEOUT)
    if stuck not in spec.targets() or spec.targets()[stuck] == 0:
        return
    old = replicas_of({(role, "old"): count for role, count in initial.items()})
    trace = run(spec, old, stuck_roles=frozenset({stuck}), max_steps=60)
    waiting_since = None
    for number, (world, decision) in enumerate(trace.steps):
        pending = [r for r in world if r.phase == "Pending"]
        if pending and waiting_since is None:
            waiting_since = number
        if decision.state == "Stalled" and decision.delete:
            assert all(d.why in ("update step timed out", "step timed out") for d in decision.delete)
            gone = {(d.role, d.index) for d in decision.delete}
            assert all(r.phase != "Ready" for r in world if (r.role, r.index) in gone), "only what did not get there"
            assert {(r.role, r.index) for r in pending} <= gone, "every stuck replica rolled back"
            assert number - waiting_since <= TIMEOUT + 2, "Stalled by the timeout"
            return
        if waiting_since is not None and not pending:
            waiting_since = None
        assert waiting_since is None or number - waiting_since <= TIMEOUT + 2, "waited past the step timeout without a stall"
    assert trace.last.state in ("Complete", "Stalled"), trace.last.reason


def _unit(old: dict[str, int], new: dict[str, str]) -> list[Replica]:
    replicas = [Replica(role, i, "old", "Ready") for role, count in old.items() for i in range(count)]
    for role, phases in new.items():
        replicas += [Replica(role, 10 + i, "new", phase) for i, phase in enumerate(phases.split())]
    return replicas


SPEC = UnitSpec(roles=(RoleSpec("prefill", 2, 1), RoleSpec("decode", 2, 1)), revision="new", max_surge=1, max_unavailable=1, step_timeout=60)


def test_a_blocked_surge_is_replaced_in_place_within_max_unavailable():
    status = CoordinationStatus(mode="Update", start={"prefill": 2, "decode": 2}, goal={"prefill": 2, "decode": 2}, revision="new",
                                step_started=0.0, blocked="no room in block b0 for another prefill replica", short={"prefill": 1, "decode": 1})
    replicas = _unit({"prefill": 2, "decode": 2}, {"prefill": "Pending", "decode": "Pending"})
    decision = next_step(SPEC, Observed(tuple(replicas), status), 5.0)
    assert decision.state == "Progressing" and "in place" in decision.reason and "block b0" in decision.reason
    assert sorted((d.role, d.index < 10) for d in decision.delete) == [("decode", True), ("prefill", True)], "one old replica of each"
    # The old ones going (Failed while they terminate) count against maxUnavailable: none more.
    after = [r if (r.role, r.index) not in {(d.role, d.index) for d in decision.delete} else replace(r, phase="Failed") for r in replicas]
    again = next_step(SPEC, Observed(tuple(after), decision.status), 6.0)
    assert not [d for d in again.delete if d.why != "failed"], again.delete


def test_without_max_unavailable_a_blocked_surge_waits_then_stalls_and_rolls_back():
    spec = replace(SPEC, max_unavailable=0)
    status = CoordinationStatus(mode="Update", start={"prefill": 2, "decode": 2}, goal={"prefill": 2, "decode": 2}, revision="new",
                                step_started=0.0, blocked="no room in block b0 for another prefill replica", short={"prefill": 1})
    replicas = _unit({"prefill": 2, "decode": 2}, {"prefill": "Pending", "decode": "Ready"})
    waiting = next_step(spec, Observed(tuple(replicas), status), 30.0)
    assert waiting.state == "Progressing" and not waiting.delete and "block b0" in waiting.reason
    stalled = next_step(spec, Observed(tuple(replicas), status), 61.0)
    assert stalled.state == "Stalled" and "not Ready within 60s" in stalled.reason and "block b0" in stalled.reason
    assert [(d.role, d.index) for d in stalled.delete] == [("prefill", 10)], "only the surge that got nowhere"
    assert stalled.status.retry_after == 61.0 + 30.0
    backing_off = next_step(spec, Observed(tuple(r for r in replicas if r.index != 10 or r.role != "prefill"), stalled.status), 70.0)
    assert backing_off.state == "Stalled" and not backing_off.create and "block b0" in backing_off.reason
    retried = next_step(spec, Observed(tuple(r for r in replicas if r.index != 10 or r.role != "prefill"), stalled.status), 92.0)
    assert retried.state == "Progressing" and retried.create, retried.reason
