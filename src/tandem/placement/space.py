"""The nodes a gang or a replica is being placed into, with a private copy of their free
capacity, and the grouping of their positions by domain."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tandem.topology import ClusterSnapshot, TopologyView


@dataclass
class Space:
    """Nodes being placed into, with a private copy of their free capacity.

    Masks and positions used while placing are over `nodes` (0..len-1); `nodes` maps a
    position back to the snapshot's node index.
    """

    nodes: np.ndarray
    free: np.ndarray
    _groups: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)
    _before: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, nodes: np.ndarray, free: np.ndarray) -> "Space":
        return cls(nodes, free.take(nodes, axis=0))  # (a copy; `take`: far cheaper than indexing rows)

    def copy(self) -> "Space":
        return Space(self.nodes, self.free.copy(), self._groups, self._before)

    def groups(self, view: TopologyView, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """(domain ids, position -> index into them) of the space's nodes at `depth`."""
        if depth not in self._groups:
            self._groups[depth] = unique_inverse(view.dom[depth][self.nodes])
        return self._groups[depth]

    def before(self, snapshot: ClusterSnapshot, column: int) -> np.ndarray:
        """Free capacity in resource `column` of the space's nodes before this plan."""
        if column not in self._before:
            self._before[column] = np.maximum(snapshot.allocatable[self.nodes, column] - snapshot.used[self.nodes, column], 0)
        return self._before[column]


# Up to this many values, `unique_inverse` sorts in Python: np.unique costs more in call
# overhead than a few dozen values take to sort.
_SMALL_UNIQUE = 32


def unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(values, return_inverse=True)` for a 1-D integer array, the same arrays;
    a replica's space is a rack of a few dozen nodes, and a new space asks this per level."""
    if values.size > _SMALL_UNIQUE:
        return np.unique(values, return_inverse=True)
    items = values.tolist()
    compact = sorted(set(items))
    if len(compact) == 1:
        inverse = np.zeros(len(items), dtype=np.intp)  # one domain (a rack's nodes at rack level)
    elif compact == items:
        inverse = np.arange(len(items), dtype=np.intp)  # ascending and distinct (hosts)
    else:
        index = {value: i for i, value in enumerate(compact)}
        inverse = np.array([index[value] for value in items], dtype=np.intp)
    return np.array(compact, dtype=values.dtype), inverse
