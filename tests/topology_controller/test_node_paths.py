"""NodePaths kept node by node equals NodePaths built from scratch, and counts what it should."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from tandem.topology_controller.node_paths import NodePaths

KEYS = ("b", "r", "h")


def test_counts_per_level():
    paths = NodePaths.of(KEYS, [
        ("n1", {"b": "x", "r": "1", "h": "n1"}),
        ("n2", {"b": "x", "r": "1", "h": "n2"}),
        ("n3", {"b": "y", "r": "1", "h": "n3"}),  # rack "1" under another block: another domain
        ("n4", {"b": "y", "h": "n4"}),  # no rack label
        ("n5", {"r": "1", "h": "n5"}),  # no block label: lacks the broadest
    ])
    counts = paths.counts(5)
    assert counts.domains == (2, 2, 3)
    assert counts.nodes == (4, 3, 3)
    assert counts.unlabeled == (1, 1, 0)
    assert counts.examples == (("n5",), ("n4",), ())
    assert (counts.placeable, counts.total) == (3, 5)
    assert counts.unlabeled_examples == ("n4", "n5")


def test_full_serial_moves_only_when_the_set_of_full_paths_does():
    paths = NodePaths.of(("b", "r"), [("n1", {"b": "x", "r": "1"})])
    full, serial = paths.full_serial, paths.serial
    paths.put("n2", {"b": "x", "r": "1"})  # a node in an existing rack
    assert paths.full_serial == full and paths.serial > serial
    paths.put("n3", {"b": "x", "r": "2"})  # a new rack
    assert paths.full_serial > full
    full = paths.full_serial
    paths.put("n3", None)  # its last node gone
    assert paths.full_serial > full


def test_representatives_are_one_node_per_full_path_the_first_by_name():
    paths = NodePaths.of(("b", "r"), [("z", {"b": "x", "r": "1", "other": "o"}), ("a", {"b": "x", "r": "1"}), ("m", {"b": "x", "r": "2"}), ("q", {"b": "x"})])
    reps = paths.representatives()
    assert [(n.metadata.name, n.metadata.labels) for n in reps] == [("a", {"b": "x", "r": "1"}), ("m", {"b": "x", "r": "2"})]
    paths.put("a", None)
    assert [n.metadata.name for n in paths.representatives()] == ["z", "m"]


label_sets = st.fixed_dictionaries({}, optional={"b": st.sampled_from("xy"), "r": st.sampled_from("12"), "h": st.sampled_from("pq")})
events = st.lists(st.tuples(st.sampled_from(["n1", "n2", "n3", "n4", "n5"]), st.none() | label_sets), max_size=40)


@settings(max_examples=examples(200))
@given(events)
def test_kept_up_to_date_equals_built_afresh(changes):
    kept = NodePaths(KEYS)
    now: dict[str, dict[str, str]] = {}
    for name, labels in changes:
        kept.put(name, labels)
        if labels is None:
            now.pop(name, None)
        else:
            now[name] = labels
        fresh = NodePaths.of(KEYS, sorted(now.items()))
        assert kept.counts(3) == fresh.counts(3)
        assert set(kept.names) == set(fresh.names)
        assert [(n.metadata.name, n.metadata.labels) for n in kept.representatives()] == [(n.metadata.name, n.metadata.labels) for n in fresh.representatives()]
