"""Adopting HyperNodes: the ClusterTopology derived from a tree splits the nodes as the tree does.

Trees come from tandem's own Volcano render, from a re-implementation of Volcano's label
discoverer (pkg/controllers/hypernode/discovery/label/label.go: tier i+1 for the i-th
label from the narrowest, hostname dropped, one HyperNode per (label, value) named
`hypernode-<type>-tier<k>-<random>`, tierName the label key) and of UFM's
(discovery/ufm/ufm.go: `leaf-hn-<i>` of node names at tier 1, `spine-hn` at tier 2).
"""

from __future__ import annotations

import random
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from tandem.api.kube import Node
from tandem.api.naming import HOSTNAME_LABEL
from tandem.api.resources import ClusterTopology
from tandem.backends.volcano import VolcanoBackend
from tandem.backends.volcano_adopt import SOURCE_LABEL, Adoption, adopt_hypernodes, label_value
from tandem.errors import InputError

HN = "topology.volcano.sh/v1alpha1"


def node(name: str, **labels: str) -> Node:
    return Node.model_validate({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {HOSTNAME_LABEL: name, **labels}},
                                "status": {"allocatable": {"nvidia.com/gpu": "8"}}})


def hypernode(name: str, tier: int, members: list[dict[str, Any]], tier_name: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"tier": tier, "members": members}
    if tier_name is not None:
        spec["tierName"] = tier_name
    return {"apiVersion": HN, "kind": "HyperNode", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def exact(kind: str, name: str) -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def labels(selector: dict[str, Any]) -> dict[str, Any]:
    return {"type": "Node", "selector": {"labelMatch": selector}}


def partitions(topology: dict[str, Any], nodes: list[Node], writes: dict[str, dict[str, str | None]] | None = None) -> list[frozenset[frozenset[str]]]:
    """For each level, broadest first: the sets of nodes sharing a domain (tandem's rule:
    a domain is the path of label values; a node lacking a level label is in none)."""
    keys = [level["nodeLabel"] for level in topology["spec"]["levels"]]
    labelled = {}
    for n in nodes:
        labels: dict[str, str | None] = {**n.metadata.labels, **(writes or {}).get(n.metadata.name, {})}
        if all(labels.get(k) is not None for k in keys):
            labelled[n.metadata.name] = tuple(labels[k] for k in keys)
    out = []
    for depth in range(1, len(keys) + 1):
        groups: dict[tuple[Any, ...], set[str]] = {}
        for name, path in labelled.items():
            groups.setdefault(path[:depth], set()).add(name)
        out.append(frozenset(frozenset(g) for g in groups.values()))
    return out


def canonical(parts: list[frozenset[frozenset[str]]], names: set[str]) -> list[frozenset[frozenset[str]]]:
    """The partitions down to single nodes, repeats in a row dropped: a hostname level the
    adoption adds (or keeps from a tier of single nodes) changes nothing."""
    full = [*parts, frozenset(frozenset({n}) for n in names)]
    return [p for i, p in enumerate(full) if i == 0 or p != full[i - 1]]


def adopted_partitions(adoption: Adoption, nodes: list[Node]) -> list[frozenset[frozenset[str]]]:
    return partitions(adoption.topology, nodes, adoption.node_labels)


# ----------------------------------------------------------------------------- tandem's own render, read back


@st.composite
def clusters(draw: st.DrawFn) -> tuple[ClusterTopology, list[Node]]:
    """1-3 levels (a hostname level last or not), values reused under different parents,
    some nodes lacking a label."""
    depth = draw(st.integers(1, 3))
    names = ["zone", "block", "rack"][-depth:]
    keys = [f"example.com/{n}" for n in names]
    host_level = draw(st.booleans())
    levels = [{"name": n, "nodeLabel": k} for n, k in zip(names, keys)]
    if host_level:
        levels.append({"name": "host", "nodeLabel": HOSTNAME_LABEL})
    topology = ClusterTopology.model_validate({"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology",
                                               "metadata": {"name": draw(st.sampled_from(["default", "fabric"]))}, "spec": {"levels": levels}})
    nodes = []
    for i in range(draw(st.integers(1, 14))):
        values = {k: f"v{draw(st.integers(0, 2))}" for k in keys}  # "v0" in several parents
        if draw(st.integers(0, 6)) == 0:
            del values[draw(st.sampled_from(keys))]
        nodes.append(node(f"n{i:02d}", **values))
    return topology, nodes


@settings(max_examples=examples(120), deadline=None)
@given(clusters())
def test_tandems_own_hypernodes_adopted_give_the_same_domains_at_every_level(cluster: tuple[ClusterTopology, list[Node]]) -> None:
    topology, nodes = cluster
    keys = [lv.node_label for lv in topology.spec.levels]
    if not any(all(k in n.metadata.labels for k in keys) for n in nodes):
        with pytest.raises(InputError):
            VolcanoBackend().render_topology(topology, nodes)
        return
    rendered = VolcanoBackend().render_topology(topology, nodes)
    adoption = adopt_hypernodes(rendered, nodes, topology.metadata.name)
    original = partitions(topology.model_dump(by_alias=True, exclude_none=True), nodes)
    covered = {n.metadata.name for n in nodes if all(k in n.metadata.labels for k in keys)}
    assert canonical(adopted_partitions(adoption, nodes), covered) == canonical(original, covered)
    assert adoption.topology["metadata"]["name"] == topology.metadata.name
    assert adoption.topology["spec"]["levels"][-1]["nodeLabel"] == HOSTNAME_LABEL
    assert RESERVED not in [lv["name"] for lv in adoption.topology["spec"]["levels"]]  # tandem's root is the cluster, not a level


RESERVED = "cluster"


def test_tandems_own_hypernodes_reuse_the_level_labels() -> None:
    """The leaves select by the level labels, so those labels are found and nothing is written."""
    topology = ClusterTopology.model_validate({"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": "default"},
                                               "spec": {"levels": [{"name": "block", "nodeLabel": "example.com/block"},
                                                                   {"name": "rack", "nodeLabel": "example.com/rack"}]}})
    nodes = [node(f"n{i}", **{"example.com/block": f"b{i // 4}", "example.com/rack": f"r{i % 2}"}) for i in range(8)]
    adoption = adopt_hypernodes(VolcanoBackend().render_topology(topology, nodes), nodes)
    assert [(lv["name"], lv["nodeLabel"]) for lv in adoption.topology["spec"]["levels"]] == [
        ("block", "example.com/block"), ("rack", "example.com/rack"), ("host", HOSTNAME_LABEL)]
    assert adoption.node_labels == {} and adoption.warnings == ()


