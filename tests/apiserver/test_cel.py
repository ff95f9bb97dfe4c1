"""CRD validation rules (`x-kubernetes-validations`) on create and update, through HTTP: the
node each rule sits at, the field path and message of a refusal as Kubernetes 1.32 words it,
transition rules, ratcheting, and rules cel-python cannot run."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from apiserver.helpers import IG, NS, group
from tandem.apiserver import cel

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
GADGETS = "/apis/example.com/v1/namespaces/default/gadgets"


def gadget_crd(spec_rules: list[dict], *, item_rules: list[dict] = (), limit_rules: list[dict] = (), size_rules: list[dict] = ()) -> dict:
    """A CRD whose spec, list items (`parts`, keyed by name), map values (`limits`) and `size` carry the given rules."""
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": list(spec_rules),
                "properties": {
                    "size": {"type": "integer", "minimum": 0, "x-kubernetes-validations": list(size_rules)},
                    "max": {"type": "integer"},
                    "mode": {"type": "string"},
                    "parts": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "x-kubernetes-validations": list(item_rules),
                                        "properties": {"name": {"type": "string"}, "count": {"type": "integer"}}}},
                    "limits": {"type": "object", "additionalProperties": {"type": "integer", "x-kubernetes-validations": list(limit_rules)}},
                },
            },
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"kind": "Gadget", "plural": "gadgets"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}]},
    }


def gadget(name: str = "a", **spec) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": name}, "spec": spec}


def causes(reply) -> list[tuple[str, str]]:
    assert reply.code == 422, reply.body
    return [(c["field"], c["message"]) for c in reply.body["details"]["causes"]]


def test_a_broken_rule_of_tandems_crd_is_refused_at_its_field_path(client):
    bad = group()
    bad["spec"]["roles"][0]["minReplicas"] = 3
    reply = client.post(f"{IG}/namespaces/{NS}/inferencegroups", bad)
    assert causes(reply) == [("spec.roles[0].minReplicas", 'Invalid value: "object": minReplicas must be <= replicas')]
    assert reply.body["message"] == ('InferenceGroup.tandem.dev "g" is invalid: spec.roles[0].minReplicas: '
                                     'Invalid value: "object": minReplicas must be <= replicas')
    assert client.get(f"{IG}/namespaces/{NS}/inferencegroups/g").code == 404, "nothing was created"


def test_a_rule_without_field_path_names_its_node_and_every_broken_rule_is_a_cause(client):
    bad = group(coordination={"scaling": {"maxSkew": "0%"}, "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}})
    assert causes(client.post(f"{IG}/namespaces/{NS}/inferencegroups", bad)) == [
        ("spec.coordination.scaling.maxSkew", 'Invalid value: "object": maxSkew must be at least 1 (or 1%): scaling could never start'),
        ("spec.coordination.rollingUpdate", 'Invalid value: "object": maxSurge and maxUnavailable cannot both be 0: the update could never move'),
    ]
    good = group(coordination={"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}})
    assert client.post(f"{IG}/namespaces/{NS}/inferencegroups", good).code == 201


def test_rules_run_on_updates_and_patches_too(client):
    assert client.post(f"{IG}/namespaces/{NS}/inferencegroups", group()).code == 201
    reply = client.patch(f"{IG}/namespaces/{NS}/inferencegroups/g", {"spec": {"coordination": {"scaling": {"maxSkew": 0}}}})
    assert causes(reply) == [("spec.coordination.scaling.maxSkew", 'Invalid value: "object": maxSkew must be at least 1 (or 1%): scaling could never start')]


def test_a_schema_problem_that_blocks_the_rules_says_so_and_others_do_not(client):
    typed = group()
    typed["spec"]["roles"][0].update(replicas="two", minReplicas=3)
    assert [f for f, _ in causes(client.post(f"{IG}/namespaces/{NS}/inferencegroups", typed))] == ["spec.roles[0].replicas", "<nil>"]
    assert causes(client.post(f"{IG}/namespaces/{NS}/inferencegroups", typed))[-1][1] == (
        'Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation')
    patterned = group(topologyName="Not_A_Name")  # a pattern is not blocking: the rules run as well
    patterned["spec"]["roles"][0]["minReplicas"] = 3
    assert [f for f, _ in causes(client.post(f"{IG}/namespaces/{NS}/inferencegroups", patterned))] == ["spec.topologyName", "spec.roles[0].minReplicas"]


def test_messages_come_from_message_expression_message_or_the_rule(client):
    rules = [
        {"rule": "self.size <= self.max", "messageExpression": "'size ' + string(self.size) + ' is over ' + string(self.max)"},
        {"rule": "self.size != 7"},
        {"rule": "self.size != 13", "message": "unlucky", "reason": "FieldValueForbidden", "fieldPath": ".size"},
        {"rule": "self.size < 100", "messageExpression": "self.nothing", "message": "too big"},
    ]
    assert client.post(CRDS, gadget_crd(rules)).code == 201
    assert causes(client.post(GADGETS, gadget(size=9, max=8))) == [("spec", 'Invalid value: "object": size 9 is over 8')]
    assert causes(client.post(GADGETS, gadget(size=7, max=8))) == [("spec", 'Invalid value: "object": failed rule: self.size != 7')]
    assert causes(client.post(GADGETS, gadget(size=13, max=20))) == [("spec.size", "Forbidden: unlucky")]
    assert causes(client.post(GADGETS, gadget(size=100, max=200))) == [("spec", 'Invalid value: "object": too big')]
    assert client.post(GADGETS, gadget(size=1, max=2)).code == 201


def test_rules_at_list_items_and_map_values_run_once_each_at_their_path(client):
    crd = gadget_crd([], item_rules=[{"rule": "self.count > 0", "message": "count must be positive"}],
                     limit_rules=[{"rule": "self <= 10", "message": "at most 10"}])
    assert client.post(CRDS, crd).code == 201
    obj = gadget(parts=[{"name": "x", "count": 1}, {"name": "y", "count": 0}], limits={"cpu": 4, "gpu": 12})
    assert causes(client.post(GADGETS, obj)) == [
        ("spec.parts[1]", 'Invalid value: "object": count must be positive'),
        ("spec.limits[gpu]", 'Invalid value: "integer": at most 10'),
    ]


def test_a_runtime_error_is_a_cause_naming_the_rule(client):
    assert client.post(CRDS, gadget_crd([{"rule": "self.mode == 'fast'"}])).code == 201
    assert causes(client.post(GADGETS, gadget(size=1))) == [("spec", 'Invalid value: "object": no such key: mode evaluating rule: self.mode == \'fast\'')]


def test_an_integer_beyond_64_bits_is_a_422_not_a_500(client):
    """CEL's int is 64 bits: a value beyond it cannot be evaluated, and says so per field."""
    bad = group()
    bad["spec"]["roles"][0]["replicas"] = 2**70
    found = causes(client.post(f"{IG}/namespaces/{NS}/inferencegroups", bad))
    assert ("spec.roles[0].replicas", "Invalid value: 1180591620717411303424: should be less than or equal to 2147483647") in found
    assert ("spec.roles[0]", 'Invalid value: "object": holds an integer beyond the 64-bit range CEL rules evaluate') in found
    assert client.get(f"{IG}/namespaces/{NS}/inferencegroups/g").code == 404, "nothing was created"


