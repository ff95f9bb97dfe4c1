"""What a topology pass keeps for the next, passed in explicitly (no module state).

A pass without one decides the same, only slower, but for the writes the API refused
before: not knowing them, it sends them again. It keeps:
- the cluster as last observed (`tandem.cluster.index.ClusterIndex`): each pass reads only
  the objects the world says changed;
- per tuple of level labels in use, the nodes' paths (`NodePaths`), told of every node
  that changed;
- the parsed ClusterTopologies, by uid and resourceVersion;
- each backend's rendering per ClusterTopology, by its name, uid, levels and the set of
  full node paths (`NodePaths.full_serial`): a node added to an existing rack renders
  nothing again;
- the writes the API refused (`refusal_gate.py`), which the next decision holds back.
Bounded by what exists: entries of topologies and label tuples no longer in use go.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, TypeVar

from tandem.cluster.index import ClusterIndex
from tandem.topology_controller.kinds import NodeKeys
from tandem.topology_controller.node_paths import NodePaths
from tandem.topology_controller.refusal import Refusal, RefusalTarget

T = TypeVar("T")


@dataclass
class TopologyMemo:
    index: ClusterIndex = field(default_factory=ClusterIndex)
    paths: dict[NodeKeys, NodePaths] = field(default_factory=dict)  # per (labels, presence-only labels)
    parsed: dict[str, tuple[Hashable, Any]] = field(default_factory=dict)  # topology name -> ((uid, rv), parse)
    rendered: dict[tuple[str, str], tuple[Hashable, NodePaths, Any]] = field(default_factory=dict)  # (backend, topology) -> (key, paths, result)
    renders: int = 0  # renderer calls (a test and the benchmark read it)
    # Each backend kind's objects split into tandem's and everyone else's, by name, kept
    # up to date from the changes observe sees (kind -> (tandem's, others')).
    split: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)
    # Objects found as wanted, by (kind, name): (the wanted object, the stored one), both as
    # read then; while both are these very objects, the pair is not compared again.
    in_step: dict[tuple[str, str], tuple[Any, Any]] = field(default_factory=dict)
    kind_serial: dict[str, int] = field(default_factory=dict)  # moves with every change seen of the kind
    converged: tuple[Any, ...] | None = None  # (key, renderings, result) of decide's last convergence
    # The writes the API refused for good (refusal_gate.py): unlike the rest, not a saving but a
    # fact only apply learns; the next decision holds those writes back and tells them in the
    # status. Replaced after every pass by those whose write was decided again (an empty memo
    # forgets them: each is sent, and refused, once more).
    refused: dict[RefusalTarget, Refusal] = field(default_factory=dict)

    def render(self, backend: str, topology: str, key: Hashable, source: NodePaths, compute: Callable[[], T]) -> T:
        """The rendering kept for this key and these very node paths, else `compute()`."""
        kept = self.rendered.get((backend, topology))
        if kept is not None and kept[0] == key and kept[1] is source:
            value: T = kept[2]
            return value
        self.renders += 1
        fresh = compute()
        self.rendered[(backend, topology)] = (key, source, fresh)
        return fresh

    def previous(self, backend: str, topology: str) -> Any:
        """The last rendering of `backend` for `topology`, whatever its key (None: none)."""
        kept = self.rendered.get((backend, topology))
        return None if kept is None else kept[2]

    def keep_only(self, topologies: set[str], keys: set[NodeKeys]) -> None:
        """Forget what is about topologies and level-label tuples no longer in use."""
        self.paths = {k: v for k, v in self.paths.items() if k in keys}
        self.parsed = {k: v for k, v in self.parsed.items() if k in topologies}
        self.rendered = {k: v for k, v in self.rendered.items() if k[1] in topologies}

    def agreed(self, target: tuple[str, str], wanted: Any, stored: Any) -> bool:
        kept = self.in_step.get(target)
        return kept is not None and kept[0] is wanted and kept[1] is stored
