"""Soft reservations (`placement/reservations.py`): what a placed unit still wants."""

from __future__ import annotations

from support.builders import cluster, group, role, world
from tandem.api.naming import GPU_RESOURCE
from tandem.placement.engine import _prepare
from tandem.placement.gang import place_gang
from tandem.placement.reservations import Reservations
from tandem.placement.rollup import Rollups
from tandem.placement.unit_state import ShapeCache


def _reserved_gpus(group_manifest) -> tuple[int, int, int]:
    """(GPUs free in the unit's domain, GPUs reserved there, GPUs reserved in its block)
    once the single unit of `group_manifest` has its minimum placed on racks of two 8-GPU
    hosts, blocks of two racks, and is noted."""
    snapshot, views, units = world(cluster("block=2,rack=2,host=2") + [group_manifest])
    (unit,), context = _prepare(snapshot, views, units, ShapeCache(), Rollups())
    free = snapshot.free.copy()
    assert place_gang(context, unit, free, unit.minimum_needs())
    reservations = Reservations()
    reservations.note(unit, free)
    view, gpu, (depth, domain) = views["default"], snapshot.resource_index[GPU_RESOURCE], unit.domain
    block = int(view.ancestor[depth][1][domain])
    return (
        int(free[view.members(depth, domain), gpu].sum()),
        int(reservations.reserved(view, depth, free.shape[1])[domain, gpu]),
        int(reservations.reserved(view, 1, free.shape[1])[block, gpu]),
    )


def test_a_unit_reserves_no_more_than_its_domain_has_free():
    # Rack-packed, the unit wants 3 × 1 + 4 × 8 = 35 GPUs and its minimum takes 11; its
    # rack has 5 left, so it reserves 5 — not the 24 it still wants, which made its whole
    # block look full to the units after it.
    a = group("a", [role("prefill", 3, 3, gpus=1), role("decode", 4, 1, gpus=8)], required="rack")
    assert _reserved_gpus(a) == (5, 5, 5)


def test_a_unit_whose_domain_has_room_reserves_everything_it_still_wants():
    # Block-packed (32 GPUs, 21 left after its minimum of 11), the unit still wants one
    # more 8-GPU decode: all of it is reserved.
    a = group("a", [role("prefill", 3, 3, gpus=1), role("decode", 2, 1, gpus=8)], required="block")
    assert _reserved_gpus(a) == (21, 8, 8)
