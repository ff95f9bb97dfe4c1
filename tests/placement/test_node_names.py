"""Node names do not decide how many domains a unit spans (issue 10, locality).

Kueue, KAI and Volcano pack a gang into as few domains as fit it whatever the nodes are
called; tandem's locality keys are capacities, never names. Renaming every node (the
hostname label follows, as it does in a real cluster) may change which node a pod gets,
but not any unit's state nor how many domains of each level it uses.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.builders import world
from support.fuzz import examples
from support.strategies import worlds
from tandem.placement import place

HOSTNAME = "kubernetes.io/hostname"


def renamed(objects: list[dict[str, Any]], salt: int) -> list[dict[str, Any]]:
    """Every node under a hashed name (hostname label and bound pods follow)."""
    out = copy.deepcopy(objects)
    names = {o["metadata"]["name"] for o in out if o["kind"] == "Node"}
    new = {name: "node-" + hashlib.sha1(f"{salt}-{name}".encode()).hexdigest()[:10] for name in names}
    for obj in out:
        if obj["kind"] == "Node":
            obj["metadata"]["name"] = new[obj["metadata"]["name"]]
            if HOSTNAME in obj["metadata"].get("labels", {}):
                obj["metadata"]["labels"][HOSTNAME] = obj["metadata"]["name"]
        elif obj["kind"] == "Pod" and obj["spec"].get("nodeName") in new:
            obj["spec"]["nodeName"] = new[obj["spec"]["nodeName"]]
    return out


def spans(objects: list[dict[str, Any]]) -> list[tuple[str, tuple[int, ...]]]:
    """Per unit: its state and how many domains of each level its pods use."""
    snapshot, views, units = world(objects)
    plan = place(snapshot, views, units)
    out = []
    for unit in plan.units:
        view = views[unit.unit.topology]
        nodes = [snapshot.node_index[pod.node] for _, pod in unit.pods()]
        counts = tuple(len({int(view.dom[depth][n]) for n in nodes}) for depth in range(1, view.depth_count))
        out.append((unit.state, counts))
    return out


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.integers(0, 2**16))
def test_renaming_nodes_changes_no_state_and_no_domain_count(objects, salt):
    assert spans(renamed(objects, salt)) == spans(objects)


def test_renaming_reverses_the_name_order_without_changing_spans():
    # Names sorted against the topology: ties broken by name now point the other way.
    from support.builders import cluster, group, role

    objects = cluster("block=1,rack=3,host=4") + [group("g", [role("p", 5, gpus=4), role("d", 2, gpus=8)], required="block")]
    reverse = copy.deepcopy(objects)
    nodes = [o for o in reverse if o["kind"] == "Node"]
    for node, name in zip(nodes, reversed([n["metadata"]["name"] for n in nodes])):
        node["metadata"]["name"] = name
        node["metadata"]["labels"][HOSTNAME] = name
    # 36 GPUs: more than a rack (32), so two racks, on the fewest hosts (5).
    assert spans(reverse) == spans(objects) == [("Placed", (1, 2, 5))]