# ----------------------------------------------------------------------------- Volcano's label discoverer


def label_discoverer(types: dict[str, list[str]], nodes: list[Node], rng: random.Random) -> list[dict[str, Any]]:
    """HyperNodes as label.go's generateHyperNodeInfo + buildHyperNodes make them."""
    records = {name: list(reversed(labels[:-1])) for name, labels in types.items()}  # parseCfg: hostname dropped, narrowest first
    info: dict[str, dict[str, Any]] = {}
    named: dict[tuple[str, str], str] = {}
    for n in nodes:
        for kind, keys in records.items():
            member = n.metadata.name
            for i, key in enumerate(keys):
                value = n.metadata.labels.get(key)
                if value is None:
                    break
                tier = i + 1
                if (key, value) not in named:
                    suffix = "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(5))
                    named[(key, value)] = f"hypernode-{kind}-tier{tier}-{suffix}"
                name = named[(key, value)]
                entry = info.setdefault(name, {"tier": tier, "tierName": key, "members": set(), "labels": {key: value}})
                entry["members"].add(member)
                member = name
    return [
        hypernode(name, e["tier"], [exact("Node" if e["tier"] == 1 else "HyperNode", m) for m in sorted(e["members"])], e["tierName"],
                  {SOURCE_LABEL: "label", **e["labels"]})
        for name, e in sorted(info.items())
    ]


@st.composite
def labelled_clusters(draw: st.DrawFn) -> tuple[list[str], list[Node]]:
    """Nodes labelled for the label discoverer: values unique per label across the cluster
    (a rack's value names one rack), some nodes without a label."""
    keys = ["volcano.sh/hypernode", "example.com/spine", "example.com/leaf"][-draw(st.integers(1, 3)):]
    nodes = []
    for i in range(draw(st.integers(1, 16))):
        path = [draw(st.integers(0, 2)) for _ in keys]
        labels = {k: "-".join(str(p) for p in path[: d + 1]) for d, k in enumerate(keys)}
        if draw(st.integers(0, 7)) == 0:
            del labels[keys[-1]]  # no leaf label: the discoverer puts it in no HyperNode at all
        nodes.append(node(f"gpu-{i:02d}", **labels))
    return keys, nodes


