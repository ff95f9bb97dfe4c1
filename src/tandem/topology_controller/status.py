"""The status of one ClusterTopology, as a pure function of what a pass observed.

Per level the domains and nodes on the current nodes, the nodes lacking a level's label
(counted, the first few named), the backends whose objects are kept for it, the groups
naming it, and two conditions (`metav1.Condition`):
- Ready: True when the controller could read the topology and keeps it; False with
  reason InvalidSpec (it does not pass tandem's checks: the problems, with field paths)
  or DeletionBlocked (deletion was asked while groups name it: the groups).
- Degraded: True when something is not as a user would want, each with its reason
  (the first gives the condition's reason, every one is in the message):
  DeletionBlocked, WriteRefused (the API refused a write for good: its words),
  BackendRefused, ForeignHyperNodes, KoordinatorTopologyTaken, NameTaken,
  ResourceFlavorRefused, UnlabeledNodes.
A condition's lastTransitionTime moves only when its status does; observedGeneration is
the topology's generation. The result validates as `ClusterTopologyStatus`; empty is
absent, so a settled topology's status compares equal to what is stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal, Mapping, Sequence

from tandem.api.group_status import Condition
from tandem.api.timestamps import rfc3339
from tandem.api.topology_status import EXAMPLES, USERS_LISTED, ClusterTopologyStatus, LevelStatus
from tandem.topology_controller.node_paths import LevelCounts

READY, DEGRADED = "Ready", "Degraded"
# The order reasons are told in: the first present gives Degraded's reason.
REASONS = (
    "DeletionBlocked",
    "InvalidSpec",
    "WriteRefused",
    "BackendRefused",
    "ForeignHyperNodes",
    "KoordinatorTopologyTaken",
    "NameTaken",
    "ResourceFlavorRefused",
    "UnlabeledNodes",
)
MESSAGE_LIMIT = 1024


@dataclass(frozen=True)
class Finding:
    """One reason the topology is Degraded, in words."""

    reason: str
    message: str


def unlabeled_finding(counts: LevelCounts, levels: Sequence[tuple[str, str]]) -> Finding | None:
    """UnlabeledNodes: how many nodes lack a level's label, the first few named, per level."""
    if not counts.total - counts.placeable:
        return None
    parts = [
        f"{count} lack {label} ({name}): {', '.join(examples)}{', ...' if count > len(examples) else ''}"
        for (name, label), count, examples in zip(levels, counts.unlabeled, counts.examples)
        if count
    ]
    return Finding("UnlabeledNodes", f"{counts.total - counts.placeable} of {counts.total} nodes are excluded from placement: " + "; ".join(parts))


def topology_status(
    raw: Mapping[str, Any],
    levels: Sequence[tuple[str, str]] | None,
    counts: LevelCounts | None,
    nodes: int,
    users: Sequence[str],
    backends: Sequence[str],
    findings: Iterable[Finding],
    now: float,
) -> dict[str, Any]:
    """The status to store. `levels`: (name, nodeLabel) broadest first, None for a topology
    that does not pass tandem's checks (then `findings` holds InvalidSpec); `users`: the
    groups naming it, "namespace/name", sorted."""
    meta = raw.get("metadata") or {}
    generation = int(meta.get("generation") or 0)
    previous = _conditions((raw.get("status") or {}).get("conditions"))
    ordered = sorted(findings, key=lambda f: (REASONS.index(f.reason) if f.reason in REASONS else len(REASONS), f.message))
    blocked = next((f for f in ordered if f.reason in ("DeletionBlocked", "InvalidSpec")), None)
    ready = _condition(previous, READY, blocked is None, "Observed" if blocked is None else blocked.reason,
                       "levels, domains and nodes are current" if blocked is None else blocked.message, now, generation)
    degraded = _condition(previous, DEGRADED, bool(ordered), ordered[0].reason if ordered else "AsExpected",
                          _join(f.message for f in ordered), now, generation)
    status = ClusterTopologyStatus(
        observed_generation=generation,
        nodes=nodes,
        placeable_nodes=0 if counts is None else counts.placeable,
        unlabeled_nodes=0 if counts is None else counts.total - counts.placeable,
        unlabeled_examples=[] if counts is None else list(counts.unlabeled_examples[:EXAMPLES]),
        levels=[] if levels is None or counts is None else [
            LevelStatus(name=name, node_label=label, domains=domains, nodes=count, unlabeled_nodes=unlabeled, unlabeled_examples=list(examples[:EXAMPLES]))
            for (name, label), domains, count, unlabeled, examples in zip(levels, counts.domains, counts.nodes, counts.unlabeled, counts.examples)
        ],
        level_names="" if levels is None else "/".join(name for name, _ in levels),
        domain_counts="" if counts is None else "/".join(str(d) for d in counts.domains),
        backends=sorted(backends),
        used_by=list(users[:USERS_LISTED]),
        used_by_count=len(users),
        conditions=[ready, degraded],
    )
    dumped = status.model_dump(by_alias=True, exclude_defaults=True, mode="json")
    if counts is not None:  # the counts the printer columns show say 0, not a blank
        dumped.update(nodes=status.nodes, placeableNodes=status.placeable_nodes, unlabeledNodes=status.unlabeled_nodes)
    dumped["conditions"] = [c.model_dump(by_alias=True, mode="json") for c in status.conditions]
    if "levels" in dumped:
        dumped["levels"] = [level.model_dump(by_alias=True, exclude_defaults=True, mode="json") for level in status.levels]
    return dumped


def status_patch(stored: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch `{"status": ...}` taking the stored status to `wanted` (keys gone
    set to null), or None when they are equal."""
    stored = dict(stored or {})
    if stored == dict(wanted):
        return None
    body: dict[str, Any] = {key: value for key, value in wanted.items() if stored.get(key) != value}
    body.update({key: None for key in stored if key not in wanted})
    return {"status": body}


def _conditions(raw: Any) -> list[Condition]:
    out = []
    for item in raw if isinstance(raw, list) else ():
        try:
            out.append(Condition.model_validate(item))
        except ValueError:
            continue  # an unreadable condition is written afresh
    return out


def _condition(previous: list[Condition], kind: str, value: bool, reason: str, message: str, now: float, generation: int) -> Condition:
    status: Literal["True", "False"] = "True" if value else "False"
    before = next((c for c in previous if c.type == kind), None)
    since = before.last_transition_time if before is not None and before.status == status else rfc3339(now)
    return Condition(type=kind, status=status, reason=reason, message=message, last_transition_time=since, observed_generation=generation)


def _join(messages: Iterable[str]) -> str:
    text = "; ".join(messages)
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"
