"""One unit's next coordination step: observed replicas and status in, actions out.

`next_step(spec, observed, now)` first syncs what the world reports (failed replicas are
deleted and count for nothing), then decides:

- **Rollout** while the unit is not functional (some role below its minimum), or starts
  from nothing with `rollout.steps` set (`rolls_out`), and until the change it started is
  complete: the first step is every role's minimum, then `rollout.steps` per step
  (`steps.rollout_step`), gated by `rollout.progression`. With every minimum zero the
  first step is the steps themselves; with no minimums and no steps, growing from zero
  is scaling.
- **Scaling** when the spec's counts differ from what runs: steps within
  `scaling.maxSkew` (`steps.scaling_step`), gated by `scaling.progression`; growth is
  applied before shrinkage inside a step.
- **Complete** when every role runs its target and has reached it.

A step that does not complete within `rollout.stepTimeoutSeconds` makes the unit
`Stalled`: the replicas of the step that did not get there are released (the unit keeps
what completed), and the step is retried after an exponential backoff. Rolling updates
(a new revision) are planned by `update.next_update_step`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from tandem.coordination.model import (
    REACHED,
    CoordinationStatus,
    Create,
    Decision,
    Delete,
    Mode,
    Observed,
    State,
    UnitSpec,
    Ungate,
    backoff_seconds,
    surplus,
)
from tandem.coordination.steps import rollout_step, scaling_step
from tandem.coordination.update import next_update_step


def next_step(spec: UnitSpec, observed: Observed, now: float) -> Decision:
    """The next step for one unit (see the module docstring)."""
    failed = tuple(Delete(r.role, r.index, "failed") for r in observed.replicas if r.phase == "Failed")
    if any(r.revision != spec.revision for r in observed.replicas if r.phase != "Failed"):
        decision = next_update_step(spec, observed, now)
    else:
        decision = _next_count_step(spec, observed, now)
    return replace(decision, delete=failed + decision.delete, ungate=_ungates(observed, decision))


def rolls_out(spec: UnitSpec, current: Mapping[str, int]) -> bool:
    """Whether `current` (admitted replicas of the spec's revision) starts a rollout.

    A unit below a role's minimum is not functional: the rollout brings it up, minimums
    first. A unit with nothing running rolls out too when `rollout.steps` is set, even if
    no role has a minimum (its first step is then the steps themselves). Without minimums
    or steps there is nothing a rollout would add: growing from zero is scaling, within
    `scaling.maxSkew` (RBG's documented cadence from 0P:0D).
    """
    if any(current.get(r.name, 0) < r.minimum for r in spec.roles):
        return True
    from_nothing = all(current.get(r.name, 0) == 0 for r in spec.roles) and any(r.replicas > 0 for r in spec.roles)
    return from_nothing and bool(spec.rollout_steps)


def _ungates(observed: Observed, decision: Decision) -> tuple[Ungate, ...]:
    """Gated replicas the step's counts admit (lowest index first); the rest stay gated."""
    gone = {(d.role, d.index) for d in decision.delete}
    out: list[Ungate] = []
    for (role, revision), allowed in decision.targets.items():
        live = [r for r in observed.live(role, revision) if (r.role, r.index) not in gone]
        admitted = sum(1 for r in live if r.phase != "Gated")
        gated = sorted((r for r in live if r.phase == "Gated"), key=lambda r: r.index)
        out += [Ungate(r.role, r.index) for r in gated[: max(allowed - admitted, 0)]]
    return tuple(out)


def _next_count_step(spec: UnitSpec, observed: Observed, now: float) -> Decision:
    targets = spec.targets()
    revision = spec.revision
    # Gated replicas are held back, not progress: `current` counts admitted ones only, and
    # the gated ones are a pool a step admits from before it creates anything.
    current = {role: observed.count(role, revision) - _gated(observed, role, revision) for role in targets}
    status = observed.status
    mode: Mode
    if rolls_out(spec, current) or (status.mode == "Rollout" and dict(status.goal) == targets):
        mode, progression = "Rollout", spec.rollout_progression
    elif current != targets or (status.mode == "Scaling" and dict(status.goal) == targets and status.step != targets):
        mode, progression = "Scaling", spec.scaling_progression
    else:
        mode, progression = "Idle", spec.scaling_progression
    if mode != status.mode or dict(status.goal) != targets:
        # A new change, or the targets moved mid-way: re-plan from what runs now.
        # (A step that timed out keeps its backoff while its goal is the same: releasing
        # it can turn an idle wait into scaling.)
        retry = status.retry_after if dict(status.goal) == targets else None
        status = CoordinationStatus(mode=mode, start=dict(current), goal=dict(targets), stalls=status.stalls, retry_after=retry,
                                    blocked=status.blocked, short=status.short)

    reached = {role: observed.count(role, revision, REACHED[progression]) for role in targets}
    if mode == "Idle":
        if all(reached[role] >= targets[role] for role in targets):
            return _decision("Complete", "", spec, observed, current, reached, targets, CoordinationStatus())
        # The last step of a change (a rolling update's last new replicas, say) is a step
        # too: waited for no longer than the step timeout.
        if status.step_started is None:
            status = status.with_step(targets, now)
        elif now - status.step_started > spec.step_timeout:
            return _stall(spec, observed, status, current, reached, progression, now)
        reason = "waiting for replicas to be " + _word(progression)
        return _decision("Progressing", reason, spec, observed, current, reached, targets, status)

    if status.retry_after is not None and now < status.retry_after:
        why = f" ({status.blocked})" if status.blocked else ""
        return Decision("Stalled", f"retrying the step at t={status.retry_after:g}{why}", _keys(spec, current), (), (), status)

    step = dict(status.step)
    if not step or _step_reached(step, current, reached, status.start):
        if step and step == targets:
            return _decision("Complete", "", spec, observed, current, reached, targets, CoordinationStatus())
        step = (
            rollout_step(current, {r.name: r.minimum for r in spec.roles}, targets, spec.rollout_steps)
            if mode == "Rollout"
            else scaling_step(current, status.start, targets, spec.scaling_max_skew)
        )
        status = replace(status.with_step(step, now), retry_after=None)
    elif status.step_started is not None and now - status.step_started > spec.step_timeout:
        return _stall(spec, observed, status, current, reached, progression, now)

    return _decision("Progressing", f"{mode.lower()} step {_fmt(step)}", spec, observed, current, reached, step, status)


def _step_reached(step: Mapping[str, int], current: Mapping[str, int], reached: Mapping[str, int], start: Mapping[str, int]) -> bool:
    """Growing roles have `step` replicas reached; shrinking roles run no more than `step`."""
    for role, want in step.items():
        if want >= start.get(role, 0):
            if reached.get(role, 0) < want:
                return False
        elif current.get(role, 0) > want:
            return False
    return True


def _stall(
    spec: UnitSpec,
    observed: Observed,
    status: CoordinationStatus,
    current: Mapping[str, int],
    reached: Mapping[str, int],
    progression: str,
    now: float,
) -> Decision:
    """Release what the timed-out step could not complete; retry after a backoff."""
    stalls = status.stalls + 1
    delay = backoff_seconds(stalls)
    releases = []
    kept = {}
    for role in current:
        late = [r for r in observed.live(role, spec.revision) if r.phase not in REACHED[progression]]
        releases += [Delete(r.role, r.index, "step timed out") for r in late]
        kept[role] = reached[role]
    new_status = replace(status, step={}, step_started=None, stalls=stalls, retry_after=now + delay)
    missing = ", ".join(f"{role} {reached[role]}/{status.step.get(role, 0)}" for role in current if reached[role] < status.step.get(role, 0))
    why = f"; {status.blocked}" if status.blocked else ""
    reason = f"step {_fmt(status.step)} not {_word(progression)} within {spec.step_timeout:g}s ({missing}){why}; retry in {delay:g}s"
    return Decision("Stalled", reason, _keys(spec, kept), (), tuple(releases), new_status)


def _decision(
    state: State,
    reason: str,
    spec: UnitSpec,
    observed: Observed,
    current: Mapping[str, int],
    reached: Mapping[str, int],
    step: Mapping[str, int],
    status: CoordinationStatus,
) -> Decision:
    """Creates for roles below `step` (after admitting gated replicas); deletes for roles
    above it, but only once every role that grows in this step has reached its count
    (scale up before scale down); gated replicas beyond the final target go too."""
    targets = spec.targets()
    creates = []
    for role in step:
        missing = step[role] - current[role] - _gated(observed, role, spec.revision)
        if missing > 0:
            creates.append(Create(role, spec.revision, missing))
    growth_done = all(reached[role] >= step[role] for role in step if step[role] >= current[role])
    deletes: list[Delete] = []
    for role in step:
        live = observed.live(role, spec.revision)
        admitted = [r for r in live if r.phase != "Gated"]
        gated = [r for r in live if r.phase == "Gated"]
        if growth_done:
            deletes += surplus(admitted, step[role], "scaled down")
        deletes += surplus(gated, max(targets[role] - max(current[role], step[role]), 0) + max(step[role] - current[role], 0), "beyond the target")
    return Decision(state, reason, _keys(spec, step), tuple(creates), tuple(deletes), status)


def _gated(observed: Observed, role: str, revision: str) -> int:
    return sum(1 for r in observed.live(role, revision) if r.phase == "Gated")


def _keys(spec: UnitSpec, counts: Mapping[str, int]) -> dict[tuple[str, str], int]:
    return {(role, spec.revision): count for role, count in counts.items()}


def _fmt(counts: Mapping[str, int]) -> str:
    return "{" + ", ".join(f"{role}: {count}" for role, count in counts.items()) + "}"


def _word(progression: str) -> str:
    return "Ready" if progression == "OrderReady" else "Scheduled"
