"""Rules that schedulers keyed by level labels (KAI and Kueue `Topology`) put on the level list.

Their CRDs check these with CEL rules, which an offline schema check does not run, so
tandem checks them itself before rendering: the hostname label may only be the last
(narrowest) level. Level labels are already unique (tandem's own validation).
"""

from __future__ import annotations

from tandem.api.resources import ClusterTopology

HOSTNAME = "kubernetes.io/hostname"


def level_label_problems(topology: ClusterTopology, scheduler: str) -> list[tuple[int, str]]:
    """(level index, why) for each level the scheduler's Topology would refuse."""
    levels = topology.spec.levels
    return [
        (index, f"{scheduler} accepts the {HOSTNAME} label only at the lowest level, but level {level.name!r} uses it")
        for index, level in enumerate(levels[:-1])
        if level.node_label == HOSTNAME
    ]
