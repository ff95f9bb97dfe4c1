"""Rolling update across roles: N-dimensional lockstep, as in LWS DisaggregatedSet (KEP-766).

Every role moves on one shared grid of T = the largest role's count. After up-step i the
new revision has `new(i) = ceil(i * target / T)` replicas of a role; after down-step j the
old revision keeps `old(j) = initial - floor(j * initial / T)`. A common index keeps the
roles in lockstep (within one replica's rounding), and `floor(j * initial / T)` reaches
`initial` only at j = T, so all roles drain together.

Both sides move by LWS's batch (`batchSize`): `maxSurge`, or `maxUnavailable` when there
is no surge, at least 1. A role holds at most target + maxSurge replicas, old and new
together (KEP-766 property 4); one that shrinks with the template sheds its surplus old
replicas first. Each step changes one side only, scale-up first:

- **up** by the most grid steps that grow no role by more than its batch, when every role
  that grows stays within its ceiling, target + maxSurge;
- else **down** by a batch (`T // B` grid steps, B = LWS's `totalSteps`, the most batches
  any role needs) or by `maxUnavailable`'s share of the grid, whichever is further, but
  only as far as every role keeps old + new Ready at or above both target -
  maxUnavailable and its minReplicas (so a unit that was functional stays functional);
  once the new side is complete, the rest of the old side goes at once;
- else, when the next up step is blocked by a role's ceiling, that role's old side alone
  goes **down to what the step needs** (LWS's force drain), within the same floors;
- else, when lockstep is blocked (one role at its surge ceiling while counts change with
  the template), each role **grows on its own** within its ceiling and within
  `rollingUpdate.maxSkew` of the slowest role's progress;
- with none of these possible (maxSurge 0 and a role at its minimum), a **bootstrap surge**:
  one replica over the ceiling for such a role, as KEP-766 allows for a missing role.

Percentages (`maxSurge`, `maxUnavailable`) are of the role's new count, as Kubernetes
and LWS resolve them.

Nothing is remembered but the old revision's counts when the update began (the LWS
`initial-replicas` annotation), which the controller persists in the status; the grid
positions are read back from the observed counts, so a restart, a second template change
or new counts mid-way re-plan from what runs. A step is taken only when every live
replica is Ready (the LWS stability check), and waited for no longer than
`rollout.stepTimeoutSeconds`: a surge the placement engine has no room for is replaced in
place within maxUnavailable, or the step is rolled back and the unit Stalled
(`update_room.py`). Replicas of a replaced revision that never got a node go at once.
"""

from __future__ import annotations

from dataclasses import replace

from tandem.coordination.model import CoordinationStatus, Create, Decision, Delete, Observed, UnitSpec, surplus
from tandem.coordination.ratio import interpolate_new, interpolate_old, position, progress, scaled, skew_fraction
from tandem.coordination.update_room import UNPLACED, replace_in_place, stall_update


