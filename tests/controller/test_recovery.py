"""A replica is kept whole: one that lost a pod is re-created whole (a lost leader always),
or with `recovery: ReplaceMissingPod` gets only its missing workers back, beside its
surviving pods, where its constraints still hold; a creation cut short is completed."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import HealthCheck, given, settings, strategies as st

from support.builders import bound_pod, group, role
from support.controller_world import design_group, over_committed, settle, world
from tandem.api.naming import CREATION, REPLICA_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.cluster.replicas import replicas_of_unit

RACK = "network.tandem.dev/rack"
BLOCK = "network.tandem.dev/block"


def decode_group(recovery: str | None = None, replicas: int = 1) -> dict:
    decode = role("decode", replicas, 1, gpus=8, pods=2, required="rack")
    if recovery:
        decode["recovery"] = recovery
    return group("g", [decode], required="block")


def pods(store, name: str = "g") -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in store.list("Pod", labels=f"tandem.dev/group={name}")}


def rack(store, pod: dict) -> str:
    return store.get("Node", None, pod["spec"]["nodeName"])["metadata"]["labels"][RACK]


def uid(store, name: str) -> str:
    return store.get("Pod", "serving", name)["metadata"]["uid"]


def read(store, created_whole, replace_missing=frozenset()):
    members = list(pods(store).values())
    replicas, _ = replicas_of_unit(members, {"decode": 2}, None, created_whole, replace_missing)
    return {r.index: r.phase for r in replicas}


def test_replicas_of_unit_tells_a_creation_cut_short_from_a_lost_pod():
    store = world(decode_group(), shape="block=1,rack=2,host=2")
    settle(store, store)
    number = int(pods(store)["g-0-decode-0-1"]["metadata"]["annotations"][CREATION])
    assert store.get("InferenceGroup", "serving", "g")["status"]["creations"] == number
    store.delete("Pod", "serving", "g-0-decode-0-0")
    assert read(store, created_whole=number) == {0: "Failed"}, "created whole, then lost its leader"
    assert read(store, created_whole=number - 1) == {0: "Pending"}, "its pass never wrote its status: cut short"
    assert read(store, created_whole=None) == {0: "Pending"}, "without the status, taken for a creation cut short"
    store = world(decode_group(), shape="block=1,rack=2,host=2")
    settle(store, store)
    store.delete("Pod", "serving", "g-0-decode-0-1")
    assert read(store, created_whole=number) == {0: "Failed"}, "lost a worker"
    assert read(store, created_whole=number, replace_missing=frozenset({"decode"})) == {0: "Pending"}, "lost only a worker"


def test_a_lost_leader_re_creates_the_replica_whole_in_one_rack():
    store = world(decode_group(), shape="block=1,rack=2,host=2")
    settle(store, store)
    before = {name: p["metadata"]["uid"] for name, p in pods(store).items()}
    store.delete("Pod", "serving", "g-0-decode-0-0")  # its rack keeps one free host: a fresh replica goes to the other
    settle(store, store, start=100.0)
    after = pods(store)
    assert set(after) == set(before) and all(after[n]["metadata"]["uid"] != before[n] for n in before), "both pods new"
    assert len({rack(store, p) for p in after.values()}) == 1, "the replica's pods share a rack"


def test_replace_missing_pod_places_the_worker_beside_its_leader():
    store = world(decode_group("ReplaceMissingPod"), shape="block=1,rack=2,host=3")
    settle(store, store)
    leader = uid(store, "g-0-decode-0-0")
    store.delete("Pod", "serving", "g-0-decode-0-1")
    settle(store, store, start=100.0)
    now = pods(store)
    assert uid(store, "g-0-decode-0-0") == leader, "the leader runs on"
    assert now["g-0-decode-0-1"]["spec"].get("nodeName") and len({rack(store, p) for p in now.values()}) == 1


def test_replace_missing_pod_re_creates_whole_where_the_rack_has_no_room_or_the_leader_is_lost():
    store = world(decode_group("ReplaceMissingPod"), shape="block=1,rack=2,host=2")
    settle(store, store)
    leader = uid(store, "g-0-decode-0-0")
    freed = pods(store)["g-0-decode-0-1"]["spec"]["nodeName"]
    store.delete("Pod", "serving", "g-0-decode-0-1")
    store.create({**bound_pod("filler", freed, 8), "metadata": {"name": "filler", "namespace": "other"}})  # the rack is full
    settle(store, store, start=100.0)
    now = pods(store)
    assert uid(store, "g-0-decode-0-0") != leader and len({rack(store, p) for p in now.values()}) == 1, "re-created whole elsewhere"
    assert not over_committed(store)
    leader = uid(store, "g-0-decode-0-0")
    worker = uid(store, "g-0-decode-0-1")
    store.delete("Pod", "serving", "g-0-decode-0-0")
    settle(store, store, start=200.0)
    assert uid(store, "g-0-decode-0-0") != leader and uid(store, "g-0-decode-0-1") != worker, "a new leader restarts its workers"


def _replicas(store) -> dict[tuple[str, str, str], list[dict]]:
    out: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for p in store.list("Pod", labels="tandem.dev/group=llama"):
        labels = p["metadata"]["labels"]
        out[(labels[UNIT_LABEL], labels[ROLE_LABEL], labels[REPLICA_LABEL])].append(p)
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    recovery=st.sampled_from(["RecreateReplica", "ReplaceMissingPod"]),
    doomed=st.lists(st.tuples(st.integers(0, 1), st.sampled_from(["prefill", "decode"]), st.integers(0, 3), st.integers(0, 1)), max_size=6),
    filler=st.booleans(),
)
def test_whatever_pods_are_deleted_every_replica_ends_whole_inside_its_required_pack(recovery, doomed, filler):
    g = design_group("llama", replicas=2)
    g["spec"]["roles"][1]["recovery"] = recovery
    store = world(g, shape="block=2,rack=3,host=3")
    now = settle(store, store)
    names = set(pods(store, "llama"))
    for unit, role_name, replica, index in doomed:
        if f"llama-{unit}-{role_name}-{replica}-{index}" in names:
            names.discard(f"llama-{unit}-{role_name}-{replica}-{index}")
            store.delete("Pod", "serving", f"llama-{unit}-{role_name}-{replica}-{index}")
    if filler:  # a free node taken meanwhile: a lone worker may find no room beside its leader
        taken = {p["spec"].get("nodeName") for p in store.list("Pod")}
        free = next((n["metadata"]["name"] for n in store.list("Node") if n["metadata"]["name"] not in taken), None)
        if free:
            store.create({**bound_pod("filler", free, 8), "metadata": {"name": "filler", "namespace": "other"}})
    settle(store, store, start=now + 100.0)
    assert not over_committed(store)
    sizes = {"prefill": 1, "decode": 2}
    for (unit, role_name, replica), members in _replicas(store).items():
        assert len(members) == sizes[role_name], f"unit {unit} {role_name} {replica} whole"
        nodes = [store.get("Node", None, p["spec"]["nodeName"]) for p in members if p["spec"].get("nodeName")]
        if filler:  # the filler may have taken the room the replica had: then it waits, wholly unplaced
            assert len(nodes) in (0, len(members)), "placed together or not at all"
        else:
            assert len(nodes) == len(members), "bound"
        if role_name == "decode" and nodes:
            assert len({n["metadata"]["labels"][RACK] for n in nodes}) == 1, f"unit {unit} decode {replica} in one rack"
    for unit in ("0", "1"):
        blocks = {store.get("Node", None, p["spec"]["nodeName"])["metadata"]["labels"][BLOCK]
                  for (u, _, _), members in _replicas(store).items() if u == unit for p in members if p["spec"].get("nodeName")}
        assert len(blocks) <= 1, f"unit {unit} in one block"
