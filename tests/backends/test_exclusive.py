"""`spec.topology.exclusive` outside tandem's engine: the pods say which unit holds a domain, and
where the scheduler runs kube-scheduler's InterPodAffinity filter, required anti-affinity keeps it.

The property test reads the rendered terms as kube-scheduler does (the newcomer's own terms, and
every existing pod's terms against the newcomer; namespaces and namespace selectors; label
selectors; a domain is a value of the topologyKey label) and checks that it admits a pod exactly
when tandem's rule does: two exclusive units conflict when one has a pod in a domain of its own
exclusive level that also holds a pod of the other; pods of other groups are never in the way.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from support.builders import cluster, group, role
from support.fuzz import examples
from tandem.api.loading import Inputs
from tandem.api.naming import EXCLUSIVE_LABEL
from tandem.backends.base import Full, Unsupported
from tandem.backends.features import feature
from tandem.backends.pods import unit_pods
from tandem.backends.registry import get_backend, matrix_backends
from tandem.errors import InputError

from backends.schemas import SCHEMAS, assert_valid
from backends.test_schemas import kube_of
from backends.variants import load, typed

BLOCK, RACK, HOST = "network.tandem.dev/block", "network.tandem.dev/rack", "kubernetes.io/hostname"
LABELS = {"block": BLOCK, "rack": RACK, "host": HOST}
RENDERING = [b for b in matrix_backends()[1:] if isinstance(b.capabilities()["exclusive"], Full)]
TOPOLOGY = load(cluster("block=2,rack=2,host=2")).topologies["default"]


def exclusive_group(level: str = "rack", **template: Any) -> dict[str, Any]:
    """Two units of two prefill pods, exclusive at `level` and packed nowhere (every backend takes that)."""
    raw = group("ex", [role("prefill", 2, 2, gpus=1, **template)], replicas=2)
    raw["spec"]["topology"] = {"exclusive": level}
    return raw


def test_kueue_is_the_only_scheduler_that_refuses_it() -> None:
    labels = {b.label for b in matrix_backends()[1:]} - {b.label for b in RENDERING}
    assert labels == {"kueue"}
    raw = exclusive_group()
    [problem] = get_backend("kueue").validate(typed(raw), TOPOLOGY)
    assert problem.path == "spec.topology.exclusive"
    assert "cannot honour exclusive domains (each unit's rack domains its own)" in problem.message
    assert "kubernetes-sigs/kueue#15057" in problem.message
    assert isinstance(get_backend("kueue").capabilities()["exclusive"], Unsupported)


@pytest.mark.parametrize("backend", RENDERING, ids=lambda b: b.label)
def test_every_pod_carries_the_label_and_the_same_terms(backend, small_cluster: Inputs) -> None:
    raw = exclusive_group()
    objects = backend.render(typed(raw), small_cluster.topologies["default"], small_cluster.nodes, raw)
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert len(pods) == 4 and all(p["metadata"]["labels"][EXCLUSIVE_LABEL] == "rack" for p in pods)
    assert "&id" not in yaml.safe_dump_all(objects)  # no term shares a dict: `tandem render` prints no aliases
    volcano = get_backend("volcano").render(typed(raw), small_cluster.topologies["default"], manifest=raw)
    assert [p["spec"]["affinity"] for p in pods] == [o["spec"]["affinity"] for o in volcano if o["kind"] == "Pod"]


def test_the_terms_repel_other_exclusive_units_only(small_cluster: Inputs) -> None:
    raw = exclusive_group("block")
    grp = typed(raw)
    pod = get_backend("volcano").prepare_pod(unit_pods(grp, 1, raw)[0], grp, TOPOLOGY)
    exists = {"key": EXCLUSIVE_LABEL, "operator": "Exists"}
    assert pod["spec"]["affinity"]["podAntiAffinity"] == {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {  # other namespaces
                "labelSelector": {"matchExpressions": [exists]},
                "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["serving"]}]},
                "topologyKey": BLOCK,
            },
            {  # other groups here
                "labelSelector": {"matchExpressions": [exists, {"key": "tandem.dev/group", "operator": "NotIn", "values": ["ex"]}]},
                "namespaces": ["serving"],
                "topologyKey": BLOCK,
            },
            {  # other units of this group
                "labelSelector": {
                    "matchExpressions": [
                        exists,
                        {"key": "tandem.dev/group", "operator": "In", "values": ["ex"]},
                        {"key": "tandem.dev/unit", "operator": "NotIn", "values": ["1"]},
                    ]
                },
                "namespaces": ["serving"],
                "topologyKey": BLOCK,
            },
        ]
    }
    node_terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert node_terms == [{"matchExpressions": [{"key": BLOCK, "operator": "Exists"}]}]
    plain = group("plain", [role("prefill", 1, 1, gpus=1)])
    plain_pod = get_backend("volcano").prepare_pod(unit_pods(typed(plain), 0, plain)[0], typed(plain), TOPOLOGY)
    assert EXCLUSIVE_LABEL not in plain_pod["metadata"]["labels"] and "affinity" not in plain_pod["spec"]


def test_the_template_affinity_is_kept_and_every_node_term_needs_the_level_label() -> None:
    """Node selector terms are ORed: the level label is added to each, or one could be met without it."""
    node_affinity = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n-000"]}]},
            ]
        }
    }
    anti = {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": HOST}]}
    raw = exclusive_group(affinity={"nodeAffinity": node_affinity, "podAntiAffinity": anti})
    raw["spec"]["roles"].append(role("decode", 1, 1, gpus=1))
    raw["spec"]["affinity"] = [{"from": "prefill", "to": "decode", "level": "host", "mode": "Preferred"}]
    before = copy.deepcopy(raw)
    grp = typed(raw)
    pod = get_backend("kai").prepare_pod(unit_pods(grp, 0, raw)[0], grp, TOPOLOGY)
    affinity = pod["spec"]["affinity"]
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"] == [{"key": "gpu", "operator": "In", "values": ["h100"]}, {"key": RACK, "operator": "Exists"}]
    assert terms[1] == {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n-000"]}], "matchExpressions": [{"key": RACK, "operator": "Exists"}]}
    required = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required[0] == anti["requiredDuringSchedulingIgnoredDuringExecution"][0] and len(required) == 4
    assert "preferredDuringSchedulingIgnoredDuringExecution" in affinity["podAffinity"]
    assert raw == before


@pytest.mark.skipif(not SCHEMAS.exists(), reason="the upstream CRDs are not here")
@pytest.mark.parametrize("backend", RENDERING, ids=lambda b: b.label)
def test_exclusive_renderings_validate_against_the_upstream_schemas(backend, small_cluster: Inputs) -> None:
    node_affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}
    for level in ("block", "rack", "host"):
        raw = exclusive_group(level, affinity={"nodeAffinity": node_affinity})
        assert_valid(backend.render(typed(raw), small_cluster.topologies["default"], small_cluster.nodes, raw), kube_of(backend))


def test_the_level_needs_the_cluster_topology() -> None:
    raw = group("ex", [role("prefill", 1, 1, gpus=1)])
    raw["spec"]["topology"] = {"exclusive": "rack"}
    for backend in RENDERING:
        with pytest.raises(InputError) as caught:
            backend.render(typed(raw), None)
        assert [p.path for p in caught.value.problems] == ["spec.topologyName"], backend.label
    assert feature("exclusive").detect(typed(raw), None)


# ----------------------------------------------------------------------------- kube-scheduler's reading


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, values, present = expr["key"], expr.get("values", []), expr["key"] in labels
        ok = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels[key] not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[expr["operator"]]
        if not ok:
            return False
    return True


def _term_matches(term: dict[str, Any], owner_namespace: str, pod: dict[str, Any]) -> bool:
    """PodAffinityTerm semantics: no namespaces and no selector means the owner's namespace."""
    namespace = pod["metadata"]["namespace"]
    listed, selector = term.get("namespaces", []), term.get("namespaceSelector")
    if not listed and selector is None:
        in_scope = namespace == owner_namespace
    else:
        in_scope = namespace in listed or (selector is not None and _selects(selector, {"kubernetes.io/metadata.name": namespace}))
    return in_scope and _selects(term["labelSelector"], pod["metadata"]["labels"])


