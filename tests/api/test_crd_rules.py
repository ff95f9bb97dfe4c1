"""The CEL rules in the InferenceGroup and ClusterTopology CRDs (`x-kubernetes-validations`),
evaluated with cel-python on valid and invalid objects: each refuses what tandem's own
validation refuses, with its message, and admits what it admits."""

from __future__ import annotations

import copy

import celpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.controller_world import design_group
from tandem.api.crds import CEL_RULES, TOPOLOGY_CEL_RULES, crds
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.api.validation import check_group, check_topology


def _schema():
    group = next(c for c in crds() if c["spec"]["names"]["kind"] == "InferenceGroup")
    return group["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _nodes(obj, path):
    """The parts of `obj` a schema path (`.spec.roles[*]`) points to."""
    nodes = [obj]
    for step in path.strip(".").replace("[*]", ".[*]").split("."):
        if step == "[*]":
            nodes = [item for node in nodes for item in node]
        else:
            nodes = [node[step] for node in nodes if isinstance(node, dict) and step in node]
    return nodes


def violations(obj):
    """Messages of every rule the object breaks."""
    env = celpy.Environment()
    out = []
    for path, rules in CEL_RULES.items():
        for node in _nodes(obj, path):
            for rule in rules:
                program = env.program(env.compile(rule["rule"]))
                if not program.evaluate({"self": celpy.json_to_cel(node)}):
                    out.append(rule["message"])
    return out


def tandem_refuses(obj):
    try:
        group = InferenceGroup.model_validate(obj)
    except ValueError:
        return True
    return bool(check_group(group, None))


def test_the_rules_in_the_crd_are_the_ones_tested_here():
    schema = _schema()
    for path, rules in CEL_RULES.items():
        node = schema
        for step in path.strip(".").replace("[*]", ".[*]").split("."):
            node = node["items"] if step == "[*]" else node["properties"][step]
        assert node["x-kubernetes-validations"] == rules


def _with(change):
    g = design_group()
    change(g)
    return g


CASES = [
    ("valid", lambda g: None, []),
    ("minReplicas above replicas", lambda g: g["spec"]["roles"][0].update(minReplicas=5), ["minReplicas must be <= replicas"]),
    ("minReplicas equal to replicas", lambda g: g["spec"]["roles"][0].update(minReplicas=4), []),
    ("workerTemplate with one pod", lambda g: g["spec"]["roles"][0].update(workerTemplate=copy.deepcopy(g["spec"]["roles"][0]["template"])),
     ["workerTemplate is only used when podsPerReplica > 1"]),
    ("maxSkew 0", lambda g: g["spec"]["coordination"].update(scaling={"maxSkew": 0}), ["maxSkew must be at least 1 (or 1%): scaling could never start"]),
    ("maxSkew 0%", lambda g: g["spec"]["coordination"].update(scaling={"maxSkew": "0%"}), ["maxSkew must be at least 1 (or 1%): scaling could never start"]),
    ("maxSkew 10%", lambda g: g["spec"]["coordination"].update(scaling={"maxSkew": "10%"}), []),
    ("surge and unavailable both 0", lambda g: g["spec"]["coordination"].update(rollingUpdate={"maxSurge": 0}),
     ["maxSurge and maxUnavailable cannot both be 0: the update could never move"]),
    ("qosClass without a backend (native)", lambda g: g["spec"].setdefault("scheduler", {}).update(qosClass="LS"),
     ["qosClass is Koordinator's QoS class: only for backend koordinator"]),
    ("qosClass for volcano", lambda g: g["spec"].setdefault("scheduler", {}).update(backend="volcano", qosClass="BE"),
     ["qosClass is Koordinator's QoS class: only for backend koordinator"]),
    ("qosClass for koordinator", lambda g: g["spec"].setdefault("scheduler", {}).update(backend="koordinator", qosClass="LSR"), []),
    ("surge 0, unavailable 1", lambda g: g["spec"]["coordination"].update(rollingUpdate={"maxSurge": "0%", "maxUnavailable": 1}), []),
]


@pytest.mark.parametrize("name, change, expected", CASES, ids=[c[0] for c in CASES])
def test_each_rule_refuses_what_tandem_refuses_with_its_message(name, change, expected):
    obj = _with(change)
    assert violations(obj) == expected
    assert tandem_refuses(obj) == bool(expected), "the webhook and the CRD agree"


# ----------------------------------------------------------------------------- ClusterTopology


def _topology_schema():
    topology = next(c for c in crds() if c["spec"]["names"]["kind"] == "ClusterTopology")
    return topology["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_the_topology_rules_in_the_crd_are_the_ones_tested_here():
    schema = _topology_schema()
    for path, rules in TOPOLOGY_CEL_RULES.items():
        node = schema
        for step in path.strip(".").replace("[*]", ".[*]").split("."):
            node = node["items"] if step == "[*]" else node["properties"][step]
        assert node["x-kubernetes-validations"] == rules


def topology_violations(obj):
    """What every topology rule the object breaks says (its messageExpression, as the server shows it)."""
    env = celpy.Environment()
    out = []
    for path, rules in TOPOLOGY_CEL_RULES.items():
        for node in _nodes(obj, path):
            for rule in rules:
                activation = {"self": celpy.json_to_cel(node)}
                if not env.program(env.compile(rule["rule"])).evaluate(activation):
                    expression = rule.get("messageExpression")
                    out.append(str(env.program(env.compile(expression)).evaluate(activation)) if expression else rule["message"])
    return out


BLOCK, RACK, HOST = ({"name": "block", "nodeLabel": "net/block"}, {"name": "rack", "nodeLabel": "net/rack"},
                     {"name": "host", "nodeLabel": "kubernetes.io/hostname"})
TOPOLOGY_CASES = [
    ("valid", [BLOCK, RACK, HOST], []),
    ("no hostname level", [BLOCK, RACK], []),
    ("hostname alone", [HOST], []),
    ("host above rack", [BLOCK, HOST, RACK],
     ["kubernetes.io/hostname names a single node, so only the narrowest (last) level may use it; level 'host' would be broader than 'rack'"]),
    ("duplicate nodeLabel", [BLOCK, {"name": "rack", "nodeLabel": "net/block"}], ["duplicate nodeLabel 'net/block': each level needs a label of its own"]),
    ("reserved name", [{"name": "cluster", "nodeLabel": "net/all"}, RACK],
     ["'cluster' is reserved for the whole cluster (the root above every level); choose another name"]),
]


@pytest.mark.parametrize("name, levels, expected", TOPOLOGY_CASES, ids=[c[0] for c in TOPOLOGY_CASES])
def test_each_topology_rule_refuses_what_check_topology_refuses(name, levels, expected):
    obj = {"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": "t"}, "spec": {"levels": levels}}
    assert topology_violations(obj) == expected
    assert bool(check_topology(ClusterTopology.model_validate(obj))) == bool(expected), "the webhook and the CRD agree"


_LEVEL_NAMES = st.sampled_from(["block", "rack", "host", "zone", "cluster"])
_LABELS = st.sampled_from(["net/block", "net/rack", "net/zone", "kubernetes.io/hostname"])


@given(st.lists(st.tuples(_LEVEL_NAMES, _LABELS), min_size=1, max_size=5, unique_by=lambda pair: pair[0]))
def test_the_crd_rules_and_check_topology_agree_on_any_level_list(pairs):
    """Names are unique here because the list-map key makes the server refuse a repeat before any rule."""
    obj = {"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": "t"},
           "spec": {"levels": [{"name": n, "nodeLabel": label} for n, label in pairs]}}
    assert bool(topology_violations(obj)) == bool(check_topology(ClusterTopology.model_validate(obj)))
