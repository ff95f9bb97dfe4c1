"""A rolling update whose surge has no room (issue 25, item 2): it says so, times out and
rolls back, or replaces in place when maxUnavailable allows; and a replica an update
creates never leans on a leaving one for a Required affinity (item 1's update half)."""

from __future__ import annotations

import copy
from typing import Any

from support.builders import group, role
from support.controller_world import kubelet, settle, world
from tandem.api.naming import REVISION_LABEL
from tandem.cluster.memory import MemoryStore
from tandem.controller.reconcile import reconcile

TIMEOUT = 30


def full_block(unavailable: int = 0) -> dict[str, Any]:
    """Two prefill and two decode replicas of 8 GPUs, packed in a block of 4 hosts: the
    block is full, so a surge replica has nowhere to go."""
    g = group("full", [role("prefill", 2, 1, gpus=8), role("decode", 2, 1, gpus=8)], required="block")
    g["spec"]["coordination"] = {
        "rollout": {"stepTimeoutSeconds": TIMEOUT},
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": unavailable},
    }
    return g


def new_image(store: MemoryStore, name: str = "full") -> None:
    current = store.get("InferenceGroup", "serving", name)
    roles = copy.deepcopy(current["spec"]["roles"])
    for r in roles:
        r["template"]["spec"]["containers"][0]["image"] = "vllm:next"
    store.patch("InferenceGroup", "serving", name, {"spec": {"roles": roles}})


def unit0(store: MemoryStore, name: str = "full") -> dict[str, Any]:
    return store.get("InferenceGroup", "serving", name)["status"]["units"][0]


def events(store: MemoryStore, reason: str) -> list[str]:
    return [e["message"] for e in store.list("Event") if e.get("reason") == reason]


def test_a_surge_with_no_room_is_reported_with_the_domain_and_then_stalls_within_the_step_timeout():
    store = world(full_block(), shape="block=1,rack=1,host=4")
    now = settle(store, store)
    before = {p["metadata"]["name"] for p in store.list("Pod")}
    new_image(store)
    started = now
    stalled_at = None
    while now < started + TIMEOUT + 5:
        reconcile(store, now)
        kubelet(store)
        if unit0(store)["state"] == "Stalled" and stalled_at is None:
            stalled_at = now
        now += 1.0
    unit = unit0(store)
    assert stalled_at is not None and stalled_at <= started + TIMEOUT + 2, "Stalled by the step timeout"
    assert "no room in block block-0 for another" in unit["reason"], unit["reason"]
    assert any("update step not Ready within 30s" in m and "block-0" in m for m in events(store, "Stalled"))
    messages = events(store, "Unschedulable")
    assert messages and "block block-0" in messages[0], messages
    # Rolled back: the surge that never got a node is gone; the old revision runs on.
    pods = store.list("Pod")
    assert {p["metadata"]["name"] for p in pods} == before
    assert all(p["spec"].get("nodeName") for p in pods)
    group_ = store.get("InferenceGroup", "serving", "full")
    stalled = next(c for c in group_["status"]["conditions"] if c["type"] == "Stalled")
    assert stalled["status"] == "True" and "block-0" in stalled["message"]


def test_a_blocked_surge_replaces_in_place_when_max_unavailable_allows():
    store = world(full_block(unavailable=1), shape="block=1,rack=1,host=4")
    now = settle(store, store)
    old = {p["metadata"]["labels"][REVISION_LABEL] for p in store.list("Pod")}
    new_image(store)
    now = settle(store, store, start=now, passes=80)
    pods = store.list("Pod")
    revisions = {p["metadata"]["labels"][REVISION_LABEL] for p in pods}
    assert revisions.isdisjoint(old) and len(revisions) == 1, "every replica on the new revision"
    assert len(pods) == 4 and all(p["spec"].get("nodeName") for p in pods)
    assert unit0(store)["state"] == "Complete"
    assert not events(store, "Stalled"), "no step timed out"


def test_a_new_prefill_never_leans_on_a_leaving_decode_for_a_required_affinity():
    """Rack 0 holds the unit with room for one more prefill but no decode; a surge decode
    only fits in rack 1. The new prefill must go beside a decode that stays (the new one),
    never beside the old decode that goes."""
    g = group(
        "aff",
        [role("prefill", 1, 1, gpus=2), role("decode", 1, 1, gpus=4)],
        required="block",
        affinity=[{"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}],
    )
    g["spec"]["coordination"] = {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    store = world(g, shape="block=1,rack=2,host=1")
    now = settle(store, store)
    new_image(store, "aff")
    racks = {n["metadata"]["name"]: n["metadata"]["labels"]["network.tandem.dev/rack"] for n in store.list("Node")}
    settle(store, store, start=now, passes=60)
    pods = store.list("Pod")
    assert len(pods) == 2 and len({p["metadata"]["labels"][REVISION_LABEL] for p in pods}) == 1
    assert len({racks[p["spec"]["nodeName"]] for p in pods}) == 1, "prefill beside its decode"