def test_transition_rules_compare_with_the_old_object_on_update_only(client):
    crd = gadget_crd([], size_rules=[{"rule": "self >= oldSelf", "message": "size may not shrink"}],
                     item_rules=[{"rule": "self.count == oldSelf.count", "message": "count is immutable"}])
    assert client.post(CRDS, crd).code == 201
    assert client.post(GADGETS, gadget(size=5, parts=[{"name": "x", "count": 1}])).code == 201, "no old object: not evaluated"
    assert causes(client.patch(f"{GADGETS}/a", {"spec": {"size": 4}})) == [("spec.size", 'Invalid value: "integer": size may not shrink')]
    assert client.patch(f"{GADGETS}/a", {"spec": {"size": 6}}).code == 200
    moved = {"spec": {"parts": [{"name": "y", "count": 1}, {"name": "x", "count": 2}]}}  # items correlate by key, not index
    assert causes(client.patch(f"{GADGETS}/a", moved)) == [("spec.parts[1]", 'Invalid value: "object": count is immutable')]


def test_an_error_on_a_value_the_update_left_alone_is_only_a_warning(client):
    assert client.post(CRDS, gadget_crd([])).code == 201
    assert client.post(GADGETS, gadget(size=50, max=1)).code == 201
    crd = client.get(f"{CRDS}/gadgets.example.com").body
    stricter = gadget_crd([{"rule": "self.size <= self.max", "message": "size over max", "fieldPath": ".size"}],
                          size_rules=[{"rule": "self < 20", "message": "size under 20"}])
    assert client.put(f"{CRDS}/gadgets.example.com", {**stricter, "metadata": crd["metadata"]}).code == 200
    # spec changed, so its rule holds the update back; size did not, so its own rule only warns
    assert causes(client.patch(f"{GADGETS}/a", {"spec": {"mode": "slow"}})) == [("spec.size", 'Invalid value: "object": size over max')]
    touched = client.patch(f"{GADGETS}/a", {"spec": {"mode": "slow", "max": 60}})
    assert touched.code == 200 and touched.warnings == ['spec.size: Invalid value: "integer": size under 20']
    assert causes(client.patch(f"{GADGETS}/a", {"spec": {"size": 40}})) == [("spec.size", 'Invalid value: "integer": size under 20')]


