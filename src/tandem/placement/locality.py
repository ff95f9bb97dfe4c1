"""Locality inside a unit's domain: as few narrower domains as fit the unit, best fit first.

For every level below the domain being filled, a position (node) is ranked by its domain
at that level, broadest level first, as Kueue's topology-aware scheduling, KAI and
Volcano's HyperNode bin-packing do:

1. domains that already hold a pod of the unit come first (the unit stays together);
2. then domains by how much of what the unit still has to place they can hold
   (`min(room, rest)`, more first): one that holds all of it wins, and when none does,
   the largest is opened, so the unit spans as few domains as fit it;
3. then the tightest (least room), so a domain that holds the rest exactly is used
   before a larger one.

At the narrowest level (hosts) step 2 only puts first a host that holds all the rest
(Kueue: "the node that can accommodate all pods"); otherwise hosts go best fit, so
small pods fill fragments and whole hosts stay for the unit's large pods.

Room is counted in the unit's dominant resource on the space's nodes, which are the
nodes that can take a pod of the unit. Every key depends on capacities, never on names,
so renaming nodes does not change how many domains a unit spans.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from tandem.placement.state import Space, UnitState


def unit_nodes(unit: UnitState, fresh: Mapping[int, list[list[int]]]) -> np.ndarray:
    """Nodes holding the unit's pods: committed ones and those of the gang being placed."""
    nodes = unit.nodes() + [n for replicas in fresh.values() for replica in replicas for n in replica]
    return np.array(nodes, dtype=np.int64)


def locality_keys(
    unit: UnitState, space: Space, depths: range, used_nodes: np.ndarray, rest: int, positions: np.ndarray | None = None
) -> list[np.ndarray]:
    """Sort keys, most significant first, for each depth in `depths`: over the space's
    positions, or over `positions` only (the domains counted are then theirs alone)."""
    view = unit.view
    column = space.free[:, unit.dominant] if positions is None else space.free[positions, unit.dominant]
    keys: list[np.ndarray] = []
    for depth in depths:
        if positions is None:
            compact, inverse = space.groups(view, depth)
        else:
            compact, inverse = np.unique(view.dom[depth][space.nodes[positions]], return_inverse=True)
        room = np.bincount(inverse, weights=column, minlength=compact.size)
        if used_nodes.size:
            used = np.isin(compact, view.dom[depth][used_nodes])
        else:
            used = np.zeros(compact.size, dtype=bool)
        if depth == view.depth_count - 1:
            keys += [~used[inverse], (room < rest)[inverse], room[inverse]]
        else:
            keys += [~used[inverse], -np.minimum(room, rest)[inverse], room[inverse]]
    return keys
