"""Soft reservations (`placement/reservations.py`): what a placed unit still wants."""

from __future__ import annotations

from support.builders import cluster, group, role, world
from tandem.api.naming import GPU_RESOURCE
from tandem.placement.engine import _prepare
from tandem.placement.gang import place_gang
from tandem.placement.reservations import Reservations
from tandem.placement.rollup import Rollups


def _placed(objects):
    snapshot, views, units = world(objects)
    (unit,) = _prepare(snapshot, views, units, {}, Rollups())
    free = snapshot.free.copy()
    assert place_gang(unit, free, unit.minimum_needs())
    return unit, free, views["default"], snapshot.resource_index[GPU_RESOURCE]


def test_a_unit_reserves_no_more_than_its_domain_has_free():
    # Racks of two 8-GPU hosts. The unit (rack-packed) wants 3 × 1 + 4 × 8 = 35 GPUs and
    # its minimum takes 11; its rack has 5 left, so it reserves 5 — not the 24 it still
    # wants, which made its whole block look full to the units after it.
    a = group("a", [role("prefill", 3, 3, gpus=1), role("decode", 4, 1, gpus=8)], required="rack")
    unit, free, view, gpu = _placed(cluster("block=2,rack=2,host=2") + [a])
    reservations = Reservations()
    reservations.note(unit, free)
    rack = unit.domain[1]
    block = int(view.ancestor[unit.domain[0]][1][rack])
    assert int(free[view.members(*unit.domain), gpu].sum()) == 5
    assert reservations.reserved(view, 2, free.shape[1])[rack, gpu] == 5
    assert reservations.reserved(view, 1, free.shape[1])[block, gpu] == 5


def test_a_unit_whose_domain_holds_it_reserves_everything_it_still_wants():
    # Packed by block (32 GPUs, 21 left after its minimum of 11), the unit still wants one
    # more 8-GPU decode: all of it is reserved.
    a = group("a", [role("prefill", 3, 3, gpus=1), role("decode", 2, 1, gpus=8)], required="block")
    unit, free, view, gpu = _placed(cluster("block=2,rack=2,host=2") + [a])
    reservations = Reservations()
    reservations.note(unit, free)
    block = unit.domain[1]
    assert reservations.reserved(view, 1, free.shape[1])[block, gpu] == 8
