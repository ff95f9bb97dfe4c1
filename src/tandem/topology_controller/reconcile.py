"""One pass of the topology controller over every ClusterTopology: observe, decide, apply.

    world = observe(cluster.snapshot(), settings.backends, memo)
    decisions = decide(world, now)
    applied = apply(cluster, decisions)

The same cluster and time decide the same writes, and a pass on a settled cluster writes
nothing (no status patch, no event). `memo`, kept by the caller across passes, spares
reading, parsing and rendering what did not change; without it a pass is the same, only
dearer. A pass with a retryable failure says so (`retryable`); when the next runs is the
schedule's doubling back-off (runtime/schedule.py), not a fixed requeue that would cap it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tandem.cluster.ports import Cluster
from tandem.errors import InputError, Problem
from tandem.topology_controller.apply import Applied, WriteError, apply
from tandem.topology_controller.decide import decide
from tandem.topology_controller.kinds import BACKEND_KINDS, CLASHING_KINDS
from tandem.topology_controller.memo import TopologyMemo
from tandem.topology_controller.observe import observe, observed_kinds

__all__ = ["TopologyMemo", "TopologyPassReport", "TopologySettings", "WriteError", "check_settings", "reconcile", "watched_kinds"]

@dataclass(frozen=True)
class TopologySettings:
    backends: tuple[str, ...] = ()  # the schedulers whose topology objects are kept; none: status only


@dataclass(frozen=True)
class TopologyPassReport:
    topologies: int
    nodes: int = 0  # nodes the pass saw (the metrics' gauge: no list of every node after each pass)
    created: int = 0
    patched: int = 0
    deleted: int = 0
    status_patches: int = 0
    skipped: int = 0
    errors: tuple[WriteError, ...] = ()
    events: tuple[str, ...] = ()  # a line per event recorded, and per failure
    events_dropped: int = 0
    requeue_after: float | None = None  # no pass of this controller needs one at a set time: retries back off (`retryable`)
    by_kind: tuple[tuple[tuple[str, str], int], ...] = field(default_factory=tuple)  # ((verb, kind), writes), sorted

    @property
    def writes(self) -> int:
        return self.created + self.patched + self.deleted + self.status_patches

    @property
    def failures(self) -> int:
        return len(self.errors)

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
    for clash in CLASHING_KINDS:
        if clash <= set(settings.backends):
            problems.append(
                Problem("--backends", f"{' and '.join(sorted(clash))} both name their kind `Topology`, which tandem cannot tell apart yet; run one of them per controller")
            )
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
    decisions = decide(world, now)
    applied = apply(cluster, decisions)
    return _report(len(world.topologies), world.nodes, applied)


def _report(topologies: int, nodes: int, applied: Applied) -> TopologyPassReport:
    return TopologyPassReport(
        topologies=topologies,
        nodes=nodes,
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
