"""Hypothesis strategies: random clusters (with faults and bound pods) and random groups.

Every drawn world is valid input by construction (pack levels nest, minimums <= replicas),
so properties are checked on the engine, not on the validator.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from support.builders import GPU, bound_pod, container
from tandem.topology.generate import generate_cluster

LEVELS = ["block", "rack", "host"]
ROLE_NAMES = ["prefill", "decode", "router"]


@st.composite
def worlds(draw: st.DrawFn, max_groups: int = 3) -> list[dict[str, Any]]:
    depth = draw(st.integers(1, 3))
    names = LEVELS[-depth:]
    counts = [draw(st.integers(1, 3)) for _ in range(depth - 1)] + [draw(st.integers(1, 4))]
    gpus = draw(st.sampled_from([2, 4, 8]))
    topology, nodes = generate_cluster(list(zip(names, counts)), gpus)
    for node in nodes:
        fault = draw(st.integers(0, 24))
        if fault == 0:
            node["spec"]["unschedulable"] = True
        elif fault == 1:
            node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
        elif fault == 2:
            node["spec"]["taints"] = [{"key": "maintenance", "effect": "NoSchedule"}]
        elif fault == 3 and depth > 1:
            del node["metadata"]["labels"][topology["spec"]["levels"][0]["nodeLabel"]]
        elif fault in (4, 5):
            node["metadata"]["labels"]["pool"] = "a"
    pods = []
    for i in range(draw(st.integers(0, len(nodes)))):
        node = draw(st.sampled_from(nodes))
        pods.append(bound_pod(f"busy-{i}", node["metadata"]["name"], draw(st.integers(1, gpus))))
    groups = [_group(draw, f"g{i}", names) for i in range(draw(st.integers(1, max_groups)))]
    return [topology, *nodes, *pods, *groups]


def _level_at_or_below(draw: st.DrawFn, names: list[str], broadest: int) -> str | None:
    """None or a level at depth >= broadest (equal or narrower)."""
    choice = draw(st.integers(broadest - 1, len(names) - 1))
    return None if choice < broadest else names[choice]


def _group(draw: st.DrawFn, name: str, names: list[str]) -> dict[str, Any]:
    unit_required = _level_at_or_below(draw, names, 0)
    unit_floor = names.index(unit_required) if unit_required else 0
    unit_preferred = _level_at_or_below(draw, names, unit_floor)
    role_count = draw(st.integers(1, 3))
    roles = []
    for r in range(role_count):
        replicas = draw(st.integers(0, 4))
        minimum = draw(st.integers(0, replicas))
        pods = draw(st.integers(1, 3))
        required = _level_at_or_below(draw, names, unit_floor) if unit_required else _level_at_or_below(draw, names, 0)
        floor = names.index(required) if required else unit_floor
        preferred = _level_at_or_below(draw, names, floor)
        template_spec: dict[str, Any] = {"containers": [container(draw(st.sampled_from([0, 1, 2, 4, 8])), cpu="1")]}
        if draw(st.integers(0, 15)) == 0:
            template_spec["containers"][0]["resources"]["requests"]["example.com/fpga"] = "1"
        if draw(st.integers(0, 5)) == 0:
            template_spec["tolerations"] = [{"key": "maintenance", "operator": "Exists"}]
        if draw(st.integers(0, 7)) == 0:
            template_spec["nodeSelector"] = {"pool": "a"}
        role: dict[str, Any] = {
            "name": ROLE_NAMES[r],
            "replicas": replicas,
            "minReplicas": minimum,
            "podsPerReplica": pods,
            "template": {"spec": template_spec},
        }
        if pods > 1 and draw(st.booleans()):
            role["workerTemplate"] = {"spec": {"containers": [container(draw(st.sampled_from([0, 1, 2, 4])))]}}
        pack = {k: v for k, v in (("required", required), ("preferred", preferred)) if v}
        if pack:
            role["topology"] = {"pack": pack}
        roles.append(role)
    affinity = []
    if role_count >= 2 and draw(st.booleans()):
        # A Required rule towards a role with no replicas is invalid input (validate rejects it).
        modes = ["Required", "Preferred"] if roles[1]["replicas"] or not roles[0]["replicas"] else ["Preferred"]
        affinity.append(
            {
                "from": ROLE_NAMES[0],
                "to": ROLE_NAMES[1],
                "level": draw(st.sampled_from(names)),
                "mode": draw(st.sampled_from(modes)),
            }
        )
    spec: dict[str, Any] = {
        "replicas": draw(st.integers(1, 3)),
        "priority": draw(st.integers(0, 2)),
        "roles": roles,
        "affinity": affinity,
    }
    pack = {k: v for k, v in (("required", unit_required), ("preferred", unit_preferred)) if v}
    if pack:
        spec["topology"] = {"pack": pack}
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "metadata": {"name": name, "namespace": "ns"}, "spec": spec}


__all__ = ["GPU", "worlds"]
