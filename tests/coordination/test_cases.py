"""Hand-picked coordination cases the issue names, each small enough to reason about."""

from __future__ import annotations

from support.coordination_world import counts, run
from tandem.coordination.model import CoordinationStatus, Observed, Replica, RoleSpec, UnitSpec
from tandem.coordination.planner import next_step
from tandem.coordination.walkthrough import replicas_of, walk


def _series(rows, *roles, revision="r1"):
    return [tuple(row.counts[(role, revision)] for role in roles) for row in rows]


def test_a_role_of_one_replica_never_stalls_the_others():
    """rbg #307: with a tight skew a one-replica role must still move, and so must the rest."""
    spec = UnitSpec(
        roles=(RoleSpec("router", 1, 0), RoleSpec("prefill", 8, 0), RoleSpec("decode", 4, 0)),
        revision="r1",
        scaling_max_skew="10%",
    )
    rows = walk(spec, [])
    assert rows[-1].state == "Complete"
    assert _series(rows, "router", "prefill", "decode")[1] == (1, 1, 1)
    assert _series(rows, "router", "prefill", "decode")[-1] == (1, 8, 4)


def test_a_role_scaled_to_zero_goes_without_touching_the_others_minimums():
    spec = UnitSpec(roles=(RoleSpec("prefill", 4, 1), RoleSpec("decode", 2, 1), RoleSpec("router", 0, 0)), revision="r1")
    start = replicas_of({("prefill", "r1"): 4, ("decode", "r1"): 2, ("router", "r1"): 1})
    rows = walk(spec, start)
    assert rows[-1].state == "Complete"
    assert _series(rows, "prefill", "decode", "router")[-1] == (4, 2, 0)
    assert all(p >= 1 and d >= 1 for p, d, _ in _series(rows, "prefill", "decode", "router"))


def test_a_decrease_keeps_the_ratio_on_the_way_down():
    spec = UnitSpec(roles=(RoleSpec("prefill", 4, 1), RoleSpec("decode", 2, 1)), revision="r1", scaling_max_skew="25%")
    rows = walk(spec, replicas_of({("prefill", "r1"): 8, ("decode", "r1"): 4}))
    # the mirror image of the documented 25% cadence on the way up
    assert _series(rows, "prefill", "decode") == [(8, 4), (7, 3), (6, 3), (5, 2), (4, 2), (4, 2)]


def test_growth_comes_before_shrinkage_in_a_ratio_change():
    """8P:2D -> 4P:4D: decode grows first; prefill shrinks only once decode's growth is Ready."""
    spec = UnitSpec(roles=(RoleSpec("prefill", 4, 1), RoleSpec("decode", 4, 1)), revision="r1", scaling_max_skew="50%")
    world = replicas_of({("prefill", "r1"): 8, ("decode", "r1"): 2})
    first = next_step(spec, Observed(tuple(world)), 0.0)
    assert [c.role for c in first.create] == ["decode"] and first.delete == ()
    pending = world + [Replica("decode", 2 + k, "r1", "Pending") for k in range(first.create[0].count)]
    second = next_step(spec, Observed(tuple(pending), first.status), 1.0)
    assert second.delete == (), "no prefill removed while the new decode is not there yet"


def test_a_change_of_ratio_during_a_rollout_replans_from_what_runs():
    spec = UnitSpec(roles=(RoleSpec("prefill", 4, 1), RoleSpec("decode", 2, 1)), revision="r1", rollout_steps={"prefill": 1, "decode": 1})
    trace = run(spec, [], max_steps=2)
    world, decision = trace.steps[-1]
    assert decision.state == "Progressing"
    changed = UnitSpec(roles=(RoleSpec("prefill", 2, 1), RoleSpec("decode", 4, 1)), revision="r1", rollout_steps={"prefill": 1, "decode": 1})
    # apply the in-flight step, then hand the planner the new spec and the old status
    world = world + [Replica(c.role, 10 + k, c.revision, "Ready") for c in decision.create for k in range(c.count)]
    status = decision.status
    for step in range(20):
        d = next_step(changed, Observed(tuple(world), status), float(step))
        gone = {(x.role, x.index) for x in d.delete}
        world = [r for r in world if (r.role, r.index) not in gone]
        world += [Replica(c.role, 100 + 10 * step + k, c.revision, "Ready") for c in d.create for k in range(c.count)]
        status = d.status
        if d.state == "Complete":
            break
    assert d.state == "Complete"
    assert (counts(world, "prefill"), counts(world, "decode")) == (2, 4)


