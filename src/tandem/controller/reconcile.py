"""One level-triggered pass over every InferenceGroup: observe, decide, apply.

    state = observe(cluster.snapshot())      # what changed, from one consistent snapshot
    decisions = decide(state, now, placer)   # pure: actions per group, requeue_after
    report = apply(cluster, decisions)       # writes, group by group

Nothing is kept between passes: the same cluster state and time give the same actions,
and a pass on a settled cluster writes nothing. `report.requeue_after` says when the
next pass is due even if nothing changes (a gang timeout, a backoff, a step timeout).
See `docs/controller.md`.
"""

from __future__ import annotations

from tandem.cluster.ports import Cluster
from tandem.controller.apply import PassReport, WriteError, apply
from tandem.controller.changes import Change
from tandem.controller.decide import Placer, decide
from tandem.controller.memo import Memo
from tandem.controller.observe import OBSERVED_KINDS, observe
from tandem.controller.provisioning import ProvisioningSettings
from tandem.placement import place

__all__ = ["Change", "Memo", "PassReport", "Placer", "WriteError", "reconcile"]


def reconcile(
    cluster: Cluster, now: float, placer: Placer = place, memo: Memo | None = None, provisioning: ProvisioningSettings = ProvisioningSettings()
) -> PassReport:
    """One pass; `placer` is the engine (a baseline can stand in, to compare policies);
    `memo`, kept by the caller across passes, spares re-validating unchanged objects;
    `provisioning`, whether units that do not fit ask for nodes (the world must then serve
    `provisioning.kinds` too)."""
    state = observe(cluster.snapshot(), memo, OBSERVED_KINDS + provisioning.kinds)
    decisions = decide(state, now, placer, provisioning)
    report = apply(cluster, decisions, now)
    if memo is not None:
        memo.remember(decisions.memory)
        memo.sweep(state.live_groups, lambda: [g.key for g in state.groups], len(state.groups))
    return report
