"""Ties between nodes break on what the nodes are to this plan, and only then on names.

Every ranking in the engine ends on a number, and node numbers (and host domain numbers)
follow node names. Two nodes tied on every capacity, locality and affinity key are not
always interchangeable: one may be tainted, or carry a label that some pod of the plan
selects. Which of the two a pod takes then decides whether a later pod fits, or how
many hosts a unit spans — and renaming the nodes changed the answer.

So before the number come the node's *class* in this plan — which pod shapes of the
plan may use it (selectors, tolerations, schedulability), the node that fewer of them
may use first: a pod that can go anywhere leaves the versatile node to the pods that
cannot — and the domain it sits in one level up (its rack), whose number follows the
rack's name. Nodes of one class in one rack with the same free capacity are
interchangeable for every pod of the plan, so the name that finally breaks their tie
changes no unit's state and no domain count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tandem.topology import TopologyView

# Shapes beyond this many (distinct eligibility masks in one plan) share the last bit.
_SHAPE_BITS = 56


@dataclass
class Ties:
    """The class of every node in one plan, and how ties between nodes and hosts break."""

    node_class: np.ndarray  # [nodes] int64: (how many shapes may use it) << 56 | which ones

    @classmethod
    def of(cls, masks: Sequence[np.ndarray], size: int) -> "Ties":
        """From the eligibility masks of every pod shape of the plan, in unit order."""
        distinct: list[np.ndarray] = []
        for mask in masks:
            if any(mask is seen for seen in distinct):
                continue
            if mask.any() and not any(np.array_equal(mask, seen) for seen in distinct):
                distinct.append(mask)
        if len(distinct) <= 1:
            return cls(distinct[0].astype(np.int64) if distinct else np.zeros(size, np.int64))  # the same order
        count = np.zeros(size, np.int64)
        bits = np.zeros(size, np.int64)
        for k, mask in enumerate(distinct):
            count += mask
            bits |= mask.astype(np.int64) << min(k, _SHAPE_BITS - 1)
        return cls((np.minimum(count, 127) << _SHAPE_BITS) | bits)

    @classmethod
    def none(cls, size: int) -> "Ties":
        """Every node of one class: ties break on numbers (a unit placed on its own)."""
        return cls(np.zeros(size, np.int64))

    def node_keys(self, view: TopologyView, nodes: np.ndarray) -> tuple[np.ndarray, ...]:
        """Sort keys (least significant first, for np.lexsort) that go just before the
        node number: the node's class, then the domain it sits in one level up (a rack's
        number follows the rack's name, which renaming a node does not change)."""
        parent = view.depth_count - 2
        if parent < 1:
            return (self.node_class[nodes],)
        return (self.node_class[nodes], view.dom[parent][nodes])

    def domain_keys(self, view: TopologyView, depth: int, domains: np.ndarray) -> tuple[np.ndarray, ...]:
        """The same for domains at `depth`: for hosts (domains of the narrowest level,
        numbered by node name) the keys of their node; none above."""
        if depth != view.depth_count - 1 or domains.size == 0:
            return ()
        return self.node_keys(view, view.node_of_domain(depth)[domains])
