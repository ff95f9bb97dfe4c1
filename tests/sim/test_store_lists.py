"""Lists from the in-memory store (and its snapshots) answer in key order, from each
kind's keys kept up to date from the journal (`cluster/key_order.py`): whatever the writes
and deletes, whenever a snapshot was taken and however late it is read, and however short
the journal, a list is what sorting the snapshot's objects would give."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tandem.cluster.memory import MemoryStore

KINDS = ("Pod", "ConfigMap", "Node")
NAMESPACES = ("a", "b", "b\x00", "ab")  # "b\x00" and "ab" sort next to "b" and "a"
NAMES = tuple(f"n{i}" for i in range(6))

steps = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from(KINDS), st.sampled_from(NAMESPACES), st.sampled_from(NAMES), st.sampled_from("xy")),
        st.tuples(st.just("delete"), st.sampled_from(KINDS), st.sampled_from(NAMESPACES), st.sampled_from(NAMES)),
        st.tuples(st.just("snapshot")),
        st.tuples(st.just("list"), st.integers(0, 20), st.sampled_from(KINDS), st.sampled_from((None, *NAMESPACES)), st.booleans()),
    ),
    max_size=80,
)


def expected(model, kind, namespace, tier):
    """The answer by definition: the keys of `kind` (in `namespace`, with the label), sorted."""
    return sorted(k for k, t in model.items() if k[0] == kind and (namespace is None or k[1] == namespace) and tier in (None, t))


def keys(objects):
    return [(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objects]


@given(steps, st.sampled_from((1, 3, 10_000)))
def test_every_list_is_the_snapshots_objects_in_key_order(script, history):
    store = MemoryStore(history=history)
    model: dict[tuple[str, str, str], str] = {}  # key -> its label, as the store should hold them
    taken = []  # (a snapshot, the model then)
    for step in script:
        if step[0] in ("write", "delete"):
            kind, namespace, name = step[1:4]
            namespace = "" if kind == "Node" else namespace
            key = (kind, namespace, name)
            if step[0] == "delete" and key in model:
                store.delete(kind, namespace or None, name)
                del model[key]
            elif step[0] == "write" and key in model:
                store.patch(kind, namespace or None, name, {"metadata": {"labels": {"tier": step[4]}}})
                model[key] = step[4]
            elif step[0] == "write":
                meta = {"name": name, "labels": {"tier": step[4]}, **({"namespace": namespace} if namespace else {})}
                store.create({"apiVersion": "v1", "kind": kind, "metadata": meta})
                model[key] = step[4]
        elif step[0] == "snapshot":
            taken.append((store.snapshot(), dict(model)))
        else:
            _, which, kind, namespace, labelled = step
            namespace = None if kind == "Node" else namespace
            tier, selector = ("x", "tier=x") if labelled else (None, None)
            if taken:
                snapshot, then = taken[which % len(taken)]
                assert keys(snapshot.list(kind, namespace, selector)) == expected(then, kind, namespace, tier)
            assert keys(store.list(kind, namespace, selector)) == expected(model, kind, namespace, tier)


def test_a_namespace_is_its_own_keys_only():
    store = MemoryStore()
    for namespace in ("b", "a", "b\x00", "ab", "bb"):
        store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": namespace}})
    snapshot = store.snapshot()
    assert [o["metadata"]["namespace"] for o in snapshot.list("ConfigMap")] == ["a", "ab", "b", "b\x00", "bb"]
    assert [o["metadata"]["namespace"] for o in snapshot.list("ConfigMap", "b")] == ["b"]
    assert snapshot.list("Pod", "b") == [] and snapshot.list("ConfigMap", "c") == []
