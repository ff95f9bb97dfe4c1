"""A group's revision covers every field of its pod templates, not only those the typed model keeps."""

from __future__ import annotations

import copy

import pytest

from support.builders import group, role
from support.controller_world import settle, world
from tandem.api.naming import REVISION_LABEL


def _roles_with(store, container_field, value):
    roles = copy.deepcopy(store.get("InferenceGroup", "serving", "small")["spec"]["roles"])
    for r in roles:
        for container in r["template"]["spec"]["containers"]:
            container[container_field] = value
    return roles


@pytest.mark.parametrize(
    "container_field, value",
    [("env", [{"name": "MODEL_FLAGS", "value": "--max-num-seqs=64"}]), ("args", ["--tensor-parallel-size=8"]), ("command", ["vllm", "serve"])],
)
def test_changing_a_field_the_typed_model_drops_rolls_the_pods_out_again(container_field, value):
    """Found by the fault campaign (issue 16): the revision hashed the typed templates, which
    keep only containers' names, images and resources, so a new environment variable,
    argument or command never reached the pods."""
    store = world(group("small", [role("prefill", 1, 1, gpus=8), role("decode", 1, 1, gpus=8)], required="block"))
    settle(store, store)
    before = {p["metadata"]["labels"][REVISION_LABEL] for p in store.list("Pod")}
    store.patch("InferenceGroup", "serving", "small", {"spec": {"roles": _roles_with(store, container_field, value)}})
    settle(store, store, start=100.0, passes=80)
    pods = store.list("Pod")
    after = {p["metadata"]["labels"][REVISION_LABEL] for p in pods}
    assert len(before) == 1 and len(after) == 1 and after != before, "a new revision, rolled out"
    engines = [c for p in pods for c in p["spec"]["containers"] if c["name"] == "engine"]
    assert engines and all(c[container_field][: len(value)] == value for c in engines), "the pods carry the change"
    status = store.get("InferenceGroup", "serving", "small")["status"]
    assert status["revision"] == after.pop() and status["functionalUnits"] == 1