def test_order_ready_waits_for_readiness_and_order_scheduled_does_not():
    base = dict(roles=(RoleSpec("prefill", 2, 1), RoleSpec("decode", 2, 1)), revision="r1", rollout_steps={"prefill": 1, "decode": 1})
    scheduled = [Replica("prefill", 0, "r1", "Scheduled"), Replica("decode", 0, "r1", "Scheduled")]
    status = CoordinationStatus(mode="Rollout", start={"prefill": 0, "decode": 0}, goal={"prefill": 2, "decode": 2}, step={"prefill": 1, "decode": 1}, step_started=0.0)
    ready_first = next_step(UnitSpec(**base, rollout_progression="OrderReady"), Observed(tuple(scheduled), status), 1.0)
    assert ready_first.create == ()
    go = next_step(UnitSpec(**base, rollout_progression="OrderScheduled"), Observed(tuple(scheduled), status), 1.0)
    assert sorted((c.role, c.count) for c in go.create) == [("decode", 1), ("prefill", 1)]


def test_a_stalled_step_is_retried_after_a_backoff():
    spec = UnitSpec(roles=(RoleSpec("prefill", 2, 1), RoleSpec("decode", 1, 1)), revision="r1", step_timeout=10.0)
    stuck = [Replica("prefill", 0, "r1", "Pending", 0.0), Replica("decode", 0, "r1", "Ready", 0.0)]
    status = CoordinationStatus(mode="Rollout", start={"prefill": 0, "decode": 0}, goal={"prefill": 2, "decode": 1}, step={"prefill": 1, "decode": 1}, step_started=0.0)
    stalled = next_step(spec, Observed(tuple(stuck), status), 11.0)
    assert stalled.state == "Stalled" and [(d.role, d.index) for d in stalled.delete] == [("prefill", 0)]
    assert stalled.status.stalls == 1 and stalled.status.retry_after == 41.0
    kept = [r for r in stuck if r.role == "decode"]
    waiting = next_step(spec, Observed(tuple(kept), stalled.status), 20.0)
    assert waiting.state == "Stalled" and waiting.create == ()
    retry = next_step(spec, Observed(tuple(kept), stalled.status), 41.0)
    assert retry.state == "Progressing" and [(c.role, c.count) for c in retry.create] == [("prefill", 1)]


def test_failed_replicas_are_replaced():
    spec = UnitSpec(roles=(RoleSpec("prefill", 2, 1), RoleSpec("decode", 1, 1)), revision="r1")
    world = [Replica("prefill", 0, "r1", "Ready"), Replica("prefill", 1, "r1", "Failed"), Replica("decode", 0, "r1", "Ready")]
    decision = next_step(spec, Observed(tuple(world)), 0.0)
    assert [(d.role, d.index, d.why) for d in decision.delete] == [("prefill", 1, "failed")]
    assert [(c.role, c.count) for c in decision.create] == [("prefill", 1)]


def test_gated_replicas_are_admitted_only_up_to_the_step():
    """Replicas created ahead (say, before a crash) stay gated until their step admits them."""
    spec = UnitSpec(roles=(RoleSpec("prefill", 4, 1), RoleSpec("decode", 2, 1)), revision="r1", rollout_steps={"prefill": 1, "decode": 1})
    world = [Replica("prefill", i, "r1", "Gated") for i in range(4)] + [Replica("decode", i, "r1", "Gated") for i in range(2)]
    decision = next_step(spec, Observed(tuple(world)), 0.0)
    assert sorted((u.role, u.index) for u in decision.ungate) == [("decode", 0), ("prefill", 0)]
    assert decision.create == ()


