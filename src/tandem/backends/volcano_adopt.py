"""Adopting the HyperNodes Volcano already has: the ClusterTopology their tree describes.

Volcano's discoverers build HyperNodes of their own (the label discoverer from node labels,
UFM from InfiniBand leaf switches, by hand); tandem writing a second tree beside them
would clash. `adopt_hypernodes` reads the tree instead and derives the ClusterTopology
that partitions the nodes exactly as the tree does:

- One level per tier present, broadest first, then a `kubernetes.io/hostname` level (a
  lowest tier of one node per HyperNode keyed on that label is that level). A single top HyperNode
  with tierName `cluster` is tandem's own root (`VolcanoBackend.render_topology`): the
  whole cluster, which every ClusterTopology has already, so it is no level.
- A level's name is the tier's tierName as a DNS label (a label key gives its last
  segment), or `tier-<k>` when there is none or it clashes.
- A level's nodeLabel is a node label the tree itself names (the tierName, a key every
  HyperNode of the tier records, a key of a `labelMatch`) whose values split the nodes as
  the tier does; the label discoverer's trees always have one, so nothing is written.
  Otherwise `topology.tandem.dev/tier-<k>`, valued on each node with the name of its
  tier-k HyperNode; `Adoption.node_labels` lists what each node needs.

Pure: objects in, an `Adoption` out. Reading the HyperNodes and resolving their members
is `hypernode_tree`; every mistake in the tree is an InputError naming
`HyperNode/<name>.<field>`.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pydantic import ValidationError

from tandem.api.kube import Node
from tandem.api.loading import validation_problems
from tandem.api.naming import HOSTNAME_LABEL
from tandem.api.resources import API_VERSION, ClusterTopology
from tandem.api.validation import RESERVED_LEVEL, check_topology
from tandem.backends.hypernode_tree import HyperNodeEntry, few_names, parse_hypernodes, resolve_members, tier_domains
from tandem.backends.volcano import is_host_level, tier
from tandem.errors import InputError, Problem

SOURCE_LABEL = "volcano.sh/network-topology-source"  # volcano pkg/controllers/hypernode/api: NetworkTopologySourceLabelKey
TIER_LABEL_PREFIX = "topology.tandem.dev/tier-"
MAX_LEVELS = 16  # ClusterTopologySpec.levels
_BOOKKEEPING_LABELS = frozenset({SOURCE_LABEL, "app.kubernetes.io/managed-by", "tandem.dev/topology"})
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_NOT_DNS = re.compile(r"[^a-z0-9-]+")
_HOST_NAMES = ("host", "hostname", "node")
NAMED = 5  # nodes named in a warning before "and N more"


@dataclass(frozen=True)
class AdoptedLevel:
    """One level of the derived ClusterTopology and where it came from."""

    name: str
    node_label: str
    tier: int | None  # None: the hostname level appended below the tree
    hypernodes: int
    written: bool  # the label is tandem's and nodes must carry it (see Adoption.node_labels)


@dataclass(frozen=True)
class Adoption:
    topology: dict[str, Any]  # the ClusterTopology manifest, ready to apply
    levels: tuple[AdoptedLevel, ...]
    node_labels: dict[str, dict[str, str | None]]  # node -> {label: value, or None to remove}; sorted
    warnings: tuple[str, ...] = field(default=())


def adopt_hypernodes(hypernodes: Sequence[Mapping[str, Any]], nodes: Sequence[Node], name: str = "default") -> Adoption:
    """The ClusterTopology `name` that the HyperNode tree describes over `nodes`."""
    if not hypernodes:
        raise InputError(Problem("", "no HyperNode given: nothing to adopt"))
    if not nodes:
        raise InputError(Problem("", "no Node given: HyperNode members are resolved against the nodes"))
    tree = {hn.name: hn for hn in parse_hypernodes(hypernodes)}
    labels = {node.metadata.name: dict(node.metadata.labels) for node in nodes}
    warnings: list[str] = []
    nodes_of = resolve_members(tree, labels, warnings)
    tiers = sorted({hn.tier for hn in tree.values()}, reverse=True)
    domains = tier_domains(tree, tiers, nodes_of)  # tier -> node -> HyperNode
    top = tiers[0]
    under_root = set(domains[top])
    if _is_tandem_root([tree[h] for h in set(domains[top].values())], domains, tiers):
        tiers = tiers[1:]  # with nothing left, the nodes under the root are hosts and no more
    full = sorted(set.intersection(*(set(domains[t]) for t in tiers)) if tiers else under_root)
    partial = sorted(set().union(*(set(domains[t]) for t in tiers)) - set(full)) if tiers else []
    if partial:
        warnings.append(
            f"{len(partial)} node(s) are not under a HyperNode of every tier ({few_names(partial)}): tandem counts them in no domain"
        )
    if not full:
        raise InputError(Problem("", "no node is under a HyperNode of every tier: the tree describes no domain tandem can use"))
    warnings += _unnested(tiers, domains, full)
    lowest = tiers[-1] if tiers else None
    singles = lowest if lowest is not None and _is_host_tier([tree[h] for h in set(domains[lowest].values())], nodes_of) else None
    levels, writes, strays = _derive(tree, tiers, singles, domains, full, labels)
    if strays and singles is not None:  # nodes outside the tree would join the hostname level: keep the tier apart
        levels, writes, strays = _derive(tree, tiers, None, domains, full, labels)
    no_host = [n for n in full if HOSTNAME_LABEL not in labels[n]]
    if no_host:
        warnings.append(f"{len(no_host)} node(s) lack the {HOSTNAME_LABEL} label ({few_names(no_host)}): tandem counts them in no domain")
    if strays:
        warnings.append(
            f"{len(strays)} node(s) carry every level label but are under no HyperNode of some tier ({few_names(strays)}): "
            "tandem counts them in a domain that Volcano's HyperNodes leave them out of"
        )
    topology = {
        "apiVersion": API_VERSION,
        "kind": "ClusterTopology",
        "metadata": {"name": name},
        "spec": {"levels": [{"name": lv.name, "nodeLabel": lv.node_label} for lv in levels]},
    }
    warnings += _tier_numbering(_check(topology), levels)
    return Adoption(topology, tuple(levels), {n: dict(sorted(writes[n].items())) for n in sorted(writes)}, tuple(warnings))


def _unnested(tiers: list[int], domains: dict[int, dict[str, str]], full: list[str]) -> list[str]:
    """A warning naming the HyperNodes whose nodes lie in several HyperNodes of the next tier up
    (each tier listing its nodes itself, not its children): tandem's domains are label paths,
    so such a HyperNode becomes one domain per HyperNode above it. Nested at each step is
    nested throughout."""
    straddling: list[str] = []
    for upper, lower in zip(tiers, tiers[1:]):
        above: dict[str, set[str]] = {}
        for n in full:
            above.setdefault(domains[lower][n], set()).add(domains[upper][n])
        straddling += [f"{hn} (tier {lower}) in {' and '.join(sorted(parents))}" for hn, parents in sorted(above.items()) if len(parents) > 1]
    if not straddling:
        return []
    return [f"{len(straddling)} HyperNode(s) of a tier hold nodes of several HyperNodes of the next tier up ({few_names(straddling)}): "
            "tandem's domains nest, so it counts each such HyperNode as one domain per HyperNode above"]


def _derive(tree: dict[str, HyperNodeEntry], tiers: list[int], host_tier: int | None, domains: dict[int, dict[str, str]],
            full: list[str], labels: dict[str, dict[str, str]]) -> tuple[list[AdoptedLevel], dict[str, dict[str, str | None]], list[str]]:
    """(levels, node label writes, stray nodes) with `host_tier`, if any, taken as the hostname level.

    Strays carry every level label yet are not under a HyperNode of every tier: tandem
    would count them in domains the tree leaves them out of."""
    tree_tiers = [t for t in tiers if t != host_tier]
    if len(tree_tiers) + 1 > MAX_LEVELS:
        raise InputError(Problem("", f"the HyperNodes have {len(tree_tiers)} tiers; a ClusterTopology has at most {MAX_LEVELS} levels"))
    used_names: set[str] = set()
    used_keys: set[str] = {HOSTNAME_LABEL}
    levels: list[AdoptedLevel] = []
    writes: dict[str, dict[str, str | None]] = {}
    context: dict[str, str | None] = {n: None for n in full}  # each node's domain one level up
    for tier in tree_tiers:
        members = sorted(set(domains[tier][n] for n in full))
        level_name = _level_name([tree[h] for h in members], tier, used_names)
        key = _matching_label(tier, members, tree, full, domains[tier], context, labels, used_keys)
        written = key is None
        if key is None:
            key = f"{TIER_LABEL_PREFIX}{tier}"
            for n in full:
                value = label_value(domains[tier][n])
                if labels[n].get(key) != value:
                    writes.setdefault(n, {})[key] = value
        used_names.add(level_name)
        used_keys.add(key)
        levels.append(AdoptedLevel(level_name, key, tier, len(members), written))
        context = {n: domains[tier][n] for n in full}
    host_name = _host_level_name(tree, domains, host_tier, full, used_names)
    hosts = len(set(domains[host_tier][n] for n in full)) if host_tier is not None else 0
    levels.append(AdoptedLevel(host_name, HOSTNAME_LABEL, host_tier, hosts, False))
    full_set = set(full)
    for n in sorted(labels):
        if n not in full_set:
            for level in levels:
                if level.written and level.node_label in labels[n]:
                    writes.setdefault(n, {})[level.node_label] = None  # a stale value would put the node in a domain
    keys = [lv.node_label for lv in levels]
    strays = sorted(n for n in labels if n not in full_set and all(_after(labels[n], writes.get(n, {})).get(k) is not None for k in keys))
    return levels, writes, strays


def label_value(hypernode: str) -> str:
    """A HyperNode's name as a label value: itself when it is one, else cut with a hash that keeps it unique."""
    if len(hypernode) <= 63 and _LABEL_VALUE.match(hypernode):
        return hypernode
    digest = hashlib.sha256(hypernode.encode()).hexdigest()[:8]
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "-", hypernode)[:54].strip("-_.")
    return f"{clean}-{digest}" if clean else digest


