"""Property: no stand-in ever binds part of a gang's minimum, or more than a node holds."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from schedulers.helpers import (Store, kai_group, kai_pod, koord_group, koord_pod, kueue_pod, node, pod, pod_group, volcano_group, volcano_pod,
                                wa_pod, workload)
from support.fuzz import examples
from tandem.api.quantity import parse_quantity

BACKENDS = ["volcano", "kai", "koordinator", "kueue", "workload-api"]


@st.composite
def worlds(draw: Any) -> tuple[Store, dict[str, tuple[int, list[str]]]]:
    """Nodes, and gangs of every backend (each: its minimum and pod names), plus plain pods."""
    nodes = [node(f"n-{i}", gpus=draw(st.sampled_from([0, 2, 4, 8])), ready=draw(st.booleans()) or i == 0) for i in range(draw(st.integers(1, 4)))]
    pods: list[dict] = []
    gangs: dict[str, list[dict]] = {b: [] for b in BACKENDS}
    minimums: dict[str, tuple[int, list[str]]] = {}
    for g in range(draw(st.integers(1, 5))):
        backend = draw(st.sampled_from(BACKENDS))
        size = draw(st.integers(1, 4))
        minimum = draw(st.integers(1, size))
        gpus = [draw(st.sampled_from([1, 2, 4, 8])) for _ in range(size)]
        name = f"g{g}"
        names = [f"{name}-{i}" for i in range(size)]
        if backend == "volcano":
            gangs[backend].append(volcano_group(name, minimum))
            pods += [volcano_pod(n, name, gpus=q) for n, q in zip(names, gpus)]
        elif backend == "kai":
            gangs[backend].append(kai_group(name, minimum, [{"name": "r"}, {"name": "r.0", "parent": "r", "minMember": minimum}]))
            pods += [kai_pod(n, name, "r.0", gpus=q) for n, q in zip(names, gpus)]
        elif backend == "koordinator":
            gangs[backend].append(koord_group(name, minimum))
            pods += [koord_pod(n, name, gpus=q) for n, q in zip(names, gpus)]
        elif backend == "kueue":
            minimum = size  # Kueue admits a Workload whole
            gangs[backend].append(workload(name, {"decode": size}, priority=draw(st.integers(0, 2))))
            pods += [kueue_pod(n, name, gpus=q) for n, q in zip(names, gpus)]
        else:
            gangs[backend].append(pod_group(name, minimum))
            pods += [wa_pod(n, name, gpus=q) for n, q in zip(names, gpus)]
        minimums[name] = (minimum, names)
    pods += [pod(f"plain-{i}", draw(st.sampled_from([1, 4, 8]))) for i in range(draw(st.integers(0, 2)))]
    return Store(pods, nodes, {b: objs for b, objs in gangs.items() if objs}), minimums


@settings(max_examples=examples(150), deadline=None)
@given(worlds(), st.lists(st.integers(0, 3), min_size=1, max_size=3))
def test_no_stand_in_binds_part_of_a_minimum_or_overcommits_a_node(drawn, added):
    store, minimums = drawn
    for step, extra in enumerate(added):
        store.nodes += [node(f"m-{step}-{i}", gpus=4) for i in range(extra)]
        store.run(now=100.0 + step)
        bound = store.bound()
        for name, (minimum, names) in minimums.items():
            placed = sum(1 for n in names if n in bound)
            assert placed == 0 or placed >= minimum, f"gang {name}: {placed} of its minimum {minimum} bound"
        for n in store.nodes:
            held = sum(parse_quantity(p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
                       for p in store.pods.values() if p["spec"].get("nodeName") == n["metadata"]["name"])
            assert held <= parse_quantity(n["status"]["allocatable"]["nvidia.com/gpu"]), f"{n['metadata']['name']} over-committed"
            if n["status"]["conditions"][0]["status"] != "True":
                assert held == 0, "nothing is bound to a node that is not Ready"
