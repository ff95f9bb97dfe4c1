"""tandem's ClusterTopology CRD served by the local API server: its status subresource (the
topology controller's), its printer columns, and the level rules the schema holds (CEL
and the list-map key), refused at their field paths as a real server refuses them."""

from __future__ import annotations

import copy

import pytest

from apiserver.helpers import IG
from tandem.apiserver import cel

TOPOLOGIES = f"{IG}/clustertopologies"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
BLOCK, RACK, HOST = ({"name": "block", "nodeLabel": "net/block"}, {"name": "rack", "nodeLabel": "net/rack"},
                     {"name": "host", "nodeLabel": "kubernetes.io/hostname"})
needs_cel = pytest.mark.skipif(not cel.available(), reason="cel-python (the `apiserver` extra) is not installed")


def topology(name: str, *levels: dict) -> dict:
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": name}, "spec": {"levels": list(levels)}}


def causes(reply) -> list[tuple[str, str]]:
    assert reply.code == 422, reply.body
    return [(c["field"], c["message"]) for c in reply.body["details"]["causes"]]


@needs_cel
def test_a_host_level_above_a_rack_is_refused_at_the_levels(client):
    reply = client.post(TOPOLOGIES, topology("inverted", BLOCK, HOST, RACK))
    assert causes(reply) == [("spec.levels", 'Invalid value: "array": kubernetes.io/hostname names a single node, so only the '
                                             "narrowest (last) level may use it; level 'host' would be broader than 'rack'")]
    assert client.get(f"{TOPOLOGIES}/inverted").code == 404, "nothing was created"
    assert client.post(TOPOLOGIES, topology("ordered", BLOCK, RACK, HOST)).code == 201


@needs_cel
def test_a_reserved_name_and_a_repeated_label_are_refused_and_so_is_a_change_that_makes_them(client):
    assert causes(client.post(TOPOLOGIES, topology("reserved", {"name": "cluster", "nodeLabel": "net/all"}, RACK))) == [
        ("spec.levels[0].name", "Invalid value: \"object\": 'cluster' is reserved for the whole cluster (the root above every level); choose another name"),
    ]
    assert causes(client.post(TOPOLOGIES, topology("twice", BLOCK, {"name": "rack", "nodeLabel": "net/block"}))) == [
        ("spec.levels", "Invalid value: \"array\": duplicate nodeLabel 'net/block': each level needs a label of its own"),
    ]
    assert client.post(TOPOLOGIES, topology("fine", RACK, HOST)).code == 201
    reply = client.patch(f"{TOPOLOGIES}/fine", {"spec": {"levels": [HOST, RACK]}})
    assert [field for field, _ in causes(reply)] == ["spec.levels"]


def test_repeated_level_names_are_refused_by_the_list_map_key(client):
    reply = client.post(TOPOLOGIES, topology("names", RACK, {"name": "rack", "nodeLabel": "net/other"}))
    assert causes(reply) == [("spec.levels[1]", 'Duplicate value: map[string]interface {}{"name":"rack"}')]


def test_the_status_is_written_through_its_subresource_and_read_in_the_columns(client):
    created = client.post(TOPOLOGIES, {**topology("net", RACK, HOST), "status": {"nodes": 9}})
    assert created.code == 201 and "status" not in created.body, "status on create is dropped: there is a status subresource"
    ignored = client.patch(f"{TOPOLOGIES}/net", {"status": {"nodes": 5}, "metadata": {"finalizers": ["tandem.dev/topology-in-use"]}})
    assert ignored.code == 200 and "status" not in ignored.body
    status = {"observedGeneration": 1, "nodes": 4, "placeableNodes": 3, "unlabeledNodes": 1, "unlabeledExamples": ["n-9"],
              "levels": [{"name": "rack", "nodeLabel": "net/rack", "domains": 2, "nodes": 3, "unlabeledNodes": 1},
                         {"name": "host", "nodeLabel": "kubernetes.io/hostname", "domains": 3, "nodes": 3}],
              "levelNames": "rack/host", "domainCounts": "2/3",
              "conditions": [{"type": "Ready", "status": "True", "reason": "UpToDate", "lastTransitionTime": "2026-11-27T00:00:00Z"}]}
    written = client.patch(f"{TOPOLOGIES}/net/status", {"status": status, "spec": {"levels": [RACK]}})
    assert written.code == 200, written.body
    assert written.body["status"] == status, "no defaults under status: what is stored is what was written"
    assert written.body["spec"]["levels"] == [RACK, HOST] and written.body["metadata"]["generation"] == 1
    table = client.get(TOPOLOGIES, accept=TABLE).body
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Levels", "Domains", "Nodes", "Unlabeled", "Ready", "Age"]
    row = next(r["cells"] for r in table["rows"] if r["cells"][0] == "net")
    assert row[:6] == ["net", "rack/host", "2/3", 4, 1, "True"]
    twice = client.patch(f"{TOPOLOGIES}/net/status", {"status": {"levels": [status["levels"][0], status["levels"][0]]}})
    assert causes(twice) == [("status.levels[1]", 'Duplicate value: map[string]interface {}{"name":"rack"}')]


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TOPOLOGY_CRD = f"{CRDS}/clustertopologies.tandem.dev"


def test_a_topology_stored_with_repeated_level_names_still_takes_its_finalizer_and_status(client):
    """A real server checks list-map keys on update only when the stored object had no repeat
    (apiextensions' strategy: "ratcheting validation of x-kubernetes-list-type value map and
    set"), so the topology controller can still add its finalizer to, and write the status of,
    a topology stored before `spec.levels` was keyed by name."""
    crd = client.get(TOPOLOGY_CRD).body
    keyed = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["levels"]
    unkeyed = {k: v for k, v in keyed.items() if k not in ("x-kubernetes-list-type", "x-kubernetes-list-map-keys")}
    before = {**crd, "spec": {**crd["spec"], "versions": [copy.deepcopy(crd["spec"]["versions"][0])]}}
    before["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["levels"] = unkeyed
    assert client.put(TOPOLOGY_CRD, before).code == 200
    assert client.post(TOPOLOGIES, topology("old", RACK, {"name": "rack", "nodeLabel": "net/other"}, HOST)).code == 201
    assert client.put(TOPOLOGY_CRD, {**crd, "metadata": client.get(TOPOLOGY_CRD).body["metadata"]}).code == 200

    finalized = client.patch(f"{TOPOLOGIES}/old", {"metadata": {"finalizers": ["tandem.dev/topology-in-use"]}})
    assert finalized.code == 200, finalized.body["message"]
    assert client.patch(f"{TOPOLOGIES}/old/status", {"status": {"nodes": 4}}).code == 200
    assert client.post(TOPOLOGIES, topology("new", RACK, HOST)).code == 201
    assert causes(client.patch(f"{TOPOLOGIES}/new", {"spec": {"levels": [RACK, {"name": "rack", "nodeLabel": "net/other"}, HOST]}})) == [
        ("spec.levels[1]", 'Duplicate value: map[string]interface {}{"name":"rack"}')], "a repeat the stored object did not have is refused"