# ----------------------------------------------------------------------------- levels


def _is_tandem_root(top: list[HyperNodeEntry], domains: dict[int, dict[str, str]], tiers: list[int]) -> bool:
    """tandem's render hangs its tree from one HyperNode of tierName `cluster` over every node."""
    if len(top) != 1 or top[0].tier_name != RESERVED_LEVEL:
        return False
    return len(tiers) == 1 or set(domains[tiers[0]]) >= set(domains[tiers[1]])




def _is_host_tier(members: list[HyperNodeEntry], nodes_of: dict[str, dict[str, int]]) -> bool:
    """A tier of one node per HyperNode that the tree itself keys on the hostname label (its
    tierName, or its labelMatch as tandem's render writes it for a hostname level) is that
    level; any other tier of single nodes stays a level of its own, as it may grow."""
    return all(len(nodes_of[hn.name]) == 1 for hn in members) and all(
        hn.tier_name == HOSTNAME_LABEL or any(m.match_labels and HOSTNAME_LABEL in m.match_labels for m in hn.members) for hn in members
    )


def _level_name(members: list[HyperNodeEntry], tier: int, used: set[str]) -> str:
    names = {hn.tier_name for hn in members}
    fallback = _unique(f"tier-{tier}", used)
    if len(names) != 1:
        return fallback
    text = names.pop().rsplit("/", 1)[-1]
    clean = _NOT_DNS.sub("-", text.lower()).strip("-")[:63].strip("-")
    if not clean or clean == RESERVED_LEVEL or clean in used or not _DNS_LABEL.match(clean):
        return fallback
    return clean


