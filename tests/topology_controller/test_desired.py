"""Desired objects: the renderer's output, made tandem's (labels and owner reference)."""

from __future__ import annotations

from support.topology_world import node_models, rack_nodes, topology, typed
from tandem.backends.registry import get_backend
from tandem.topology_controller.desired import desired_objects
from tandem.topology_controller.ownership import MANAGED_BY_LABEL, TOPOLOGY_LABEL


def _raw(name="default", level_list=None):
    raw = topology(name, level_list)
    raw["metadata"]["uid"] = "uid-7"
    return raw


def test_each_object_is_the_renderers_with_both_labels_and_an_owner_reference():
    raw, nodes = _raw(), node_models(rack_nodes(2, 2, 2))
    rendered = desired_objects("volcano", typed(raw), raw, nodes)
    plain = get_backend("volcano").render_topology(typed(raw), nodes)
    assert rendered.refused is None
    assert sorted((o["kind"], o["metadata"]["name"], repr(o["spec"])) for o in rendered.objects) == sorted(
        (o["kind"], o["metadata"]["name"], repr(o["spec"])) for o in plain
    )
    for obj in rendered.objects:
        assert obj["metadata"]["labels"][MANAGED_BY_LABEL] == "tandem"
        assert obj["metadata"]["labels"][TOPOLOGY_LABEL] == "default"
        assert obj["metadata"]["ownerReferences"] == [
            {"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "name": "default", "uid": "uid-7", "controller": False, "blockOwnerDeletion": False}
        ]


def test_a_refusal_comes_back_as_the_renderers_words():
    raw = _raw(level_list=[{"name": "host", "nodeLabel": "kubernetes.io/hostname"}, {"name": "rack", "nodeLabel": "net.example.com/rack"}])
    rendered = desired_objects("kai", typed(raw), raw, [])
    assert rendered.objects == () and rendered.refused is not None and "KAI" in rendered.refused


def test_an_object_rendered_again_unchanged_is_the_same_object():
    raw, nodes = _raw(), node_models(rack_nodes(1, 2, 2))
    first = desired_objects("volcano", typed(raw), raw, nodes)
    again = desired_objects("volcano", typed(raw), raw, node_models(rack_nodes(1, 3, 2)), first)
    by_name = {o["metadata"]["name"]: o for o in first.objects}
    kept = [o for o in again.objects if by_name.get(o["metadata"]["name"]) is o]
    changed = [o for o in again.objects if o["metadata"]["name"] in by_name and by_name[o["metadata"]["name"]] is not o]
    assert kept and all(o == by_name[o["metadata"]["name"]] for o in kept)
    assert all(o["spec"] != by_name[o["metadata"]["name"]]["spec"] for o in changed)  # only what the new rack changed
