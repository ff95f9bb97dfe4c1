"""A HyperNode tree as Volcano stores it: the objects read and checked, members resolved
to the nodes they select, and each tier's domains.

Volcano's HyperNode (`topology.volcano.sh/v1alpha1`, the CRD in ../shared/schemas) lists
members of type Node (selected by `exactMatch` name, `regexMatch` on the name, or
`labelMatch`) or HyperNode (by `exactMatch` name only, as Volcano resolves them). Reading
reports every mistake at `HyperNode/<name>.<field>`: a cycle, a node in two HyperNodes of
one tier, a member of a tier not lower than its parent's, a missing member, a HyperNode
listed by two parents, a bad selector. `volcano_adopt` derives a ClusterTopology from the
result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from tandem.backends.volcano import HYPERNODE_API_VERSION
from tandem.errors import InputError, Problem

NAMED = 5  # names shown in a message before "and N more"


@dataclass(frozen=True)
class Member:
    index: int
    type: str
    exact: str | None = None
    regex: re.Pattern[str] | None = None
    match_labels: Mapping[str, str] | None = None
    expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class HyperNodeEntry:
    name: str
    tier: int
    tier_name: str
    labels: Mapping[str, str]
    members: tuple[Member, ...]


def few_names(names: list[str]) -> str:
    shown = ", ".join(names[:NAMED])
    return shown + (f" and {len(names) - NAMED} more" if len(names) > NAMED else "")


# ----------------------------------------------------------------------------- reading the objects


def parse_hypernodes(raw: Sequence[Mapping[str, Any]]) -> list[HyperNodeEntry]:
    problems: list[Problem] = []
    parsed: list[HyperNodeEntry] = []
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


def _parse(obj: Mapping[str, Any], index: int, problems: list[Problem]) -> HyperNodeEntry | None:
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
    return HyperNodeEntry(name, tier, tier_name, dict(raw_labels), tuple(members))


def _member(item: Any, index: int, path: str, problems: list[Problem]) -> Member | None:
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
        return Member(index, kind, exact=name)
    if given[0] == "regexMatch":
        pattern = chosen.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            problems.append(Problem(f"{path}.selector.regexMatch.pattern", "required field is missing or not a string"))
            return None
        try:
            return Member(index, kind, regex=re.compile(pattern))
        except re.error as exc:
            problems.append(Problem(f"{path}.selector.regexMatch.pattern", f"not a valid regular expression: {exc}"))
            return None
    return _label_member(chosen, index, kind, f"{path}.selector.labelMatch", problems)


def _label_member(chosen: Mapping[str, Any], index: int, kind: str, path: str, problems: list[Problem]) -> Member | None:
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
    return Member(index, kind, match_labels=dict(match_labels), expressions=tuple(expressions))


# ----------------------------------------------------------------------------- resolving the tree


def _selects(member: Member, name: str, labels: Mapping[str, str]) -> bool:
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


def resolve_members(tree: dict[str, HyperNodeEntry], labels: dict[str, dict[str, str]], warnings: list[str]) -> dict[str, dict[str, int]]:
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
        warnings.append(f"{len(absent)} node(s) named by HyperNodes are not among the nodes ({few_names(sorted(absent))}): left out")
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


def _candidate_nodes(member: Member, labels: dict[str, dict[str, str]], index: _LabelIndex) -> list[str]:
    """The nodes a member may select: those with its rarest matchLabels pair, else all."""
    if member.match_labels:
        return min((index.nodes(k, v) for k, v in sorted(member.match_labels.items())), key=len)
    return sorted(labels)


def _cycles(tree: dict[str, HyperNodeEntry], children: dict[str, list[tuple[int, str]]]) -> list[Problem]:
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


def _post_order(tree: dict[str, HyperNodeEntry], children: dict[str, list[tuple[int, str]]]) -> list[str]:
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


def tier_domains(tree: dict[str, HyperNodeEntry], tiers: list[int], nodes_of: dict[str, dict[str, int]]) -> dict[int, dict[str, str]]:
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
