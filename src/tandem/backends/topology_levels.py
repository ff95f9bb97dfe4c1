"""Rules schedulers put on a ClusterTopology's level list, and the level-list `Topology` of KAI and Kueue.

Schedulers keyed by level labels (KAI and Kueue `Topology`) check their rules with CEL,
which an offline schema check does not run, so tandem checks them itself before
rendering: the hostname label may only be the last (narrowest) level, the rule tandem's own
validation also holds every ClusterTopology to (`hostname_above_narrowest`), said here in the
scheduler's words for a topology that did not come through it. Level labels are already
unique (tandem's own validation). Koordinator adds rules of its own on level
names; every such rule finds (level index, why) pairs, reported here one of two ways.
"""

from __future__ import annotations

from typing import Any

from tandem.api.naming import HOSTNAME_LABEL, topology_object_labels
from tandem.api.resources import ClusterTopology
from tandem.api.validation import hostname_above_narrowest
from tandem.errors import InputError, Problem

LevelProblem = tuple[int, str]  # (level index, why)


def level_label_problems(topology: ClusterTopology, scheduler: str) -> list[LevelProblem]:
    """(level index, why) for each level the scheduler's Topology would refuse."""
    levels = topology.spec.levels
    return [
        (index, f"{scheduler} accepts the {HOSTNAME_LABEL} label only at the lowest level, but level {levels[index].name!r} uses it")
        for index in hostname_above_narrowest(topology)
    ]


def group_problems(topology: ClusterTopology, found: list[LevelProblem]) -> list[Problem]:
    """The level problems as a group that uses the topology sees them: at its `spec.topologyName`."""
    name = topology.metadata.name
    return [Problem("spec.topologyName", f"ClusterTopology {name!r}: {why}") for _, why in found]


def refuse_levels(found: list[LevelProblem], field: str) -> None:
    """Raise the level problems against the ClusterTopology itself, at `spec.levels[i].<field>`."""
    if found:
        raise InputError([Problem(f"spec.levels[{index}].{field}", why) for index, why in found])


def level_list_topology(topology: ClusterTopology, api_version: str, scheduler: str) -> dict[str, Any]:
    """The `Topology` of KAI and Kueue alike: the level labels, broadest first, under the
    ClusterTopology's name. Raises InputError when `scheduler` would refuse the list."""
    refuse_levels(level_label_problems(topology, scheduler), "nodeLabel")
    return {
        "apiVersion": api_version,
        "kind": "Topology",
        "metadata": {"name": topology.metadata.name, "labels": topology_object_labels(topology.metadata.name)},
        "spec": {"levels": [{"nodeLabel": level.node_label} for level in topology.spec.levels]},
    }
