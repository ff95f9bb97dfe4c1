"""Step arithmetic for rollout and scaling: where the next step should put each role.

Pure functions of counts; `planner.py` turns them into actions, timeouts and states.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping

from tandem.coordination.ratio import position, progress, skew_fraction


def rollout_step(
    current: Mapping[str, int],
    minimums: Mapping[str, int],
    targets: Mapping[str, int],
    steps: Mapping[str, int] | None,
) -> dict[str, int]:
    """The next rollout step (RBG KEP-75 `rollingDeploy`).

    The first step gives every role its minimum — a functional unit before any extra.
    After that each role grows by its `steps` entry per step; a role the steps do not
    name (or with no steps at all) goes straight to its target. Never past the target.
    """
    if any(current.get(role, 0) < minimums[role] for role in targets):
        return {role: max(current.get(role, 0), min(minimums[role], targets[role])) for role in targets}
    nxt = {}
    for role, target in targets.items():
        have = current.get(role, 0)
        if have >= target:
            nxt[role] = target if have > target else have
        elif steps and role in steps:
            nxt[role] = min(target, have + steps[role])
        else:
            nxt[role] = target
    return nxt


def scaling_step(
    current: Mapping[str, int],
    start: Mapping[str, int],
    targets: Mapping[str, int],
    max_skew: int | str,
) -> dict[str, int]:
    """The next scaling step: every role at most `max_skew` ahead of the slowest.

    Progress of a role is the fraction of its way from `start` to its target. The next
    step puts every role at the slowest role's progress plus `max_skew` (its own share
    of the way when `max_skew` is an int), rounded away from the start, never past its
    target and never backwards. Growing roles and shrinking roles are stepped alike; the
    planner applies growth before shrinkage within a step.

    The RBG documented cadence comes out of this: maxSkew 25%, 0P:0D -> 4P:2D goes
    {0,0} -> {1,1} -> {2,1} -> {3,2} -> {4,2}.
    """
    moving = [role for role in targets if start.get(role, 0) != targets[role]]
    if not moving:
        return dict(targets)
    slowest = min(progress(current.get(role, 0), start.get(role, 0), targets[role]) for role in moving)
    nxt = {}
    for role, target in targets.items():
        begin, have = start.get(role, 0), current.get(role, 0)
        if begin == target:
            nxt[role] = target
            continue
        allowed = slowest + skew_fraction(max_skew, begin, target)
        step = position(begin, target, min(allowed, Fraction(1)))
        # never undo progress already made
        nxt[role] = max(step, have) if target >= begin else min(step, have)
    return nxt


def skew(counts: Mapping[str, int], start: Mapping[str, int], targets: Mapping[str, int]) -> Fraction:
    """Largest difference in progress between two roles that are moving."""
    values = [progress(counts.get(r, 0), start.get(r, 0), targets[r]) for r in targets if start.get(r, 0) != targets[r]]
    return max(values) - min(values) if values else Fraction(0)