@settings(max_examples=examples(120), deadline=None)
@given(labelled_clusters(), st.randoms(use_true_random=False))
def test_the_label_discoverers_tree_is_adopted_on_the_node_labels_it_came_from(cluster: tuple[list[str], list[Node]], rng: random.Random) -> None:
    keys, nodes = cluster
    tree = label_discoverer({"fabric": [*keys, HOSTNAME_LABEL]}, nodes, rng)
    if not tree:
        return
    adoption = adopt_hypernodes(tree, nodes)
    assert [lv["nodeLabel"] for lv in adoption.topology["spec"]["levels"]] == [*keys, HOSTNAME_LABEL]
    assert not [w for w in adoption.warnings if "numbered" in w], "the discoverer numbers tiers as tandem does"
    assert not [w for w in adoption.warnings if "nest" in w], "and nests each tier in the next"
    assert adoption.node_labels == {}  # no node writes: the labels are there already
    assert [lv["name"] for lv in adoption.topology["spec"]["levels"]][:-1] == [k.rsplit("/", 1)[-1] for k in keys]
    in_tree = {n.metadata.name for n in nodes if all(k in n.metadata.labels for k in keys)}
    by_tier = {}
    for hn in tree:
        by_tier.setdefault(hn["spec"]["tier"], []).append(hn)
    assert {n for part in adopted_partitions(adoption, nodes)[0] for n in part} == in_tree
    assert adopted_partitions(adoption, nodes)[: len(keys)] == [volcano_partition(tree, tier) for tier in sorted(by_tier, reverse=True)]


def volcano_partition(tree: list[dict[str, Any]], tier: int) -> frozenset[frozenset[str]]:
    """The node sets of a tier's HyperNodes, members followed down by name."""
    by_name = {hn["metadata"]["name"]: hn for hn in tree}

    def nodes_of(name: str) -> set[str]:
        out: set[str] = set()
        for m in by_name[name]["spec"]["members"]:
            child = m["selector"]["exactMatch"]["name"]
            out |= {child} if m["type"] == "Node" else nodes_of(child)
        return out

    return frozenset(frozenset(nodes_of(hn["metadata"]["name"])) for hn in tree if hn["spec"]["tier"] == tier)


def test_a_value_reused_under_two_parents_is_a_hypernode_with_two_parents() -> None:
    """The label discoverer keys HyperNodes by (label, value): rack `r1` in two blocks is one
    HyperNode in both, which is no tree; said at the second parent's member."""
    nodes = [node("a", **{"x/block": "b1", "x/rack": "r1"}), node("b", **{"x/block": "b2", "x/rack": "r1"})]
    tree = label_discoverer({"t": ["x/block", "x/rack", HOSTNAME_LABEL]}, nodes, random.Random(1))
    with pytest.raises(InputError, match=r"HyperNode/hypernode-t-tier2-\w+\.spec\.members\[0\]: HyperNode 'hypernode-t-tier1-\w+' is already a member"):
        adopt_hypernodes(tree, nodes)


# ----------------------------------------------------------------------------- UFM: switches, no labels


def ufm_tree(leaves: list[list[str]]) -> list[dict[str, Any]]:
    tree = [hypernode(f"leaf-hn-{i}", 1, [exact("Node", n) for n in sorted(names)], labels={SOURCE_LABEL: "ufm"}) for i, names in enumerate(leaves)]
    tree.append(hypernode("spine-hn", 2, [exact("HyperNode", f"leaf-hn-{i}") for i in range(len(leaves))], labels={SOURCE_LABEL: "ufm"}))
    return tree


def test_ufm_trees_need_tandems_tier_labels_named_after_the_hypernodes() -> None:
    nodes = [node(f"gpu-{i}") for i in range(5)]
    adoption = adopt_hypernodes(ufm_tree([["gpu-0", "gpu-1"], ["gpu-2", "gpu-3", "gpu-4", "ib-host-9"]]), nodes)
    assert not [w for w in adoption.warnings if "numbered" in w]
    assert adoption.topology["spec"]["levels"] == [
        {"name": "tier-2", "nodeLabel": "topology.tandem.dev/tier-2"},
        {"name": "tier-1", "nodeLabel": "topology.tandem.dev/tier-1"},
        {"name": "host", "nodeLabel": HOSTNAME_LABEL},
    ]
    assert adoption.node_labels == {
        f"gpu-{i}": {"topology.tandem.dev/tier-1": f"leaf-hn-{0 if i < 2 else 1}", "topology.tandem.dev/tier-2": "spine-hn"} for i in range(5)
    }
    assert [lv.written for lv in adoption.levels] == [True, True, False]
    assert any("ib-host-9" in w and "not among the nodes" in w for w in adoption.warnings)
    assert adopted_partitions(adoption, nodes) == [
        frozenset({frozenset(f"gpu-{i}" for i in range(5))}),
        frozenset({frozenset({"gpu-0", "gpu-1"}), frozenset({"gpu-2", "gpu-3", "gpu-4"})}),
        frozenset(frozenset({f"gpu-{i}"}) for i in range(5)),
    ]


