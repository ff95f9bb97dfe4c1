"""A rolling update step that cannot complete: replace in place, or time out and say why.

A step of `update.next_update_step` waits until every live replica is Ready. Two things
keep it from waiting for ever on replicas that will never get there:

- **Replace in place** (`replace_in_place`): when the placement engine found no room for
  some of the step's new replicas (`CoordinationStatus.short`, written by the controller
  after each placement, with the engine's words in `blocked`) and the spec allows
  unavailability (`rollingUpdate.maxUnavailable` > 0), as many old replicas of those
  roles go as new ones wait, within maxUnavailable and the role minimums, so the new
  ones get their room. Without unavailability allowed, the surge waits.
- **Step timeout** (`stall_update`): a step not complete within
  `rollout.stepTimeoutSeconds` makes the unit `Stalled`, with what is missing and the
  engine's words; what the step holds half-done is rolled back (its new replicas not
  Ready, and old ones that never got a node, are deleted: the unit keeps what runs), and
  the update is tried again after the backoff, as a timed-out rollout step is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from tandem.coordination.model import CoordinationStatus, Decision, Delete, Observed, UnitSpec, backoff_seconds, surplus

UNPLACED = frozenset({"Gated", "Pending"})


def replace_in_place(
    spec: UnitSpec,
    observed: Observed,
    status: CoordinationStatus,
    unavailable: Mapping[str, int],
    floors: Mapping[str, int],
) -> tuple[Delete, ...]:
    """Old replicas to delete so that new ones the engine found no room for get theirs.

    Per role: as many as its new replicas wait (`status.short`), less the old ones already
    going (Failed: being deleted, their room coming free), at most `unavailable` gone at
    once and never leaving fewer Ready replicas (both revisions) than `floors`. The least
    advanced old replicas go first (one that is not Ready costs nothing)."""
    revision = spec.revision
    out: list[Delete] = []
    for role, short in sorted(status.short.items()):
        if short <= 0 or unavailable.get(role, 0) <= 0:
            continue
        old = [x for x in observed.live(role) if x.revision != revision]
        going = sum(1 for x in observed.replicas if x.role == role and x.revision != revision and x.phase == "Failed")
        ready = sum(1 for x in observed.live(role) if x.phase == "Ready")
        waiting_new = sum(1 for x in observed.live(role, revision) if x.phase in UNPLACED)
        need = min(short, waiting_new) - going
        spare_unready = sum(1 for x in old if x.phase != "Ready")
        # Removing a replica that is not Ready costs no availability; a Ready one costs one.
        allowed = spare_unready + max(0, min(unavailable[role] - going, ready - floors.get(role, 0)))
        count = min(need, allowed, len(old))
        if count > 0:
            out += surplus(old, len(old) - count, "replaced in place: the new revision's surge has no room")
    return tuple(out)


def stall_update(
    spec: UnitSpec, observed: Observed, status: CoordinationStatus, keys: Mapping[tuple[str, str], int], now: float
) -> Decision:
    """Roll the timed-out step back and retry after the backoff (see the module docstring)."""
    revision = spec.revision
    late = [x for x in observed.replicas if x.phase != "Failed" and x.phase != "Ready" and (x.revision == revision or x.phase in UNPLACED)]
    releases = tuple(Delete(x.role, x.index, "update step timed out") for x in late)
    stalls = status.stalls + 1
    delay = backoff_seconds(stalls)
    roles = [r.name for r in spec.roles]
    missing = ", ".join(
        f"{role} {sum(1 for x in observed.live(role, revision) if x.phase == 'Ready')}/{len(observed.live(role, revision))} new Ready"
        for role in roles
        if any(x.role == role for x in late)
    )
    why = f"; {status.blocked}" if status.blocked else ""
    reason = f"update step not Ready within {spec.step_timeout:g}s ({missing}){why}; rolled back {len(releases)} replicas; retry in {delay:g}s"
    gone = {(d.role, d.index) for d in releases}
    kept = {key: sum(1 for x in observed.live(key[0], key[1]) if (x.role, x.index) not in gone) for key in keys}
    new_status = replace(status, step={}, step_started=None, stalls=stalls, retry_after=now + delay)
    return Decision("Stalled", reason, kept, (), releases, new_status)