def _unique(base: str, used: set[str]) -> str:
    candidate, n = base, 2
    while candidate in used:
        candidate, n = f"{base}-{n}", n + 1
    return candidate


def _host_level_name(tree: dict[str, HyperNodeEntry], domains: dict[int, dict[str, str]], host_tier: int | None,
                     full: list[str], used: set[str]) -> str:
    if host_tier is not None:
        named = _level_name([tree[domains[host_tier][n]] for n in full], host_tier, used)
        if not named.startswith("tier-"):
            return named
    for candidate in _HOST_NAMES:
        if candidate not in used:
            return candidate
    return _unique("host", used)


def _matching_label(tier: int, members: list[str], tree: dict[str, HyperNodeEntry], full: list[str], domain: dict[str, str],
                    context: dict[str, str | None], labels: dict[str, dict[str, str]], used: set[str]) -> str | None:
    """A node label the tree names whose values split the nodes as this tier does, within
    each domain of the tier above (tandem's domains are label-value paths)."""
    for key in _candidates(tier, members, tree):
        if key in used:
            continue
        value_of: dict[str, str] = {}
        owner: dict[tuple[str | None, str], str] = {}
        fits = True
        for n in full:
            value = labels[n].get(key)
            hn = domain[n]
            recorded = tree[hn].labels.get(key)
            if value is None or (recorded is not None and value != recorded) or value_of.setdefault(hn, value) != value:
                fits = False
                break
            if owner.setdefault((context[n], value), hn) != hn:
                fits = False
                break
        if fits:
            return key
    return None