def test_a_rollout_from_nothing_follows_the_steps_when_no_role_has_a_minimum():
    """Every minReplicas 0: the first step is the steps (capped at the targets), not the whole target."""
    spec = UnitSpec(roles=(RoleSpec("prefill", 4, 0), RoleSpec("decode", 2, 0)), revision="r1", rollout_steps={"prefill": 2, "decode": 1})
    rows = walk(spec, [])
    assert _series(rows, "prefill", "decode") == [(0, 0), (2, 1), (4, 2), (4, 2)]
    capped = UnitSpec(roles=(RoleSpec("prefill", 4, 0), RoleSpec("decode", 2, 0)), revision="r1", rollout_steps={"prefill": 6})
    # decode, which the steps do not name, goes straight to its target
    assert _series(walk(capped, []), "prefill", "decode")[:2] == [(0, 0), (4, 2)]
    first = next_step(spec, Observed(()), 0.0)
    assert first.status.mode == "Rollout" and sorted((c.role, c.count) for c in first.create) == [("decode", 1), ("prefill", 2)]


def _explained(text: str) -> str:
    from io import StringIO

    from rich.console import Console

    from tandem.api.loading import load_texts
    from tandem.cli.explain import explain_group

    out = StringIO()
    group = load_texts([("group.yaml", text)]).groups[0]
    explain_group(group, None, Console(file=out, width=200, color_system=None))
    return out.getvalue()


def test_explain_says_what_the_planner_does_from_nothing(examples):
    """`tandem explain`'s first title agrees with its table for every minimums/steps combination."""
    text = (examples / "llama-70b.yaml").read_text()
    with_minimums = _explained(text)
    assert "rollout from nothing (minimums first, then steps {prefill: 2, decode: 1}; OrderScheduled)" in with_minimums
    assert "prefill +1, decode +1" in with_minimums.split("scaling from")[0]

    no_minimums = _explained(text.replace("minReplicas: 1", "minReplicas: 0"))
    rollout, scaling = no_minimums.split("rolling update")[0].split("scaling from")
    assert "rollout from nothing (no minimums, so steps {prefill: 2, decode: 1} from zero; OrderScheduled)" in rollout
    assert "prefill +2, decode +1" in rollout and "prefill +1, decode +1" not in rollout
    # the scaling table starts from the minimums, zero here: that is the same rollout
    assert scaling.startswith(" {prefill: 0, decode: 0} (a rollout: no minimums, so steps") and "prefill +2, decode +1" in scaling

    neither = _explained(text.replace("minReplicas: 1", "minReplicas: 0").replace("steps: {prefill: 2, decode: 1}, ", ""))
    first = neither.split("scaling from {")[0]
    assert "scaling from nothing (no minimums and no steps, so no rollout: maxSkew 1; OrderScheduled)" in first
    assert "prefill +1, decode +1" in first


def test_a_shrinking_update_sheds_the_surplus_before_it_creates():
    """8P:4D -> 4P:2D, maxSurge 1: old + new never above target + maxSurge (5P, 3D) once a
    new replica exists (KEP-766 property 4); the surplus old replicas go first, a batch a
    step, never below the target. Step for step what LWS's planner gives."""
    spec = UnitSpec(roles=(RoleSpec("prefill", 4, 1), RoleSpec("decode", 2, 1)), revision="new", max_surge=1, max_unavailable=0)
    rows = walk(spec, replicas_of({("prefill", "old"): 8, ("decode", "old"): 4}))
    assert rows[-1].state == "Complete"
    table = [tuple(row.counts.get(k, 0) for k in [("prefill", "old"), ("decode", "old"), ("prefill", "new"), ("decode", "new")]) for row in rows[:-1]]
    assert table == [
        (8, 4, 0, 0),
        (7, 4, 0, 0),
        (6, 3, 0, 0),
        (5, 3, 0, 0),
        (4, 2, 0, 0),  # surplus gone: 4 + 1 new <= 5, 2 + 1 new <= 3
        (4, 2, 1, 1),
        (3, 2, 1, 1),
        (3, 2, 2, 1),
        (2, 1, 2, 1),
        (2, 1, 3, 2),
        (1, 1, 3, 2),
        (1, 1, 4, 2),
        (0, 0, 4, 2),
    ]
    assert all(p_old + p_new <= 5 and d_old + d_new <= 3 for p_old, d_old, p_new, d_new in table[4:])
    assert all(p_old + p_new >= 4 and d_old + d_new >= 2 for p_old, d_old, p_new, d_new in table), "never below the target"