def test_labelling_is_idempotent_and_stale_tier_labels_are_removed() -> None:
    nodes = [node(f"gpu-{i}") for i in range(4)] + [node("gpu-9", **{"topology.tandem.dev/tier-1": "leaf-hn-0"})]
    tree = ufm_tree([["gpu-0", "gpu-1"], ["gpu-2", "gpu-3"]])
    first = adopt_hypernodes(tree, nodes)
    assert first.node_labels["gpu-9"] == {"topology.tandem.dev/tier-1": None}  # in no HyperNode now: off its old leaf
    relabelled = [node(n.metadata.name, **{k: v for k, v in {**n.metadata.labels, **first.node_labels.get(n.metadata.name, {})}.items()
                                           if v is not None and k != HOSTNAME_LABEL}) for n in nodes]
    again = adopt_hypernodes(tree, relabelled)
    assert again.node_labels == {} and again.topology == first.topology


def test_a_long_hypernode_name_becomes_a_label_value_with_a_hash() -> None:
    long = "rail-" + "x" * 80
    value = label_value(long)
    assert len(value) <= 63 and value != label_value(long + "y") and value.startswith("rail-x")
    assert label_value("leaf-hn-0") == "leaf-hn-0"


# ----------------------------------------------------------------------------- selectors


def test_regex_and_label_selectors_pick_members_as_volcano_does() -> None:
    nodes = [node("gpu-a-1", pool="a"), node("gpu-a-2", pool="a"), node("gpu-b-1", pool="b"), node("cpu-1", pool="b")]
    tree = [
        hypernode("left", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "gpu-a-"}}}], "example.com/leaf"),
        hypernode("right", 1, [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"pool": "b"},
                                                                               "matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["c"]}]}}}],
                  "example.com/leaf"),
        hypernode("top", 2, [exact("HyperNode", "left"), exact("HyperNode", "right")], "example.com/spine"),
    ]
    adoption = adopt_hypernodes(tree, nodes, "fabric")
    levels = adoption.topology["spec"]["levels"]
    assert [lv["name"] for lv in levels] == ["spine", "leaf", "host"]
    assert levels[1]["nodeLabel"] == "pool"  # the labelMatch key splits the nodes as the tier does
    assert adoption.node_labels == {n: {"topology.tandem.dev/tier-2": "top"} for n in ("cpu-1", "gpu-a-1", "gpu-a-2", "gpu-b-1")}


def test_a_lowest_tier_of_single_nodes_keyed_on_the_hostname_is_the_hostname_level() -> None:
    nodes = [node(f"n{i}", rack=f"r{i // 2}") for i in range(4)]
    by_host = [hypernode(f"h{i}", 1, [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {HOSTNAME_LABEL: f"n{i}"}}}}], "server") for i in range(4)]
    racks = [hypernode(f"r{r}", 2, [exact("HyperNode", f"h{2 * r}"), exact("HyperNode", f"h{2 * r + 1}")], "rack") for r in range(2)]
    adoption = adopt_hypernodes(by_host + racks, nodes)
    assert adoption.topology["spec"]["levels"] == [{"name": "rack", "nodeLabel": "rack"}, {"name": "server", "nodeLabel": HOSTNAME_LABEL}]
    by_name = [hypernode(f"h{i}", 1, [exact("Node", f"n{i}")], "server") for i in range(4)]  # a leaf of one node today may grow
    levels = adopt_hypernodes(by_name + racks, nodes).topology["spec"]["levels"]
    assert [(lv["name"], lv["nodeLabel"]) for lv in levels] == [("rack", "rack"), ("server", "topology.tandem.dev/tier-1"), ("host", HOSTNAME_LABEL)]


