"""Locality inside a unit's domain: as few narrower domains as fit the unit, best fit first.

For every level below the domain being filled, a position (node) is ranked by its domain
at that level, as Kueue's topology-aware scheduling, KAI and Volcano's HyperNode
bin-packing do:

1. domains that already hold a pod of the unit come first, at every level, the broadest
   first (the unit stays together: a host it already uses beats a new host in a
   tighter rack, since the new host is one more domain and the used one is none);
2. then, level by level, the broadest first, domains by how much of what the unit still
   has to place they can hold (`min(room, rest)`, more first): one that holds all of it
   wins, and when none does, the largest is opened, so the unit spans as few domains as
   fit it;
3. then the tightest (least free), so a domain that holds the rest exactly is used
   before a larger one.

At the narrowest level (hosts) step 2 only puts first a host that holds all the rest
(Kueue: "the node that can accommodate all pods"); otherwise hosts go best fit, so
small pods fill fragments and whole hosts stay for the unit's large pods. A pod that
needs none of the unit's dominant resource (a CPU-only router, a CPU-only leader) has
no fit of its own to be best at: it goes, at every level, where the most of the rest
can follow it.

"Room" is what the rest of the unit could take there beside what other units reserve:
on each node its free capacity in the unit's dominant resource, up to the demand of the
pods still to place that may go to that node (`pending_demand`: selectors, taints). A
node only a CPU-only pod may use holds none of the rest, however much it has free.
Every key depends on capacities and eligibility, never on names; what ties on all of
them breaks on the node's class and rack before its name (`ties.py`), so renaming
nodes does not change how many domains a unit spans.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

import numpy as np

from tandem.placement.capacity import member
from tandem.placement.reservations import Reservations
from tandem.placement.space import Space, unique_inverse
from tandem.placement.unit_state import UnitState


class Locality(NamedTuple):
    """What ranks the nodes of one replica's domain (`replica.place_replica`)."""

    inner: int  # the replica's domain depth: locality counts the levels below it
    used: np.ndarray  # nodes holding the unit's pods
    rest: int  # what the unit still has to place, in its dominant resource
    stop: int  # the depth locality stops at (a `to` replica waiting for its `from` side)
    pending: np.ndarray  # `pending_demand` over the space's positions
    reservations: Reservations | None  # what other units reserve, if anything
    crowds: np.ndarray | None = None  # positions where a pod would crowd out another role (`replica._crowds_out`)
    others: np.ndarray | None = None  # positions holding another unit's pods of this plan


def unit_nodes(unit: UnitState, fresh: Mapping[int, list[list[int]]]) -> np.ndarray:
    """Nodes holding the unit's pods: committed ones and those of the gang being placed."""
    nodes = unit.nodes() + [n for replicas in fresh.values() for replica in replicas for n in replica]
    return np.array(nodes, dtype=np.int64)


def pending_demand(unit: UnitState, space: Space, remaining: Mapping[int, int]) -> np.ndarray:
    """[space positions]: demand in the dominant resource of the replicas still to place
    (`remaining`: role index -> replicas) whose pods may go to each node."""
    dominant = unit.dominant
    # Demand per eligibility mask first (roles of one shape share one mask array), so
    # each mask is read over the space once.
    by_mask: dict[int, tuple[np.ndarray, int]] = {}
    for r, count in remaining.items():
        role = unit.roles[r]
        if count <= 0:
            continue
        leader, worker = int(role.leader[dominant]), int(role.worker[dominant])
        for mask, amount in ((role.leader_ok, count * leader), (role.worker_ok, count * (role.pods - 1) * worker if role.pods > 1 else 0)):
            if amount:
                before = by_mask.get(id(mask), (mask, 0))[1]
                by_mask[id(mask)] = (mask, before + amount)
    out: np.ndarray | None = None
    for mask, amount in by_mask.values():
        here = amount * mask[space.nodes]  # (int64: the amount is a Python int)
        out = here if out is None else np.add(out, here, out=out)
    return np.zeros(space.nodes.size, np.int64) if out is None else out


def locality_keys(
    unit: UnitState,
    space: Space,
    depths: range,
    used_nodes: np.ndarray,
    rest: int,
    pending: np.ndarray,
    positions: np.ndarray | None = None,
    follow: bool = False,
    reservations: Reservations | None = None,
) -> list[np.ndarray]:
    """Sort keys, most significant first, for each depth in `depths`: over the space's
    positions, or over `positions` only (the domains counted are then theirs alone).

    `pending` is `pending_demand` over the space's positions; `follow` ranks the
    narrowest level as the broader ones (for a pod that needs none of the dominant
    resource: where the most of the rest can follow). What other units reserve in a
    domain (`reservations`) is not room for this one."""
    if not depths:
        return []  # (a `to` replica's rule level stops locality before the first level)
    view = unit.view
    free = space.free[:, unit.dominant] if positions is None else space.free[:, unit.dominant][positions]  # (column first: far cheaper)
    take = np.minimum(free, pending if positions is None else pending[positions])
    used_keys: list[np.ndarray] = []
    room_keys: list[np.ndarray] = []
    for depth in depths:
        compact, inverse = _grouped(unit, space, depth, positions)
        if inverse is None:
            # One node a domain (hosts): the node's own figures, nothing to sum.
            room, size = take, free
        else:
            room = np.bincount(inverse, weights=take, minlength=compact.size)
            size = np.bincount(inverse, weights=free, minlength=compact.size)
        reserved = reservations.by_others(unit, depth, compact) if reservations else None
        if reserved is not None:
            room = room - reserved
        used = member(compact, view.dom[depth][used_nodes], view.domain_count(depth)) if used_nodes.size else None
        if inverse is not None:
            room, size = room[inverse], size[inverse]
            used = None if used is None else used[inverse]
        if used is not None:
            used_keys.append(~used)
        if depth == view.depth_count - 1 and not follow:
            room_keys += [room < rest, size]
        else:
            room_keys += [-np.minimum(room, rest), size]
    return used_keys + room_keys


def _grouped(unit: UnitState, space: Space, depth: int, positions: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """(domains at `depth`, position -> index into them) over the space's positions, or
    over `positions` only: the space's cached grouping when they are a fair share of it,
    else their own (domains holding none of them sum to nothing either way). Where every
    domain holds one node (hosts) the domains are per position and the index is None."""
    compact, inverse = space.groups(unit.view, depth)
    if compact.size == space.nodes.size:
        return compact[inverse if positions is None else inverse[positions]], None
    if positions is None:
        return compact, inverse
    if positions.size * 8 >= compact.size:
        return compact, inverse[positions]
    return unique_inverse(unit.view.dom[depth][space.nodes[positions]])
