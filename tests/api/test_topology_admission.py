"""`review_topology`: what both webhooks say of a ClusterTopology create, update and delete,
as a pure function of the objects and the groups."""

from __future__ import annotations

import copy
import json

from hypothesis import given
from hypothesis import strategies as st

from support.builders import group, role
from tandem.api.loading import load_texts
from tandem.api.topology_admission import review_topology
from tandem.errors import InputError, Problem

BLOCK, RACK, HOST = ({"name": "block", "nodeLabel": "net/block"}, {"name": "rack", "nodeLabel": "net/rack"},
                     {"name": "host", "nodeLabel": "kubernetes.io/hostname"})


def topology(*levels: dict, name: str = "default", **meta) -> dict:
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": name, **meta},
            "spec": {"levels": [dict(level) for level in levels]}}


def validate_says(obj: dict) -> list[str]:
    """The lines `tandem validate` prints for the object alone (without the file name)."""
    try:
        load_texts([("", json.dumps(obj))])
    except InputError as exc:
        return [str(Problem(p.path, p.message)) for p in exc.problems]
    return []


def test_create_says_exactly_what_tandem_validate_says():
    for obj in (topology(BLOCK, RACK, HOST), topology(BLOCK, HOST, RACK), topology(RACK, {"name": "rack", "nodeLabel": "net/x"}),
                topology({"name": "cluster", "nodeLabel": "net/all"}, HOST), topology(RACK, {"name": "Host", "nodeLabel": "kubernetes.io/hostname"}),
                topology(RACK, {"name": "gpu", "nodeLabel": "net/rack"})):
        problems, warnings = review_topology("CREATE", obj, None, [])
        assert [str(p) for p in problems] == validate_says(obj) and warnings == []
    problems, _ = review_topology("CREATE", topology(BLOCK, HOST, RACK), None, [])
    assert [p.path for p in problems] == ["spec.levels[1].nodeLabel"]


def test_an_update_that_removes_a_level_a_group_packs_on_is_refused_naming_the_group():
    old = topology(BLOCK, RACK, HOST, resourceVersion="1")
    new = topology(BLOCK, HOST, resourceVersion="1")
    users = [
        group("llm", [role("decode", 2, 1, required="rack")], required="block"),
        group("chat", [role("prefill", 1, 1)], required="rack", namespace="team-a"),
        group("other", [role("prefill", 1, 1)], required="rack", topology="elsewhere"),  # not on this topology
        group("flat", [role("prefill", 1, 1)], required="block"),  # not broken by the change
    ]
    problems, warnings = review_topology("UPDATE", new, old, users)
    assert warnings == [] and [p.path for p in problems] == ["spec.levels", "spec.levels"]
    assert problems[0].message.startswith("InferenceGroup serving/llm uses this topology and the change breaks it: "
                                          "spec.roles[0].topology.pack.required: unknown level 'rack'")
    assert problems[1].message.startswith("InferenceGroup team-a/chat uses this topology and the change breaks it: spec.topology.pack.required")
    assert review_topology("UPDATE", topology(BLOCK, RACK, HOST, labels={"a": "b"}), old, users) == ([], [])
    assert review_topology("UPDATE", new, old, users[2:]) == ([], [])


def test_what_was_wrong_before_the_change_does_not_refuse_it():
    """A group already broken is not the change's doing; a topology stored before a rule
    existed can still have its finalizer removed (a warning says what to fix)."""
    old = topology(BLOCK, RACK, HOST)
    broken = group("odd", [role("prefill", 1, 1, required="zone")])
    assert review_topology("UPDATE", topology(BLOCK, RACK, HOST, labels={"x": "y"}), old, [broken]) == ([], [])
    inverted = topology(HOST, RACK, finalizers=["tandem.dev/topology-in-use"])
    released = copy.deepcopy(inverted)
    released["metadata"]["finalizers"] = []
    problems, warnings = review_topology("UPDATE", released, inverted, [])
    assert problems == [] and len(warnings) == 1 and warnings[0].startswith("spec.levels[0].nodeLabel: kubernetes.io/hostname names a single node")
    problems, _ = review_topology("UPDATE", topology(HOST, RACK), topology(RACK, HOST), [])
    assert [p.path for p in problems] == ["spec.levels[0].nodeLabel"], "a change that inverts the levels is refused"


def test_a_delete_is_refused_while_groups_name_the_topology():
    obj = topology(RACK, HOST)
    assert review_topology("DELETE", None, obj, [group("x", [role("p", 1, 1)], topology="elsewhere")]) == ([], [])
    users = [group(f"g{i:02d}", [role("p", 1, 1)], namespace="b" if i % 2 else "a") for i in range(23)]
    implicit = group("implicit", [role("p", 1, 1)])
    del implicit["spec"]["topologyName"]  # absent means "default"
    (problem,), warnings = review_topology("DELETE", None, obj, [*users, implicit])
    assert warnings == [] and problem.path == ""
    named = sorted(f"{'b' if i % 2 else 'a'}/g{i:02d}" for i in range(23)) + ["serving/implicit"]
    assert problem.message == (f"ClusterTopology 'default' is used by 24 InferenceGroup(s): {', '.join(sorted(named)[:20])} and 4 more; "
                               "delete them or point their spec.topologyName elsewhere first")


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["default", "other"])), max_size=30))
def test_a_delete_is_refused_exactly_when_a_group_names_it_and_names_at_most_twenty(pairs):
    groups = [group(f"g{i}", [role("p", 1, 1)], namespace=ns, topology=t) for i, (ns, t) in enumerate(pairs)]
    problems, _ = review_topology("DELETE", None, topology(RACK), groups)
    using = sum(1 for _, t in pairs if t == "default")
    assert bool(problems) == bool(using)
    if problems:
        assert f"used by {using} InferenceGroup(s)" in problems[0].message
        assert problems[0].message.count("/g") == min(using, 20)