def test_tiers_numbered_otherwise_than_tandem_numbers_the_levels_are_warned_of() -> None:
    """tandem asks Volcano for `highestTierAllowed` by its own numbering (the narrowest tier
    level is 1, no gaps); on a tree numbered otherwise that number names another level (a
    rack pack would be a host pack), so the adoption says which levels differ."""
    nodes = [node(f"n{i}", rack=f"r{i // 2}", block="b0") for i in range(4)]
    racks = [hypernode(f"r{r}", 1, [exact("Node", f"n{2 * r}"), exact("Node", f"n{2 * r + 1}")], "rack") for r in range(2)]
    gap = adopt_hypernodes([*racks, hypernode("b0", 3, [exact("HyperNode", "r0"), exact("HyperNode", "r1")], "block")], nodes)
    assert [lv["name"] for lv in gap.topology["spec"]["levels"]] == ["block", "rack", "host"]
    assert [w for w in gap.warnings if "numbered" in w] == [
        "the HyperNodes' tiers are not numbered as tandem numbers the levels (the narrowest 1, each broader one more): "
        "level 'block' is tier 3 here but tandem asks Volcano for tier 2 when a group packs on it; "
        "renumber the HyperNodes' spec.tier from 1 at the narrowest level before groups pack on these levels"]
    by_host = [hypernode(f"h{i}", 1, [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {HOSTNAME_LABEL: f"n{i}"}}}}], "server") for i in range(4)]
    hosts = [hypernode(f"r{r}", 2, [exact("HyperNode", f"h{2 * r}"), exact("HyperNode", f"h{2 * r + 1}")], "rack") for r in range(2)]
    old_render = adopt_hypernodes(by_host + hosts, nodes)
    assert [w for w in old_render.warnings if "numbered" in w] == [
        "the HyperNodes' tiers are not numbered as tandem numbers the levels (the narrowest 1, each broader one more): "
        "level 'rack' is tier 2 here but tandem asks Volcano for tier 1 when a group packs on it; "
        "renumber the HyperNodes' spec.tier from 1 at the narrowest level before groups pack on these levels"]
    assert not [w for w in adopt_hypernodes([*racks, hypernode("b0", 2, [exact("HyperNode", "r0"), exact("HyperNode", "r1")], "block")],
                                             nodes).warnings if "numbered" in w]


def test_a_hypernode_not_nested_in_one_of_the_next_tier_is_warned_of() -> None:
    """Hand-made tiers may each list their nodes, so a rack can straddle two blocks; tandem's
    domains are label paths, one rack per block, so it says that it splits the rack."""
    nodes = [node(f"n{i}") for i in range(4)]
    tree = [hypernode("r0", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "^n"}}}], "rack"),
            hypernode("b0", 2, [exact("Node", "n0"), exact("Node", "n1")], "block"),
            hypernode("b1", 2, [exact("Node", "n2"), exact("Node", "n3")], "block")]
    adoption = adopt_hypernodes(tree, nodes)
    assert [w for w in adoption.warnings if "nest" in w] == [
        "1 HyperNode(s) of a tier hold nodes of several HyperNodes of the next tier up (r0 (tier 1) in b0 and b1): "
        "tandem's domains nest, so it counts each such HyperNode as one domain per HyperNode above"]
    assert adopted_partitions(adoption, nodes)[1] == frozenset({frozenset({"n0", "n1"}), frozenset({"n2", "n3"})})


