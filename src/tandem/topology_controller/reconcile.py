"""One pass of the topology controller over every ClusterTopology: observe, decide, apply.

    world = observe(cluster.snapshot(), settings.backends, memo)
    decisions = decide(world, now)
    applied = apply(cluster, decisions)

The same cluster and time decide the same writes, and a pass on a settled cluster writes
nothing (no status patch, no event). `memo`, kept by the caller across passes, spares
reading, parsing and rendering what did not change; without it a pass is the same, only
dearer. A pass with a retryable failure says so (`retryable`); when the next runs is the
schedule's doubling back-off (runtime/schedule.py), not a fixed requeue that would cap it.
A write refused for good is remembered in the memo and not sent again as it is
(`refusal_gate.py`); the pass that learns one asks for another soon (`requeue_after`),
which tells it in the topology's status.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tandem.api.topology_status import EXAMPLES
from tandem.cluster.ports import Cluster
from tandem.errors import InputError, Problem
from tandem.topology_controller.apply import Applied, WriteError, apply
from tandem.topology_controller.actions import TopologyDecisions
from tandem.topology_controller.decide import REFUSAL_RETRY_S, decide
from tandem.topology_controller.kinds import BACKEND_KINDS
from tandem.topology_controller.memo import TopologyMemo
from tandem.topology_controller.observe import World, observe, observed_kinds
from tandem.topology_controller.refusal import Refusal
from tandem.topology_controller.refusal_gate import refusal_target, write_key

__all__ = ["TopologyMemo", "TopologyPassReport", "TopologySettings", "WriteError", "check_settings", "reconcile", "watched_kinds"]

# A pass that learns of a refusal, or of its end, is followed by one this soon: it writes
# the topology's status (WriteRefused), as nothing else may change to wake one.
REFUSAL_REQUEUE_S = 0.05


@dataclass(frozen=True)
class TopologySettings:
    backends: tuple[str, ...] = ()  # the schedulers whose topology objects are kept; none: status only
    refusal_retry: float = REFUSAL_RETRY_S  # a write the API refused is sent once more this long after (the process: --resync)


@dataclass(frozen=True)
class TopologyPassReport:
    topologies: int
    nodes: int = 0  # nodes the pass saw (the metrics' gauge: no list of every node after each pass)
    unlabeled: tuple[tuple[str, int], ...] = ()  # (topology, nodes lacking one of its level labels), by name
    created: int = 0
    patched: int = 0
    deleted: int = 0
    status_patches: int = 0
    skipped: int = 0
    errors: tuple[WriteError, ...] = ()
    known: tuple[WriteError, ...] = ()  # of the errors, refusals an earlier pass told (logged once, not again)
    held: int = 0  # writes not sent: the API refused them as they are (refusal_gate.py)
    events: tuple[str, ...] = ()  # a line per event recorded, and per failure
    events_dropped: int = 0
    # When a pass is due though nothing changes: soon after one that learnt a refusal (the
    # status tells it), else when a held write's retry comes. Failed retryable writes back
    # off instead (`retryable`: the schedule's doubling).
    requeue_after: float | None = None
    by_kind: tuple[tuple[tuple[str, str], int], ...] = field(default_factory=tuple)  # ((verb, kind), writes), sorted

    @property
    def writes(self) -> int:
        return self.created + self.patched + self.deleted + self.status_patches

    @property
    def failures(self) -> int:
        return len(self.errors)

    @property
    def fresh_errors(self) -> tuple[WriteError, ...]:
        """The errors worth a log line: all but the refusals an earlier pass told."""
        return tuple(e for e in self.errors if e not in self.known)

    @property
    def retryable(self) -> bool:
        return any(e.retryable for e in self.errors)

    def count(self, verb: str, kind: str) -> int:
        return dict(self.by_kind).get((verb, kind), 0)


def check_settings(settings: TopologySettings) -> list[Problem]:
    """What is wrong with the settings, at `--backends` (the CLI refuses them, exit 2)."""
    problems = []
    unknown = [b for b in settings.backends if b not in BACKEND_KINDS]
    if unknown:
        problems.append(Problem("--backends", f"unknown backend(s) {', '.join(unknown)}: choose from {', '.join(sorted(BACKEND_KINDS))}"))
    if len(set(settings.backends)) != len(settings.backends):
        problems.append(Problem("--backends", "a backend is named twice"))
    return problems


def watched_kinds(settings: TopologySettings) -> tuple[str, ...]:
    """What the pass reads, and so what a world must list and watch."""
    return observed_kinds(settings.backends)


def reconcile(cluster: Cluster, now: float, settings: TopologySettings = TopologySettings(), memo: TopologyMemo | None = None) -> TopologyPassReport:
    problems = check_settings(settings)
    if problems:
        raise InputError(problems)
    world = observe(cluster.snapshot(), settings.backends, memo)
    decisions = decide(world, now, settings.refusal_retry)
    applied = apply(cluster, decisions)
    known, changed = _remember_refusals(world.memo, decisions, applied, now)
    requeue_after = None
    if memo is not None and changed:
        requeue_after = REFUSAL_REQUEUE_S
    elif memo is not None and memo.refused:
        requeue_after = max(min(r.at for r in memo.refused.values()) + settings.refusal_retry - now, 0.0)
    return _report(len(world.topologies), world.nodes, _unlabeled(world), applied, known, len(decisions.held), requeue_after)


def _unlabeled(world: World) -> tuple[tuple[str, int], ...]:
    """Per topology, the nodes its status counts as unlabeled (the per-level counts are kept
    per change, so this costs no walk over the nodes); 0 for one whose levels do not parse."""
    out = []
    for state in world.topologies:
        counts = world.paths[state.level_keys].counts(EXAMPLES) if state.level_keys is not None else None
        out.append((state.name, 0 if counts is None else counts.total - counts.placeable))
    return tuple(out)


def _remember_refusals(memo: TopologyMemo, decisions: TopologyDecisions, applied: Applied, now: float) -> tuple[list[WriteError], bool]:
    """Keep the refusals whose write this pass decided again (held back, or refused once
    more) and those it learnt; forget the rest (their write went through, or is no longer
    wanted). Returns the errors already told by an earlier pass (the same words for the
    same object: not logged again), and whether what is remembered changed."""
    before = memo.refused
    kept = {r.target: replace(r, new=False) for r in decisions.held}
    known = []
    for write, error in applied.refused:
        target = refusal_target(write)
        prior = before.get(target)
        again = prior is not None and prior.words == (error.action, error.code, error.reason, error.message)
        kept[target] = Refusal(error.subject, error.action, error.code, error.reason, error.message, target, write_key(write), now, new=not again)
        if again:
            known.append(error)
    memo.refused = kept
    return known, {(t, r.key) for t, r in kept.items()} != {(t, r.key) for t, r in before.items()}


def _report(topologies: int, nodes: int, unlabeled: tuple[tuple[str, int], ...], applied: Applied, known: list[WriteError], held: int, requeue_after: float | None) -> TopologyPassReport:
    return TopologyPassReport(
        topologies=topologies,
        nodes=nodes,
        unlabeled=unlabeled,
        known=tuple(known),
        held=held,
        requeue_after=requeue_after,
        created=applied.created,
        patched=applied.patched,
        deleted=applied.deleted,
        status_patches=applied.status_patches,
        skipped=applied.skipped,
        errors=tuple(applied.errors),
        events=tuple(applied.events),
        events_dropped=applied.events_dropped,
        by_kind=tuple(sorted(applied.by_kind.items())),
    )
