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

Pure: objects in, an `Adoption` out; every mistake in the tree is an InputError naming
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
from tandem.backends.volcano import HYPERNODE_API_VERSION, is_host_level, tier
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
_NAMED = 5  # nodes named in a warning before "and N more"


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


@dataclass(frozen=True)
class _Member:
    index: int
    type: str
    exact: str | None = None
    regex: re.Pattern[str] | None = None
    match_labels: Mapping[str, str] | None = None
    expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class _HyperNode:
    name: str
    tier: int
    tier_name: str
    labels: Mapping[str, str]
    members: tuple[_Member, ...]


def adopt_hypernodes(hypernodes: Sequence[Mapping[str, Any]], nodes: Sequence[Node], name: str = "default") -> Adoption:
    """The ClusterTopology `name` that the HyperNode tree describes over `nodes`."""
    if not hypernodes:
        raise InputError(Problem("", "no HyperNode given: nothing to adopt"))
    if not nodes:
        raise InputError(Problem("", "no Node given: HyperNode members are resolved against the nodes"))
    tree = {hn.name: hn for hn in _parse_all(hypernodes)}
    labels = {node.metadata.name: dict(node.metadata.labels) for node in nodes}
    warnings: list[str] = []
    nodes_of = _resolve(tree, labels, warnings)
    tiers = sorted({hn.tier for hn in tree.values()}, reverse=True)
    domains = _domains(tree, tiers, nodes_of)  # tier -> node -> HyperNode
    top = tiers[0]
    under_root = set(domains[top])
    if _is_tandem_root([tree[h] for h in set(domains[top].values())], domains, tiers):
        tiers = tiers[1:]  # with nothing left, the nodes under the root are hosts and no more
    full = sorted(set.intersection(*(set(domains[t]) for t in tiers)) if tiers else under_root)
    partial = sorted(set().union(*(set(domains[t]) for t in tiers)) - set(full)) if tiers else []
    if partial:
        warnings.append(
            f"{len(partial)} node(s) are not under a HyperNode of every tier ({_few(partial)}): tandem counts them in no domain"
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
        warnings.append(f"{len(no_host)} node(s) lack the {HOSTNAME_LABEL} label ({_few(no_host)}): tandem counts them in no domain")
    if strays:
        warnings.append(
            f"{len(strays)} node(s) carry every level label but are under no HyperNode of some tier ({_few(strays)}): "
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
    return [f"{len(straddling)} HyperNode(s) of a tier hold nodes of several HyperNodes of the next tier up ({_few(straddling)}): "
            "tandem's domains nest, so it counts each such HyperNode as one domain per HyperNode above"]


def _derive(tree: dict[str, _HyperNode], tiers: list[int], host_tier: int | None, domains: dict[int, dict[str, str]],
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


# ----------------------------------------------------------------------------- reading the objects


def _parse_all(raw: Sequence[Mapping[str, Any]]) -> list[_HyperNode]:
    problems: list[Problem] = []
    parsed: list[_HyperNode] = []
    seen: set[str] = set()
    for index, obj in enumerate(raw):
        hn = _parse(obj, index, problems)
        if hn is None:
            continue
        if hn.name in seen:
            problems.append(Problem(f"HyperNode/{hn.name}", "given twice"))
            continue
        seen.add(hn.name)
        parsed.append(hn)
    if problems:
        raise InputError(problems)
    return parsed


def _parse(obj: Mapping[str, Any], index: int, problems: list[Problem]) -> _HyperNode | None:
    if not isinstance(obj, Mapping):
        problems.append(Problem(f"HyperNode[{index}]", "must be a mapping (an object)"))
        return None
    if obj.get("apiVersion") != HYPERNODE_API_VERSION or obj.get("kind") != "HyperNode":
        problems.append(Problem(f"HyperNode[{index}]", f"is {obj.get('apiVersion')}/{obj.get('kind')}, not {HYPERNODE_API_VERSION}/HyperNode"))
        return None
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(meta, Mapping) or not isinstance(name, str) or not name:
        problems.append(Problem(f"HyperNode[{index}].metadata.name", "required field is missing or not a string"))
        return None
    where = f"HyperNode/{name}"
    before = len(problems)
    raw_labels = meta.get("labels") or {}
    if not isinstance(raw_labels, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw_labels.items()):
        problems.append(Problem(f"{where}.metadata.labels", "must map strings to strings"))
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        problems.append(Problem(f"{where}.spec", "required field is missing or not a mapping"))
        return None
    tier = spec.get("tier")
    if isinstance(tier, bool) or not isinstance(tier, int) or tier < 0:
        problems.append(Problem(f"{where}.spec.tier", f"must be an integer >= 0, got {tier!r}"))
    tier_name = spec.get("tierName") or ""
    if not isinstance(tier_name, str):
        problems.append(Problem(f"{where}.spec.tierName", "must be a string"))
    raw_members = spec.get("members")
    if not isinstance(raw_members, list) or not raw_members:
        problems.append(Problem(f"{where}.spec.members", "must be a non-empty list"))
        raw_members = []
    members = [m for i, item in enumerate(raw_members) if (m := _member(item, i, f"{where}.spec.members[{i}]", problems)) is not None]
    if len(problems) > before:
        return None
    assert isinstance(tier, int) and isinstance(tier_name, str)
    return _HyperNode(name, tier, tier_name, dict(raw_labels), tuple(members))


def _member(item: Any, index: int, path: str, problems: list[Problem]) -> _Member | None:
    if not isinstance(item, Mapping):
        problems.append(Problem(path, "must be a mapping (an object)"))
        return None
    kind = item.get("type")
    if kind not in ("Node", "HyperNode"):
        problems.append(Problem(f"{path}.type", f"must be Node or HyperNode, got {kind!r}"))
        return None
    selector = item.get("selector")
    if not isinstance(selector, Mapping):
        problems.append(Problem(f"{path}.selector", "required field is missing or not a mapping"))
        return None
    given = [k for k in ("exactMatch", "regexMatch", "labelMatch") if selector.get(k) is not None]
    if len(given) != 1:
        problems.append(Problem(f"{path}.selector", "must give exactly one of exactMatch, regexMatch and labelMatch"))
        return None
    chosen = selector[given[0]]
    if kind == "HyperNode" and given[0] != "exactMatch":
        problems.append(Problem(f"{path}.selector.{given[0]}", "a HyperNode member is named by exactMatch (Volcano ignores other selectors here)"))
        return None
    if not isinstance(chosen, Mapping):
        problems.append(Problem(f"{path}.selector.{given[0]}", "must be a mapping"))
        return None
    if given[0] == "exactMatch":
        name = chosen.get("name")
        if not isinstance(name, str) or not name:
            problems.append(Problem(f"{path}.selector.exactMatch.name", "required field is missing or not a string"))
            return None
        return _Member(index, kind, exact=name)
    if given[0] == "regexMatch":
        pattern = chosen.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            problems.append(Problem(f"{path}.selector.regexMatch.pattern", "required field is missing or not a string"))
            return None
        try:
            return _Member(index, kind, regex=re.compile(pattern))
        except re.error as exc:
            problems.append(Problem(f"{path}.selector.regexMatch.pattern", f"not a valid regular expression: {exc}"))
            return None
    return _label_member(chosen, index, kind, f"{path}.selector.labelMatch", problems)


def _label_member(chosen: Mapping[str, Any], index: int, kind: str, path: str, problems: list[Problem]) -> _Member | None:
    match_labels = chosen.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in match_labels.items()):
        problems.append(Problem(f"{path}.matchLabels", "must map strings to strings"))
        return None
    raw_expressions = chosen.get("matchExpressions") or []
    if not isinstance(raw_expressions, list):
        problems.append(Problem(f"{path}.matchExpressions", "must be a list"))
        return None
    expressions: list[tuple[str, str, tuple[str, ...]]] = []
    for i, expr in enumerate(raw_expressions):
        at = f"{path}.matchExpressions[{i}]"
        if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str):
            problems.append(Problem(at, "needs a key and an operator"))
            return None
        operator, values = expr.get("operator"), expr.get("values") or []
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            problems.append(Problem(f"{at}.operator", f"must be In, NotIn, Exists or DoesNotExist, got {operator!r}"))
            return None
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            problems.append(Problem(f"{at}.values", "must be a list of strings"))
            return None
        expressions.append((expr["key"], operator, tuple(values)))
    if not match_labels and not expressions:
        problems.append(Problem(path, "selects nothing (Volcano takes an empty labelMatch as no node)"))
        return None
    return _Member(index, kind, match_labels=dict(match_labels), expressions=tuple(expressions))


# ----------------------------------------------------------------------------- resolving the tree


def _selects(member: _Member, name: str, labels: Mapping[str, str]) -> bool:
    if member.regex is not None:
        return member.regex.search(name) is not None  # Go's MatchString: anywhere in the name
    assert member.match_labels is not None
    if any(labels.get(k) != v for k, v in member.match_labels.items()):
        return False
    for key, operator, values in member.expressions:
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _resolve(tree: dict[str, _HyperNode], labels: dict[str, dict[str, str]], warnings: list[str]) -> dict[str, dict[str, int]]:
    """Each HyperNode's nodes (node -> the member index that brings it in); the tree's
    mistakes (missing, twice-parented, cyclic or tier-inverted members) all at once."""
    problems: list[Problem] = []
    parent: dict[str, tuple[str, int]] = {}
    children: dict[str, list[tuple[int, str]]] = {name: [] for name in tree}
    direct: dict[str, dict[str, int]] = {name: {} for name in tree}
    absent: set[str] = set()
    by_label = _LabelIndex(labels)
    for name in sorted(tree):
        hn = tree[name]
        for m in hn.members:
            at = f"HyperNode/{name}.spec.members[{m.index}]"
            if m.type == "HyperNode":
                assert m.exact is not None
                member = tree.get(m.exact)
                if member is None:
                    problems.append(Problem(at, f"HyperNode {m.exact!r} does not exist"))
                    continue
                if m.exact in parent:
                    first, index = parent[m.exact]
                    problems.append(Problem(at, f"HyperNode {m.exact!r} is already a member of HyperNode {first!r} "
                                                f"(spec.members[{index}]): a HyperNode has one parent"))
                    continue
                parent[m.exact] = (name, m.index)
                if member.tier >= hn.tier:
                    problems.append(Problem(at, f"HyperNode {m.exact!r} is of tier {member.tier}, not lower than its parent's tier {hn.tier}"))
                children[name].append((m.index, m.exact))
            elif m.exact is not None:
                if m.exact in labels:
                    direct[name].setdefault(m.exact, m.index)
                else:
                    absent.add(m.exact)
            else:
                for node in _candidate_nodes(m, labels, by_label):
                    if _selects(m, node, labels[node]):
                        direct[name].setdefault(node, m.index)
    problems += _cycles(tree, children)
    if problems:
        raise InputError(problems)
    if absent:
        warnings.append(f"{len(absent)} node(s) named by HyperNodes are not among the nodes ({_few(sorted(absent))}): left out")
    nodes_of: dict[str, dict[str, int]] = {}
    for name in _post_order(tree, children):
        found = dict(direct[name])
        for index, child in children[name]:
            for node in nodes_of[child]:
                found.setdefault(node, index)
        nodes_of[name] = found
    return nodes_of


class _LabelIndex:
    """Nodes by label (key, value), built once a key is asked for: a labelMatch per host
    (tandem's own render) must not scan every node for every HyperNode."""

    def __init__(self, labels: dict[str, dict[str, str]]):
        self.labels = labels
        self.by_key: dict[str, dict[str, list[str]]] = {}

    def nodes(self, key: str, value: str) -> list[str]:
        if key not in self.by_key:
            table: dict[str, list[str]] = {}
            for node in sorted(self.labels):
                if key in self.labels[node]:
                    table.setdefault(self.labels[node][key], []).append(node)
            self.by_key[key] = table
        return self.by_key[key].get(value, [])


def _candidate_nodes(member: _Member, labels: dict[str, dict[str, str]], index: _LabelIndex) -> list[str]:
    """The nodes a member may select: those with its rarest matchLabels pair, else all."""
    if member.match_labels:
        return min((index.nodes(k, v) for k, v in sorted(member.match_labels.items())), key=len)
    return sorted(labels)


def _cycles(tree: dict[str, _HyperNode], children: dict[str, list[tuple[int, str]]]) -> list[Problem]:
    """A problem at the member that closes each cycle (its HyperNodes named in order)."""
    problems: list[Problem] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done
    for start in sorted(tree):
        if start in state:
            continue
        path: list[str] = [start]
        stack = [iter(sorted(children[start]))]
        state[start] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            index, child = step
            if state.get(child) == 1:
                cycle = path[path.index(child):] + [child]
                problems.append(Problem(f"HyperNode/{path[-1]}.spec.members[{index}]", f"cycle: {' -> '.join(cycle)}"))
            elif child not in state:
                state[child] = 1
                path.append(child)
                stack.append(iter(sorted(children[child])))
    return problems


def _post_order(tree: dict[str, _HyperNode], children: dict[str, list[tuple[int, str]]]) -> list[str]:
    order: list[str] = []
    done: set[str] = set()
    for start in sorted(tree):
        stack: list[tuple[str, bool]] = [(start, False)]
        while stack:
            name, expanded = stack.pop()
            if name in done:
                continue
            if expanded:
                done.add(name)
                order.append(name)
                continue
            stack.append((name, True))
            stack.extend((child, False) for _, child in children[name] if child not in done)
    return order


def _domains(tree: dict[str, _HyperNode], tiers: list[int], nodes_of: dict[str, dict[str, int]]) -> dict[int, dict[str, str]]:
    """tier -> node -> its HyperNode of that tier; a node in two of one tier is a problem."""
    problems: list[Problem] = []
    domains: dict[int, dict[str, str]] = {tier: {} for tier in tiers}
    for name in sorted(tree):
        hn = tree[name]
        for node, index in sorted(nodes_of[name].items()):
            first = domains[hn.tier].setdefault(node, name)
            if first != name:
                problems.append(Problem(f"HyperNode/{name}.spec.members[{index}]",
                                        f"node {node!r} is also in HyperNode {first!r} of the same tier {hn.tier}"))
    if problems:
        raise InputError(problems)
    return domains


def _is_tandem_root(top: list[_HyperNode], domains: dict[int, dict[str, str]], tiers: list[int]) -> bool:
    """tandem's render hangs its tree from one HyperNode of tierName `cluster` over every node."""
    if len(top) != 1 or top[0].tier_name != RESERVED_LEVEL:
        return False
    return len(tiers) == 1 or set(domains[tiers[0]]) >= set(domains[tiers[1]])


# ----------------------------------------------------------------------------- levels


def _is_host_tier(members: list[_HyperNode], nodes_of: dict[str, dict[str, int]]) -> bool:
    """A tier of one node per HyperNode that the tree itself keys on the hostname label (its
    tierName, or its labelMatch as tandem's render writes it for a hostname level) is that
    level; any other tier of single nodes stays a level of its own, as it may grow."""
    return all(len(nodes_of[hn.name]) == 1 for hn in members) and all(
        hn.tier_name == HOSTNAME_LABEL or any(m.match_labels and HOSTNAME_LABEL in m.match_labels for m in hn.members) for hn in members
    )


def _level_name(members: list[_HyperNode], tier: int, used: set[str]) -> str:
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


def _host_level_name(tree: dict[str, _HyperNode], domains: dict[int, dict[str, str]], host_tier: int | None,
                     full: list[str], used: set[str]) -> str:
    if host_tier is not None:
        named = _level_name([tree[domains[host_tier][n]] for n in full], host_tier, used)
        if not named.startswith("tier-"):
            return named
    for candidate in _HOST_NAMES:
        if candidate not in used:
            return candidate
    return _unique("host", used)


def _matching_label(tier: int, members: list[str], tree: dict[str, _HyperNode], full: list[str], domain: dict[str, str],
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


def _candidates(tier: int, members: list[str], tree: dict[str, _HyperNode]) -> list[str]:
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


def _few(names: list[str]) -> str:
    shown = ", ".join(names[:_NAMED])
    return shown + (f" and {len(names) - _NAMED} more" if len(names) > _NAMED else "")


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