def _anti_terms(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return pod["spec"].get("affinity", {}).get("podAntiAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", [])


def _node_fits(pod: dict[str, Any], node: dict[str, str]) -> bool:
    required = pod["spec"].get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(all(_selects({"matchExpressions": [e]}, node) for e in term.get("matchExpressions", [])) for term in required["nodeSelectorTerms"])


def kube_admits(pod: dict[str, Any], node: dict[str, str], placed: list[tuple[dict[str, Any], dict[str, str]]]) -> bool:
    """InterPodAffinity's Filter for required anti-affinity, both ways, and NodeAffinity's."""
    if not _node_fits(pod, node):
        return False
    namespace = pod["metadata"]["namespace"]
    for other, where in placed:
        for term in _anti_terms(pod):
            key = term["topologyKey"]
            if key in node and where.get(key) == node[key] and _term_matches(term, namespace, other):
                return False
        for term in _anti_terms(other):
            key = term["topologyKey"]
            if key in node and where.get(key) == node[key] and _term_matches(term, other["metadata"]["namespace"], pod):
                return False
    return True


def tandem_allows(owner: tuple, level: str | None, node: tuple, placed: list[tuple[tuple, str | None, tuple]]) -> bool:
    """The documented rule, on domains as tandem sees them: label-value paths from the broadest level."""
    if level is None:
        return True
    depth = {"block": 1, "rack": 2, "host": 3}
    for other, other_level, where in placed:
        if other_level is None or other == owner:
            continue
        if node[: depth[level]] == where[: depth[level]] or node[: depth[other_level]] == where[: depth[other_level]]:
            return False
    return True


LEVELS = st.sampled_from([None, "block", "rack", "host"])


@settings(max_examples=examples(80), deadline=None)
@given(
    levels=st.fixed_dictionaries({(ns, name): LEVELS for ns in ("a", "b") for name in ("g", "h")}),
    reuse_rack_names=st.booleans(),
    steps=st.lists(st.tuples(st.sampled_from([("a", "g"), ("a", "h"), ("b", "g"), ("b", "h")]), st.integers(0, 1), st.integers(0, 1), st.integers(0, 7)), max_size=14),
)
def test_kube_scheduler_reads_the_terms_as_tandem_rules(levels, reuse_rack_names: bool, steps) -> None:
    """With rack names unique, kube-scheduler admits exactly what tandem's rule allows; with a rack
    name reused under two blocks it only ever admits less (label values name its domains)."""
    volcano = get_backend("volcano")
    pods = {}
    for (ns, name), level in levels.items():
        raw = group(name, [role("prefill", 2, 2, gpus=1)], replicas=2, namespace=ns)
        if level is not None:
            raw["spec"]["topology"] = {"exclusive": level}
        grp = typed(raw)
        for unit in range(2):
            pods[(ns, name, unit)] = [volcano.prepare_pod(p, grp, TOPOLOGY) for p in unit_pods(grp, unit, raw)]
    paths = [(f"b{n // 4}", f"b{n // 4}-r{n // 2 % 2}", f"n{n}") for n in range(8)]
    nodes = [{BLOCK: b, RACK: r[-2:] if reuse_rack_names else r, HOST: h} for b, r, h in paths]
    placed_kube: list[tuple[dict[str, Any], dict[str, str]]] = []
    placed_tandem: list[tuple[tuple, str | None, tuple]] = []
    for (ns, name), unit, index, n in steps:
        pod, owner, level = pods[(ns, name, unit)][index], (ns, name, unit), levels[(ns, name)]
        kube, rule = kube_admits(pod, nodes[n], placed_kube), tandem_allows(owner, level, paths[n], placed_tandem)
        if reuse_rack_names:
            assert rule or not kube, (owner, level, paths[n])
        else:
            assert kube == rule, (owner, level, paths[n], placed_tandem)
        if kube and rule:
            placed_kube.append((pod, nodes[n]))
            placed_tandem.append((owner, level, paths[n]))