# ----------------------------------------------------------------------------- mistakes in the tree


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        (
            [hypernode("a", 2, [exact("HyperNode", "b")]), hypernode("b", 1, [exact("Node", "n0"), exact("HyperNode", "a")])],
            r"HyperNode/b\.spec\.members\[1\]: (cycle: a -> b -> a|HyperNode 'a' is of tier 2, not lower than its parent's tier 1)",
        ),
        (
            [hypernode("a", 1, [exact("Node", "n0")]), hypernode("b", 1, [exact("Node", "n1"), exact("Node", "n0")])],
            r"HyperNode/b\.spec\.members\[1\]: node 'n0' is also in HyperNode 'a' of the same tier 1",
        ),
        (
            [hypernode("a", 1, [exact("Node", "n0")]), hypernode("top", 1, [exact("HyperNode", "a")])],
            r"HyperNode/top\.spec\.members\[0\]: HyperNode 'a' is of tier 1, not lower than its parent's tier 1",
        ),
        (
            [hypernode("top", 2, [exact("HyperNode", "a"), exact("HyperNode", "gone")]), hypernode("a", 1, [exact("Node", "n0")])],
            r"HyperNode/top\.spec\.members\[1\]: HyperNode 'gone' does not exist",
        ),
        (
            [hypernode("a", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "n("}}}])],
            r"HyperNode/a\.spec\.members\[0\]\.selector\.regexMatch\.pattern: not a valid regular expression",
        ),
        (
            [hypernode("a", 2, [{"type": "HyperNode", "selector": {"regexMatch": {"pattern": "x"}}}])],
            r"HyperNode/a\.spec\.members\[0\]\.selector\.regexMatch: a HyperNode member is named by exactMatch",
        ),
        (
            [hypernode("a", 2, [exact("HyperNode", "c")]), hypernode("b", 2, [exact("HyperNode", "c")]), hypernode("c", 1, [exact("Node", "n0")]),
             hypernode("d", 1, [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {HOSTNAME_LABEL: "n1"}}}}])],
            r"HyperNode/b\.spec\.members\[0\]: HyperNode 'c' is already a member of HyperNode 'a' \(spec\.members\[0\]\): a HyperNode has one parent",
        ),
        ([hypernode("a", 1, [exact("Node", "n0")]), hypernode("a", 1, [exact("Node", "n1")])], r"HyperNode/a: given twice"),
        ([{**hypernode("a", 1, [exact("Node", "n0")]), "spec": {"tier": "one", "members": [exact("Node", "n0")]}}], r"HyperNode/a\.spec\.tier: must be an integer"),
        ([hypernode("a", 1, [labels({"matchExpressions": 5})])], r"HyperNode/a\.spec\.members\[0\]\.selector\.labelMatch\.matchExpressions: must be a list"),
        ([hypernode("a", 1, [labels({"matchExpressions": [{"key": "rack", "operator": "In", "values": 5}]})])],
         r"HyperNode/a\.spec\.members\[0\]\.selector\.labelMatch\.matchExpressions\[0\]\.values: must be a list of strings"),
        ([hypernode("a", 1, [labels({"matchExpressions": [{"key": "rack", "operator": "In", "values": [1]}]})])],
         r"HyperNode/a\.spec\.members\[0\]\.selector\.labelMatch\.matchExpressions\[0\]\.values: must be a list of strings"),
        ([hypernode("a", 1, [labels({"matchLabels": {1: "r1"}})])], r"HyperNode/a\.spec\.members\[0\]\.selector\.labelMatch\.matchLabels: must map strings to strings"),
    ],
    ids=["cycle", "node-in-two", "tier-not-lower", "missing-member", "bad-regex", "hypernode-by-regex", "two-parents", "twice", "tier-type",
         "expressions-not-a-list", "values-not-a-list", "values-not-strings", "label-key-not-a-string"],
)
def test_mistakes_in_the_tree_name_the_hypernode_and_member(tree: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(InputError, match=message):
        adopt_hypernodes(tree, [node("n0"), node("n1")])


def test_a_cycle_is_named_in_order() -> None:
    tree = [hypernode("a", 3, [exact("HyperNode", "b")]), hypernode("b", 2, [exact("HyperNode", "c")]),
            hypernode("c", 1, [exact("Node", "n0"), exact("HyperNode", "a")])]
    with pytest.raises(InputError) as caught:
        adopt_hypernodes(tree, [node("n0")])
    assert any(str(p) == "HyperNode/c.spec.members[1]: cycle: a -> b -> c -> a" for p in caught.value.problems)


def test_nothing_to_adopt_is_said() -> None:
    with pytest.raises(InputError, match="no HyperNode given"):
        adopt_hypernodes([], [node("n0")])
    with pytest.raises(InputError, match="no Node given"):
        adopt_hypernodes([hypernode("a", 1, [exact("Node", "n0")])], [])


def test_a_lone_root_of_tierName_cluster_is_the_whole_cluster_and_no_level() -> None:
    """What tandem's render makes of a hostname-only ClusterTopology: the root alone, over every host."""
    nodes = [node("n0"), node("n1"), Node.model_validate({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"}, "status": {"allocatable": {}}})]
    root = hypernode("default", 1, [{"type": "Node", "selector": {"labelMatch": {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "Exists"}]}}}],
                     "cluster")
    adoption = adopt_hypernodes([root], nodes)
    assert adoption.topology["spec"]["levels"] == [{"name": "host", "nodeLabel": HOSTNAME_LABEL}]
    assert adoption.node_labels == {} and adoption.warnings == ()