def _candidates(tier: int, members: list[str], tree: dict[str, HyperNodeEntry]) -> list[str]:
    """Label keys the tree names for this tier: the tierName, keys every HyperNode of the
    tier records, and keys of any labelMatch in the tree (tandem's own tier labels are
    always re-derived, so a stale value is rewritten)."""
    found: list[str] = []
    names = {tree[h].tier_name for h in members}
    if len(names) == 1:
        found.append(names.pop())
    recorded = set.intersection(*(set(tree[h].labels) for h in members)) - _BOOKKEEPING_LABELS
    found += sorted(recorded)
    found += sorted({k for hn in tree.values() for m in hn.members if m.match_labels for k in m.match_labels})
    return [k for k in dict.fromkeys(found) if k and k != HOSTNAME_LABEL and not k.startswith(TIER_LABEL_PREFIX)
            and len(k) <= 316 and _LABEL_KEY.match(k)]


# ----------------------------------------------------------------------------- small helpers


def _after(current: Mapping[str, str], writes: Mapping[str, str | None]) -> dict[str, str | None]:
    merged: dict[str, str | None] = dict(current)
    merged.update(writes)
    return merged


def _check(topology: dict[str, Any]) -> ClusterTopology:
    """The derived topology, typed, once it passes tandem's own validation (its name is the caller's)."""
    try:
        model = ClusterTopology.model_validate(topology)
    except ValidationError as exc:
        raise InputError(validation_problems(topology, exc, "")) from None
    problems = check_topology(model)
    if problems:
        raise InputError(problems)
    return model


def _tier_numbering(topology: ClusterTopology, levels: list[AdoptedLevel]) -> list[str]:
    """A warning when the tree's tiers differ from the tiers tandem asks Volcano for
    (`volcano.tier`: the narrowest level but the hostname one is 1, no gaps): on such a
    tree `highestTierAllowed` would name another level (a gap, a tree not starting at 1,
    or a tier of single hosts, as tandem rendered them before hostname stopped being one)."""
    wrong = [
        f"level {lv.name!r} is tier {lv.tier} here but tandem asks Volcano for tier {tier(topology, lv.name)} when a group packs on it"
        for lv in levels
        if lv.tier is not None and not is_host_level(topology, lv.name) and lv.tier != tier(topology, lv.name)
    ]
    if not wrong:
        return []
    return ["the HyperNodes' tiers are not numbered as tandem numbers the levels (the narrowest 1, each broader one more): "
            + "; ".join(wrong) + "; renumber the HyperNodes' spec.tier from 1 at the narrowest level before groups pack on these levels"]


def level_counts(adoption: Adoption) -> Counter[str]:
    """How many nodes each written label goes to (for the CLI's summary)."""
    return Counter(key for writes in adoption.node_labels.values() for key, value in writes.items() if value is not None)
