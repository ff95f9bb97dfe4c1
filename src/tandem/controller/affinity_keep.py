"""Which replicas a coordination step deletes: none that a Required affinity leans on, when an equal one can go.

The planners (`tandem.coordination`) count, they do not see nodes: a side that shrinks
loses its least advanced replicas, then the highest indices (`model.surplus`). When a
role is the `to` side of a Required affinity, that choice can take away the only
replica of the role in a `from` replica's domain (a rolling update's drain leaving a
prefill replica in a rack without its decode), and the engine moves no running replica,
so the affinity stays broken. Here each such delete is swapped for another replica of
the same role, phase and side of the update (the current revision or not) whose
deletion keeps every affinity that held: the counts and the order of advancement the
planner chose stay as they were. When no such replica exists the delete stands.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.cluster.payloads import PodPayload
from tandem.cluster.pods import assigned_node, pod_failed
from tandem.cluster.ports import Object
from tandem.coordination.model import Decision, Delete, Replica

ReplicaKey = tuple[str, int]  # (role, replica index)
DomainOf = Callable[[str, str], str | None]  # (node name, level) -> the node's domain at that level


def keep_affinities(
    group: InferenceGroup,
    revision: str,
    decision: Decision,
    replicas: list[Replica],
    pods_of: Mapping[ReplicaKey, list[PodPayload]],
    domain_of: DomainOf,
) -> Decision:
    """`decision` with its deletes swapped so that no Required affinity that held breaks."""
    rules = [a for a in group.spec.affinity if a.mode == "Required"]
    if not rules or not decision.delete:
        return decision
    live = {(r.role, r.index): r for r in replicas if r.phase != "Failed"}
    nodes = {key: [n for n in (assigned_node(p) for p in pods_of.get(key, []) if not pod_failed(p)) if n] for key in live}

    def broken(gone: set[ReplicaKey]) -> set[tuple[int, ReplicaKey]]:
        """(rule, `from` replica) pairs with no `to` replica in the rule's domain."""
        out = set()
        for number, rule in enumerate(rules):
            def near(key: ReplicaKey) -> set[str]:
                return {d for d in (domain_of(n, rule.level) for n in nodes[key]) if d is not None}

            targets = set().union(*(near(k) for k in live if k[0] == rule.to and k not in gone))
            for key in live:
                if key[0] == rule.from_ and key not in gone and near(key) and not near(key) & targets:
                    out.add((number, key))
        return out

    held = broken(set())
    leaned_on = {rule.to for rule in rules}
    deletes = list(decision.delete)
    gone = {(d.role, d.index) for d in deletes}
    for position, delete in enumerate(deletes):
        key = (delete.role, delete.index)
        if delete.role not in leaned_on or key not in live or broken(gone) <= held:
            continue
        leaving = live[key]
        for other in sorted(live.values(), key=lambda r: r.index):
            swap = (other.role, other.index)
            if (other.role != delete.role or swap in gone or other.phase != leaving.phase
                    or (other.revision == revision) != (leaving.revision == revision)):
                continue
            trial = (gone - {key}) | {swap}
            if broken(trial) <= held:
                deletes[position] = Delete(other.role, other.index, delete.why)
                gone = trial
                break
    return dataclasses.replace(decision, delete=tuple(deletes))


def domains_in(nodes: Mapping[tuple[str, str], Object], topology: ClusterTopology | None) -> DomainOf:
    """A node's domain at a level of `topology`: its value of the level's node label."""
    labels = {level.name: level.node_label for level in topology.spec.levels} if topology is not None else {}

    def domain_of(node: str, level: str) -> str | None:
        label = labels.get(level)
        if label is None:
            return None
        return ((nodes.get(("", node)) or {}).get("metadata", {}).get("labels") or {}).get(label)

    return domain_of