def test_a_rule_cel_python_cannot_run_is_skipped_with_a_warning_and_the_crd_served(client):
    rules = [{"rule": "self.parts.map(p, p.name).isSorted()", "message": "sorted"}, {"rule": "self.size >", "message": "broken"},
             {"rule": "self.size != 3", "message": "not three"}]
    reply = client.post(CRDS, gadget_crd(rules))
    assert reply.code == 201
    where = "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations"
    first, second = reply.warnings
    assert first == (f"{where}[0].rule: not checked by this server (it calls functions cel-python lacks: isSorted); "
                     "a Kubernetes API server would refuse this CustomResourceDefinition")
    assert second.startswith(f"{where}[1].rule: not checked by this server (cel-python cannot parse it")
    assert client.post(GADGETS, gadget("b", size=4, parts=[{"name": "z"}, {"name": "a"}])).code == 201
    assert causes(client.post(GADGETS, gadget(size=3))) == [("spec", 'Invalid value: "object": not three')]


def test_rules_are_compiled_once_when_the_crd_is_served(client, server, monkeypatch):
    assert client.post(CRDS, gadget_crd([{"rule": "self.size != 3", "message": "not three"}])).code == 201
    served = server.state.registry.lookup("example.com", "v1", "gadgets")
    monkeypatch.setattr(cel.Rules, "_parse", lambda *_: pytest.fail("a rule was compiled while serving a request"))
    assert client.post(GADGETS, gadget(size=1)).code == 201
    assert causes(client.post(GADGETS, gadget("b", size=3))) == [("spec", 'Invalid value: "object": not three')]
    assert server.state.registry.lookup("example.com", "v1", "gadgets").rules is served.rules


def test_without_cel_python_the_server_says_so_once_and_serves_crds_without_their_rules():
    script = textwrap.dedent(f"""
        import sys
        sys.modules["celpy"] = None  # as if the apiserver extra were not installed
        sys.path.insert(0, "tests")
        from apiserver.helpers import Client, group
        from tandem.apiserver.server import ApiServer
        with ApiServer(kubelet=False) as api:
            bad = group()
            bad["spec"]["roles"][0]["minReplicas"] = 3
            print(Client(api.url).post("{IG}/namespaces/{NS}/inferencegroups", bad).code)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.strip() == "201", done.stderr
    assert done.stderr.splitlines() == [
        "cel-python is not installed (pip install 'tandem[apiserver]'): CRDs' x-kubernetes-validations rules are not checked"]


@pytest.mark.skipif(not cel._HAVE_CELPY, reason="cel-python is not installed")
@pytest.mark.parametrize("order", [("broken", "no"), ("no", "broken")])
def test_match_conditions_any_false_skips_whatever_errors_beside_it(order):
    expressions = {"broken": "object.nosuch.field == 1", "no": "object.spec.x == 2", "yes": "object.spec.x == 1"}
    variables = {"object": {"spec": {"x": 1}}, "oldObject": None, "request": {}}
    assert cel.match_conditions([(n, expressions[n]) for n in order], variables) == (False, None)
    holds, error = cel.match_conditions([("yes", expressions["yes"]), ("broken", expressions["broken"])], variables)
    assert holds is False and error is not None and error.startswith("broken: ")
    assert cel.match_conditions([("yes", expressions["yes"])], variables) == (True, None)
