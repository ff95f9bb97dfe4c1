"""One level-triggered pass over every InferenceGroup: observe, decide, apply.

    state = observe(cluster.snapshot())      # what changed, from one consistent snapshot
    decisions = decide(state, now, placer)   # pure: actions per group, requeue_after
    report = apply(cluster, decisions)       # writes, group by group

Nothing is kept between passes but what spares work (the memo) and the writes the API
refused, which the next decision reports (`_refusals`): the same cluster state and time
give the same actions, and a pass on a settled cluster writes nothing. `report.requeue_after` says when the
next pass is due even if nothing changes (a gang timeout, a backoff, a step timeout).
See `docs/controller.md`.
"""

from __future__ import annotations

from tandem.cluster.ports import Cluster
from tandem.cluster.writes import RecordEvent, WriteError
from tandem.controller.actions import Decisions
from tandem.controller.apply import PassReport, apply, refused
from tandem.controller.changes import Change
from tandem.controller.decide import Placer, decide
from tandem.controller.delegation import DelegationSettings
from tandem.controller.memo import Memo, Rejection
from tandem.controller.observe import OBSERVED_KINDS, observe
from tandem.controller.provisioning import ProvisioningSettings
from tandem.placement import place

__all__ = ["Change", "Memo", "PassReport", "Placer", "WriteError", "reconcile"]


def reconcile(
    cluster: Cluster,
    now: float,
    placer: Placer = place,
    memo: Memo | None = None,
    provisioning: ProvisioningSettings = ProvisioningSettings(),
    delegation: DelegationSettings = DelegationSettings(),
) -> PassReport:
    """One pass; `placer` is the engine (a baseline can stand in, to compare policies);
    `memo`, kept by the caller across passes, spares re-validating unchanged objects;
    `provisioning`, whether units that do not fit ask for nodes (the world must then serve
    `provisioning.kinds` too); `delegation`, the schedulers groups may be handed to (their
    kinds are read where the world serves them: `served`)."""
    served = served_kinds(cluster, delegation.kinds)
    kinds = OBSERVED_KINDS + provisioning.kinds + tuple(k for k in delegation.kinds if k in served)
    state = observe(cluster.snapshot(), memo, kinds, served)
    decisions = decide(state, now, placer, provisioning, delegation)
    report = apply(cluster, decisions, now)
    _refusals(report, decisions, memo)
    if memo is not None:
        memo.remember(decisions.memory)
        memo.sweep(state.live_groups, lambda: [g.key for g in state.groups], len(state.groups))
    return report


def served_kinds(cluster: Cluster, kinds: tuple[str, ...]) -> frozenset[str]:
    """Which of `kinds` the world serves now (`Discovery.served`): none asked, none read."""
    return frozenset(cluster.served(kinds)) if kinds else frozenset()


# A pass that learns of a refusal, or of its end, is followed by one this soon: it writes
# the group's Degraded condition (nothing else may change to wake one).
REFUSAL_REQUEUE_S = 0.05


def _refusals(report: PassReport, decisions: Decisions, memo: Memo | None) -> None:
    """Remember each decided group's refused writes for the next decision (its Degraded
    condition) and report each refusal once: a line (logged as a warning) the first time,
    then only counted (`report.known`) while the same write keeps being refused."""
    by_group: dict[tuple[str, str], list[Rejection]] = {}
    errors: dict[Rejection, WriteError] = {}
    for error in filter(refused, report.errors):
        namespace, _, name = error.subject.partition("/")
        rejection = Rejection(error.action, error.code, error.reason, error.message)
        by_group.setdefault((namespace, name), []).append(rejection)
        errors[rejection] = error
    if memo is None:
        fresh = [r for rs in by_group.values() for r in rs]
    else:
        decided = [(g.namespace, g.name) for g in decisions.groups if any(not isinstance(a, RecordEvent) for a in g.actions)]
        before = dict(memo.rejected)
        fresh = [r for _, r in memo.remember_rejections(decided, by_group)]
        if memo.rejected != before:
            report.requeue_after = min(report.requeue_after if report.requeue_after is not None else REFUSAL_REQUEUE_S, REFUSAL_REQUEUE_S)
    for rejection, error in errors.items():
        if rejection in fresh:
            report.events.append(str(error))
            report.warnings.append(str(error))
        else:
            report.known.append(error)
