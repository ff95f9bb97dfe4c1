"""A required pack at the hostname level on Volcano: no tier names a host, so it is pod affinity.

Volcano's label discoverer makes no HyperNode for a host, and tandem's tiers follow it, so a
unit or a multi-pod replica that must share a host is held there by required pod affinity on
`kubernetes.io/hostname` (plus the tier-1 pack, which every host lies within). Volcano never
splits such pods but places the first without looking ahead: the pack is approximate, and
`validate` says so where (and only where) a group uses it.
"""

from __future__ import annotations

import pytest

from support.builders import cluster, group, role
from tandem.backends.registry import get_backend
from tandem.errors import InputError

from backends.variants import load, typed

PACK_WARNING = "approximates required {what} pack"


def _warned(raw: dict, shape: str = "block=2,rack=2,host=2") -> list[str]:
    topology = load(cluster(shape)).topologies["default"]
    return [f"{w.path}: {w.message}" for w in get_backend("volcano").warnings(typed(raw), topology) if "pack (" in w.message]


def test_only_host_packs_over_several_pods_are_warned_of() -> None:
    raw = group(
        "pd",
        [
            role("prefill", 2, 1, gpus=1, required="host"),  # one pod per replica: nothing to keep
            role("decode", 2, 1, gpus=1, pods=2, required="host"),
            role("router", 2, 1, gpus=1, pods=2, required="rack"),
        ],
        required="block",
    )
    (warning,) = _warned(raw)
    assert warning.startswith("spec.roles[1].topology.pack.required: backend 'volcano' approximates required replica pack")
    assert "pod affinity on kubernetes.io/hostname" in warning

    unit = group("one", [role("prefill", 2, 1, gpus=1)], required="host")
    (warning,) = _warned(unit)
    assert warning.startswith("spec.topology.pack.required: backend 'volcano' approximates required unit pack")
    assert _warned(group("solo", [role("prefill", 1, 1, gpus=1)], required="host")) == []  # a single pod


def test_a_unit_host_pack_is_pod_affinity_among_the_units_pods() -> None:
    inputs = load(cluster("rack=2,host=2"))
    topology = inputs.topologies["default"]
    grp = typed(group("one", [role("prefill", 1, 1, gpus=1), role("decode", 1, 1, gpus=1)], required="host"))
    objects = get_backend("volcano").render(grp, topology, inputs.nodes)
    (podgroup,) = [o for o in objects if o["kind"] == "PodGroup"]
    assert podgroup["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    assert {o["spec"]["tierName"]: o["spec"]["tier"] for o in objects if o["kind"] == "HyperNode"} == {"rack": 1, "cluster": 2}
    for pod in (o for o in objects if o["kind"] == "Pod"):
        assert pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
            {"labelSelector": {"matchLabels": {"tandem.dev/group": "one", "tandem.dev/unit": "0"}}, "topologyKey": "kubernetes.io/hostname"}
        ]


def test_a_hostname_level_above_another_is_refused() -> None:
    """Volcano's label discoverer drops only the last label: a hostname level above another has no meaning."""
    inputs = load(cluster("rack=2,host=2"))
    levels = inputs.topologies["default"].spec.levels
    # built directly: tandem's own validation may refuse a host broader than a rack before Volcano sees it
    topology = inputs.topologies["default"].model_copy(update={"spec": inputs.topologies["default"].spec.model_copy(update={"levels": levels[::-1]})})
    with pytest.raises(InputError, match=r"spec.levels\[0\].nodeLabel: Volcano accepts the kubernetes.io/hostname label only at the lowest level"):
        get_backend("volcano").render_topology(topology, inputs.nodes)
    (problem,) = get_backend("volcano").validate(typed(group("g", [role("prefill", 1, 1, gpus=1)])), topology)
    assert problem.path == "spec.topologyName"
