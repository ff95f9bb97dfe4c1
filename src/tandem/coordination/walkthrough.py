"""Step tables: what the planners do in an ideal world, for people and for tests.

`walk(spec, replicas)` drives `planner.next_step` against a world where every replica it
creates becomes Ready at once and every delete takes effect, and records the counts
after each step. `tandem explain` prints these tables; tests compare them with the
anchors' documented cadences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from tandem.coordination.model import CoordinationStatus, Decision, Observed, Replica, UnitSpec
from tandem.coordination.planner import next_step


@dataclass(frozen=True)
class Row:
    step: int
    counts: Mapping[tuple[str, str], int]  # (role, revision) -> live replicas
    action: str
    state: str


def replicas_of(counts: Mapping[tuple[str, str], int], phase: str = "Ready") -> list[Replica]:
    """A world holding `counts` replicas per (role, revision), numbered per role."""
    out: list[Replica] = []
    next_index: dict[str, int] = {}
    for (role, revision), count in counts.items():
        for _ in range(count):
            index = next_index.get(role, 0)
            next_index[role] = index + 1
            out.append(Replica(role, index, revision, phase))  # type: ignore[arg-type]
    return out


def walk(spec: UnitSpec, replicas: Sequence[Replica], *, max_steps: int = 200) -> list[Row]:
    """Rows from the initial state to Complete (or until `max_steps`, or a Stalled step)."""
    world = list(replicas)
    status = CoordinationStatus()
    rows = [Row(0, _counts(spec, world), "initial", "")]
    for number in range(1, max_steps + 1):
        decision = next_step(spec, Observed(tuple(world), status), float(number))
        status = decision.status
        if decision.state != "Progressing":
            rows.append(Row(number, _counts(spec, world), decision.reason or decision.state.lower(), decision.state))
            break
        gone = {(d.role, d.index) for d in decision.delete}
        world = [r for r in world if (r.role, r.index) not in gone]
        for create in decision.create:
            start = max((r.index for r in world if r.role == create.role), default=-1) + 1
            world += [Replica(create.role, start + k, create.revision, "Ready", float(number)) for k in range(create.count)]
        if decision.create or decision.delete:
            rows.append(Row(number, _counts(spec, world), _describe(decision), decision.state))
    return rows


def _counts(spec: UnitSpec, world: Sequence[Replica]) -> dict[tuple[str, str], int]:
    revisions = sorted({r.revision for r in world} | {spec.revision}, key=lambda v: (v == spec.revision, v))
    return {
        (role.name, revision): sum(1 for r in world if r.role == role.name and r.revision == revision and r.phase != "Failed")
        for revision in revisions
        for role in spec.roles
    }


def _describe(decision: Decision) -> str:
    parts = [f"{c.role} +{c.count}" for c in decision.create]
    removed: dict[str, int] = {}
    for d in decision.delete:
        removed[d.role] = removed.get(d.role, 0) + 1
    parts += [f"{role} -{count}" for role, count in removed.items()]
    return ", ".join(parts)
