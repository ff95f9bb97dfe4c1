"""The status of a ClusterTopology, typed: what `kubectl get ctopo -o yaml` shows.

One owner writes it, the topology controller (`tandem topology-controller`), with a merge
patch of the whole status. It says what the levels hold on the nodes as they are now:
per level the number of domains and of nodes carrying the level's label (and every
broader one), the nodes that lack a label (counted, the first few named: they are
excluded from placement), whether every scheduler topology the controller keeps is up to
date, and which groups use the topology (so a deletion that would strand them is
explained). `levelNames` and `domainCounts` are one-line texts for the printer columns
(a JSONPath column cannot join a list).

Empty is absent, as in the group's status: the CRD gives no defaults under `status`, so
what the server stores is exactly what was written and a settled topology compares equal.
"""

from __future__ import annotations

from pydantic import Field

from tandem.api.base import StrictModel
from tandem.api.group_status import Condition, Count

EXAMPLES = 5  # nodes named per count of unlabeled nodes; the rest are only counted
USERS_LISTED = 20  # groups named in `usedBy`; the rest are only counted


class LevelStatus(StrictModel):
    """One level on the current nodes."""

    name: str
    node_label: str
    domains: Count = 0  # distinct domains of this level (a value under two parents is two domains)
    nodes: Count = 0  # nodes carrying this level's label and every broader level's
    unlabeled_nodes: Count = 0  # nodes carrying every broader level's label but not this one
    unlabeled_examples: list[str] = Field(default_factory=list, max_length=EXAMPLES)  # sorted, the first few


class ClusterTopologyStatus(StrictModel):
    observed_generation: Count = 0
    nodes: Count = 0  # every node the controller sees
    placeable_nodes: Count = 0  # nodes carrying every level's label (the others are excluded from placement)
    unlabeled_nodes: Count = 0  # nodes lacking at least one level's label
    unlabeled_examples: list[str] = Field(default_factory=list, max_length=EXAMPLES)
    levels: list[LevelStatus] = Field(default_factory=list)  # broadest first, as in the spec
    level_names: str = ""  # "block/rack/host"
    domain_counts: str = ""  # "4/64/65536", one count per level in the same order
    backends: list[str] = Field(default_factory=list)  # the schedulers whose topology objects are kept for it
    used_by: list[str] = Field(default_factory=list, max_length=USERS_LISTED)  # "namespace/name" of groups naming it
    used_by_count: Count = 0
    conditions: list[Condition] = Field(default_factory=list)  # Ready, Degraded
