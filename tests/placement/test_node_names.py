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

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from support.builders import bound_pod, cluster, container, group, role, world
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


TOLERATE = [{"key": "maintenance", "operator": "Exists"}]


def _taint(node: dict[str, Any]) -> None:
    node["spec"] = {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}


def router_off_the_decode_host() -> list[dict[str, Any]]:
    """The counterexample of issue 10: hosts only, minimums 0, a CPU-only router that
    tolerates a taint the decode does not. The router (one replica, so its extra comes
    first) tied on GPUs between the tainted host and the other, took the one that sorts
    first by name, and the decode could not follow it: 2 hosts or 1 by name."""
    objects = cluster("host=2", gpus=4)
    _taint(objects[1])
    router = role("router", 1, 0, gpus=0, tolerations=TOLERATE)
    router["template"]["spec"]["containers"] = [container(cpu="1")]
    return objects + [group("g", [role("decode", 2, 0, gpus=4), router])]


def first_extras_without_reservations() -> list[dict[str, Any]]:
    """Two units whose minimums are 0: the second unit's first replica chose its host
    without the first unit's reservation, and the tie between the hosts fell to names."""
    objects = cluster("host=2", gpus=8) + [bound_pod("busy-0", "n-000", 3), bound_pod("busy-1", "n-001", 5)]
    return objects + [group("g", [role("prefill", 2, 0, gpus=2, required="host")], replicas=2, required="host")]


def to_side_on_the_only_node_of_the_from_side() -> list[dict[str, Any]]:
    """The decode (the `to` side, placed first) tied between a tainted host and the only
    host the prefill's selector allows, and took that one when it sorted first."""
    objects = cluster("rack=1,host=2", gpus=2)
    _taint(objects[1])
    objects[2]["metadata"]["labels"]["pool"] = "a"
    prefill = role("prefill", 1, 0, gpus=1, pods=2, nodeSelector={"pool": "a"}, tolerations=TOLERATE)
    decode = role("decode", 1, 0, gpus=1, tolerations=TOLERATE)
    return objects + [group("g", [prefill, decode], affinity=[{"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}])]


def decode_beside_its_own_prefill() -> list[dict[str, Any]]:
    """Three hosts of one rack, one with 2 GPUs free beside a running pod. The first
    prefill (3 pods of 2 GPUs) fills one 8-GPU host to 2 free; the decode (1 GPU, the
    `to` side of a block-level rule, so locality below the block is only a tie-breaker
    while a prefill is to come) then tied between that host and the busy one: equal
    free GPUs, one holding the unit's prefill and one a pod of no unit of the plan. By
    name it took either, and the second prefill used 1 host or 2 (2 hosts or 3 in all)."""
    objects = cluster("block=1,rack=1,host=3", gpus=8) + [bound_pod("busy", "n-000", 6)]
    prefill = role("prefill", 2, 1, gpus=2, pods=3, required="block", preferred="rack")
    decode = role("decode", 1, 0, gpus=1)
    rule = {"from": "prefill", "to": "decode", "level": "block", "mode": "Preferred"}
    return objects + [group("g", [prefill, decode], required="block", affinity=[rule])]


def copies_keep_to_their_own_hosts() -> list[dict[str, Any]]:
    """Three copies of a group (minimums 0, 6 GPUs each, preferred host) on four hosts of 4
    GPUs, one with 2 free beside a running pod. The third copy's first prefill chose its
    host between that one and the first copy's host (2 free as well; the first copy
    reserves at the rack, so room did not tell them apart). By name it took the first
    copy's host, which then spanned 3 hosts instead of 2."""
    objects = cluster("rack=1,host=4", gpus=4) + [bound_pod("busy", "n-000", 2)]
    prefill = role("prefill", 3, 0, gpus=2, required="host")
    prefill["template"]["spec"]["containers"] = [container(gpus=2, cpu="1")]
    decode = role("decode", 3, 0, gpus=0, required="rack")
    decode["template"]["spec"]["containers"] = [container(cpu="1")]
    rule = {"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}
    return objects + [group("g", [prefill, decode], replicas=3, preferred="host", affinity=[rule])]


def decode_beside_what_the_other_copy_reserves() -> list[dict[str, Any]]:
    """Two hosts, one with 4 GPUs free beside a running pod; two copies of a group of 5
    GPUs (a prefill of a CPU-only leader and a 1-GPU worker, a decode of 3 one-GPU pods
    that prefers one host, Required at the block). The first copy takes the 8-GPU host
    and reserves its next prefill there; the second copy's decode (the `to` side, waiting
    for its prefill, so locality below the block only breaks ties) tied between 4 GPUs on
    that host and 4 on the other, and by name took the first copy's room: it spanned 2
    hosts or 1."""
    objects = cluster("block=1,rack=1,host=2", gpus=8) + [bound_pod("busy", "n-001", 4)]
    prefill = role("prefill", 2, 1, gpus=0, pods=2, required="block")
    prefill["template"]["spec"]["containers"] = [container(cpu="1")]
    prefill["workerTemplate"] = {"spec": {"containers": [container(gpus=1)]}}
    decode = role("decode", 1, 0, gpus=1, pods=3, required="block", preferred="host")
    rule = {"from": "prefill", "to": "decode", "level": "block", "mode": "Required"}
    return objects + [group("g", [prefill, decode], replicas=2, required="block", affinity=[rule])]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.integers(0, 2**16))
@example(router_off_the_decode_host(), 1)
@example(first_extras_without_reservations(), 1)
@example(to_side_on_the_only_node_of_the_from_side(), 1)
@example(decode_beside_its_own_prefill(), 1)
@example(copies_keep_to_their_own_hosts(), 1)
@example(decode_beside_what_the_other_copy_reserves(), 1)
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


def test_a_to_replica_breaks_ties_toward_the_hosts_its_unit_already_uses():
    objects = decode_beside_its_own_prefill()
    # The decode joins the host of the first prefill; the second prefill takes one host.
    assert spans(objects) == spans(renamed(objects, 1)) == [("Placed", (1, 1, 2))]


def test_a_copy_starts_on_a_host_no_other_copy_uses():
    objects = copies_keep_to_their_own_hosts()
    expected = [("Placed", (1, 2)), ("MinimumPlaced", (1, 1)), ("MinimumPlaced", (1, 2))]
    assert spans(objects) == spans(renamed(objects, 1)) == expected


def test_a_to_replica_kept_whole_on_a_host_leaves_what_another_unit_reserves():
    objects = decode_beside_what_the_other_copy_reserves()
    assert spans(objects) == spans(renamed(objects, 1)) == [("Placed", (1, 1, 1)), ("Placed", (1, 1, 2))]
