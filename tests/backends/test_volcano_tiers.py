"""Volcano tiers are numbered as Volcano's own label discoverer numbers them.

The rule, restated from volcano-sh/volcano at commit ed72c7c815a9,
`pkg/controllers/hypernode/discovery/label/label.go`:

- `parseCfg`: a network topology type lists node labels broadest first with
  `kubernetes.io/hostname` last; the loop `for i := len(labels) - 2; i >= 0; i--` drops
  that last label (a host is a Node, not a HyperNode) and reverses the rest, narrowest first.
- `generateHyperNodeInfo`: the i-th label of that reversed list gives HyperNodes of
  `tier := i + 1` with `tierName: key` (the label key).
- `getMemberType`: tier 1 HyperNodes have Node members, every other tier HyperNode members.

The scheduler resolves `highestTierName` to a tier number by the HyperNodes' tierName
(`pkg/scheduler/framework/session.go`, `translateHighestTierNameToAllowed`) and otherwise
reads `highestTierAllowed` as is, so a PodGroup tandem renders must name the same level on
discovered HyperNodes as on tandem's: the numbers must agree level by level. tandem adds
one HyperNode the discoverer does not build: the root, one tier above the broadest.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from tandem.api.loading import load_texts
from tandem.api.naming import HOSTNAME_LABEL
from tandem.api.resources import ClusterTopology
from tandem.backends.registry import get_backend
from tandem.backends.volcano import tier
from tandem.errors import InputError

ROOT_TIER_NAME = "cluster"  # tandem's synthetic root, one tier above the broadest level


def parse_cfg(labels: list[str]) -> list[str]:
    """`parseCfg`: drop the last label (the hostname) and reverse the others."""
    return [labels[i] for i in range(len(labels) - 2, -1, -1)]


def discovered_tiers(topology: ClusterTopology) -> dict[str, int]:
    """Label key -> tier, as `generateHyperNodeInfo` numbers the labels of `parse_cfg`.

    The discoverer's configuration for a ClusterTopology is its level labels, broadest
    first, with the hostname label last (appended when the topology has no host level:
    `parseCfg` always drops the last label)."""
    labels = [level.node_label for level in topology.spec.levels]
    if labels[-1] != HOSTNAME_LABEL:
        labels.append(HOSTNAME_LABEL)
    return {key: i + 1 for i, key in enumerate(parse_cfg(labels))}


def discovered_member_type(tier_number: int) -> str:
    """`getMemberType`."""
    return "Node" if tier_number == 1 else "HyperNode"


@st.composite
def clusters(draw: st.DrawFn) -> tuple[ClusterTopology, list[Any]]:
    """A ClusterTopology of 1-5 levels (hostname last or absent) and nodes labelled for it."""
    count = draw(st.integers(1, 5))
    with_host = draw(st.booleans())
    names = [f"l{i}" for i in range(count - 1)] + ["host" if with_host else f"l{count - 1}"]
    levels = [{"name": name, "nodeLabel": f"net.example.com/{name}"} for name in names]
    if with_host:
        levels[-1]["nodeLabel"] = HOSTNAME_LABEL
    topology = {"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": "fabric"}, "spec": {"levels": levels}}
    nodes = []
    for n in range(draw(st.integers(1, 6))):
        labels = {level["nodeLabel"]: draw(st.sampled_from(["a", "b"])) for level in levels}
        labels[HOSTNAME_LABEL] = f"node-{n}"
        status = {"allocatable": {"cpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}]}
        nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{n}", "labels": labels}, "spec": {}, "status": status})
    inputs = load_texts([("test", "\n---\n".join(json.dumps(obj) for obj in [topology, *nodes]))])
    return inputs.topologies["fabric"], inputs.nodes


@settings(max_examples=examples(60), deadline=None)
@given(clusters())
def test_tiers_match_volcanos_label_discoverer_level_by_level(cluster: tuple[ClusterTopology, list[Any]]) -> None:
    topology, nodes = cluster
    discovered = discovered_tiers(topology)
    broadest = max(discovered.values(), default=0)
    level_of_tier = {}
    for level in topology.spec.levels:
        if level.node_label == HOSTNAME_LABEL:
            with pytest.raises(InputError, match="not a Volcano tier"):
                tier(topology, level.name)
        else:
            assert tier(topology, level.name) == discovered[level.node_label], level.name
            level_of_tier[discovered[level.node_label]] = level.name

    rendered = get_backend("volcano").render_topology(topology, nodes)
    for hypernode in rendered:
        spec = hypernode["spec"]
        if spec["tierName"] == ROOT_TIER_NAME:
            assert spec["tier"] == broadest + 1 and hypernode["metadata"]["name"] == topology.metadata.name
        else:
            # tandem names a tier by its level; the discoverer by the level's label: the same level
            assert spec["tierName"] == level_of_tier[spec["tier"]]
        assert {member["type"] for member in spec["members"]} == {discovered_member_type(spec["tier"])}
        for member in spec["members"]:
            if member["type"] == "Node":
                assert HOSTNAME_LABEL not in member["selector"]["labelMatch"].get("matchLabels", {})
    assert {o["spec"]["tier"] for o in rendered} == set(range(1, broadest + 2))
    assert sum(o["spec"]["tierName"] == ROOT_TIER_NAME for o in rendered) == 1