def next_update_step(spec: UnitSpec, observed: Observed, now: float) -> Decision:
    targets = spec.targets()
    revision = spec.revision
    roles = list(targets)
    old_now = {r: len([x for x in observed.live(r) if x.revision != revision]) for r in roles}
    new_now = {r: observed.count(r, revision) for r in roles}
    new_ready = {r: observed.count(r, revision, frozenset({"Ready"})) for r in roles}
    old_ready = {r: sum(1 for x in observed.live(r) if x.revision != revision and x.phase == "Ready") for r in roles}

    status = observed.status
    if status.mode != "Update" or dict(status.goal) != targets or status.revision != revision:
        # A new update, or a new template/counts mid-way: the old side starts from what it
        # was meant to reach (kept from an interrupted update) or from what runs now.
        start = {r: max(old_now[r], status.start.get(r, 0)) if status.mode == "Update" else old_now[r] for r in roles}
        status = CoordinationStatus(mode="Update", start=start, goal=dict(targets), revision=revision, blocked=status.blocked, short=status.short)
    initial = {r: status.start.get(r, old_now[r]) for r in roles}

    grid = max([max(initial[r], targets[r]) for r in roles] + [0])
    if grid == 0 or (all(old_now[r] == 0 for r in roles) and all(new_ready[r] >= targets[r] for r in roles)):
        return _done(spec, observed, targets)

    # Percentages are of the role's new count (Kubernetes, LWS). A role may hold at most
    # target + maxSurge replicas, old and new together (KEP-766 property 4): one that
    # shrinks sheds its surplus old replicas before any new one is created.
    surge = {r: scaled(spec.max_surge, targets[r], round_up=True) for r in roles}
    unavailable = {r: scaled(spec.max_unavailable, targets[r], round_up=False) for r in roles}
    ceiling = {r: targets[r] + surge[r] for r in roles}
    # Both sides move by LWS's batch: maxSurge, or maxUnavailable when there is no surge
    # (at least 1). Up: the largest number of grid steps that grows no role by more than
    # its batch. Down: B batches cover the largest role (LWS's totalSteps), so a batch is
    # grid // B grid steps, rounded down so that no role loses more than its batch; or
    # maxUnavailable's share of the grid, if that is further.
    batch = {r: surge[r] if surge[r] > 0 else max(1, unavailable[r]) for r in roles}
    batches = max(-(-max(initial[r], targets[r]) // batch[r]) for r in roles)
    up_step = max(1, min((batch[r] * grid // targets[r] for r in roles if targets[r] > 0), default=1))
    down_step = max(
        1,
        grid // batches,
        min((unavailable[r] * grid // initial[r] for r in roles if initial[r] > 0), default=1),
    )

    i = min(_new_index(new_now[r], targets[r], grid) for r in roles)
    j = min(_old_index(old_now[r], initial[r], grid) for r in roles)
    keys = {(r, revision): new_now[r] for r in roles}

    floors = {
        r: max(targets[r] - unavailable[r], spec.role(r).minimum if old_ready[r] + new_ready[r] >= spec.role(r).minimum else 0, 0)
        for r in roles
    }
    if status.retry_after is not None:
        if now < status.retry_after:
            why = f" ({status.blocked})" if status.blocked else ""
            return Decision("Stalled", f"update step timed out{why}; retrying at t={status.retry_after:g}", keys, (), (), status)
        status = replace(status, retry_after=None)

    # A replica of a replaced revision that never got a node (a surge of an update that a
    # newer template overtook) holds nothing and would only be drained later: it goes now.
    stale = [x for x in observed.replicas if x.revision != revision and x.phase in UNPLACED]
    if stale:
        deletes = tuple(Delete(x.role, x.index, "of a replaced revision, never placed") for x in stale)
        return Decision("Progressing", "update: replicas of a replaced revision that never got a node go", keys, (), deletes, status)

    if any(x.phase != "Ready" for x in observed.replicas if x.phase != "Failed"):
        # A surge the engine has no room for: replace in place where maxUnavailable allows.
        room = replace_in_place(spec, observed, status, unavailable, floors)
        if room:
            old_next = {r: old_now[r] - sum(1 for d in room if d.role == r) for r in roles}
            reason = f"update: old side down to {_fmt(old_next)} in place ({status.blocked})"
            return Decision("Progressing", reason, keys, (), room, replace(status, step_started=now))
        if status.step_started is None:
            status = replace(status, step_started=now)
        elif now - status.step_started > spec.step_timeout:
            return stall_update(spec, observed, status, keys, now)
        waiting = f" ({status.blocked})" if status.blocked else ""
        return Decision("Progressing", f"waiting for every replica to be Ready{waiting}", keys, (), (), status)
    idle = status
    status = replace(status, step_started=now)  # every move below starts a step (its timeout counts from now)

    # Catch up first: a role behind the common index (after a failure, say) is refilled.
    behind = {r: interpolate_new(i, grid, targets[r]) - new_now[r] for r in roles}
    if any(n > 0 for n in behind.values()):
        creates = tuple(Create(r, revision, n) for r, n in behind.items() if n > 0)
        return Decision("Progressing", f"update: refill new side to step {i}/{grid}", keys, creates, (), status)

    up = min(grid, i + up_step)
    new_next = {r: interpolate_new(up, grid, targets[r]) for r in roles}
    if i < grid:
        # Only roles that grow are held to the surge ceiling (one already past it, after a
        # bootstrap surge, is not grown further but does not block the others).
        if all(new_next[r] <= new_now[r] or old_now[r] + new_next[r] <= ceiling[r] for r in roles):
            creates = tuple(Create(r, revision, new_next[r] - new_now[r]) for r in roles if new_next[r] > new_now[r])
            wanted = {(r, revision): new_next[r] for r in roles}
            return Decision("Progressing", f"update: new side to step {up}/{grid} {_fmt(new_next)}", wanted, creates, (), status)

    # The fewest old replicas each role may keep: every removed old replica counts as lost
    # capacity (it may have been Ready), and no role goes below its floor (or, if it is
    # already below, below what it has).
    keep = {r: max(0, min(floors[r], old_ready[r] + new_ready[r]) - new_ready[r]) for r in roles}

    if j < grid:
        furthest = grid if i >= grid else min(grid, j + down_step)
        # The furthest drain within this step that keeps every role at its floor.
        for nxt in range(furthest, j, -1):
            old_next = {r: min(old_now[r], interpolate_old(nxt, grid, initial[r])) for r in roles}
            if old_next == old_now:
                continue
            if all(min(old_ready[r], old_next[r]) >= keep[r] for r in roles):
                deletes = _drain(observed, revision, old_now, old_next)
                return Decision("Progressing", f"update: old side to step {nxt}/{grid} {_fmt(old_next)}", keys, (), deletes, status)

    if i < grid:
        # Force drain (LWS): the next up step is blocked by a role's ceiling; that role's
        # old side alone goes down to what the step needs, never below its floor.
        old_next = {
            r: max(min(old_now[r], ceiling[r] - new_next[r]), keep[r])
            if new_next[r] > new_now[r] and old_now[r] + new_next[r] > ceiling[r]
            else old_now[r]
            for r in roles
        }
        if any(old_next[r] < old_now[r] for r in roles):
            deletes = _drain(observed, revision, old_now, old_next)
            return Decision("Progressing", f"update: old side down to make room {_fmt(old_next)}", keys, (), deletes, status)

    # Lockstep is blocked (typically one role at its surge ceiling while counts change with
    # the template): let each role grow on its own, within its ceiling and within
    # rollingUpdate.maxSkew of the slowest role's progress.
    moving = [r for r in roles if targets[r] > 0]
    window = {r: targets[r] for r in roles}
    if moving:
        slowest = min(progress(new_now[r], 0, targets[r]) for r in moving)
        grow = {}
        for r in moving:
            window[r] = position(0, targets[r], slowest + skew_fraction(spec.update_max_skew, 0, targets[r]))
            allowed = min(targets[r], ceiling[r] - old_now[r], window[r])
            if allowed > new_now[r]:
                grow[r] = allowed
        if grow:
            creates = tuple(Create(r, revision, n - new_now[r]) for r, n in grow.items())
            wanted = {(r, revision): grow.get(r, new_now[r]) for r in roles}
            return Decision("Progressing", f"update: new side within maxSkew {_fmt(grow)}", wanted, creates, (), status)

    # Bootstrap surge (KEP-766, generalised): with no ordinary move left, a role allowed no
    # surge goes one replica over its ceiling, once (never further), so the new revision
    # can take over without the role dropping below its minimum or its availability. Only
    # a role held back by its ceiling, not one already ahead of the slowest role by
    # maxSkew, may take it: lockstep holds through failures too.
    bump = [
        r
        for r in roles
        if surge[r] == 0 and new_now[r] < min(targets[r], window[r]) and old_now[r] + new_now[r] <= ceiling[r]
    ]
    if bump:
        creates = tuple(Create(r, revision, 1) for r in bump)
        wanted = {(r, revision): new_now[r] + (1 if r in bump else 0) for r in roles}
        return Decision("Progressing", f"update: bootstrap surge, one new replica of {', '.join(bump)}", wanted, creates, (), status)

    return Decision(
        "Stalled",
        "update blocked: neither side can move within maxSurge / maxUnavailable and the role minimums",
        keys,
        (),
        (),
        replace(idle, stalls=idle.stalls + 1),
    )


def _new_index(count: int, target: int, grid: int) -> int:
    """The furthest grid step whose new-side count this role has reached."""
    if target == 0:
        return grid
    step = 0
    while step < grid and interpolate_new(step + 1, grid, target) <= count:
        step += 1
    return step


def _old_index(count: int, initial: int, grid: int) -> int:
    """The furthest grid step whose old-side count this role has drained to."""
    if initial == 0:
        return grid
    step = 0
    while step < grid and interpolate_old(step + 1, grid, initial) >= count:
        step += 1
    return step


def _drain(observed: Observed, revision: str, old_now: dict[str, int], old_next: dict[str, int]) -> tuple[Delete, ...]:
    """Old replicas to delete, per role down to `old_next`: least advanced first."""
    out: list[Delete] = []
    for role, keep in old_next.items():
        old = [x for x in observed.live(role) if x.revision != revision]
        out += surplus(old, keep, "replaced by the new revision")
    return tuple(out)


def _done(spec: UnitSpec, observed: Observed, targets: dict[str, int]) -> Decision:
    keys = {(r, spec.revision): observed.count(r, spec.revision) for r in targets}
    return Decision("Complete", "", keys, (), (), CoordinationStatus())


def _fmt(counts: dict[str, int]) -> str:
    return "{" + ", ".join(f"{r}: {n}" for r, n in counts.items()) + "}"
