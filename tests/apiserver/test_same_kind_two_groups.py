"""Two CRDs with one kind name in two groups (KAI's and Kueue's `Topology`): both served,
each object kept, listed, watched, shown and deleted apart from the other's."""

from __future__ import annotations

from apiserver.helpers import TABLE

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
KAI = "/apis/kai.scheduler/v1alpha1/topologies"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2/topologies"


def topology_crd(group: str, version: str) -> dict:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"topologies.{group}"},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"kind": "Topology", "plural": "topologies", "singular": "topology", "listKind": "TopologyList"},
            "versions": [{"name": version, "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}],
        },
    }


def topology(group: str, version: str, name: str, levels: list[str]) -> dict:
    return {"apiVersion": f"{group}/{version}", "kind": "Topology", "metadata": {"name": name}, "spec": {"levels": levels}}


def test_a_kind_served_by_two_groups_keeps_their_objects_apart(client):
    assert client.post(CRDS, topology_crd("kai.scheduler", "v1alpha1")).code == 201
    assert client.post(CRDS, topology_crd("kueue.x-k8s.io", "v1beta2")).code == 201, "a second group may serve the same kind"
    assert client.post(KAI, topology("kai.scheduler", "v1alpha1", "default", ["rack"])).code == 201
    assert client.post(KUEUE, topology("kueue.x-k8s.io", "v1beta2", "default", ["block", "rack"])).code == 201
    assert client.get(f"{KAI}/default").body["spec"]["levels"] == ["rack"]
    assert client.get(f"{KUEUE}/default").body["spec"]["levels"] == ["block", "rack"]
    assert [i["apiVersion"] for i in client.get(KAI).body["items"]] == ["kai.scheduler/v1alpha1"]
    assert [i["apiVersion"] for i in client.get(KUEUE).body["items"]] == ["kueue.x-k8s.io/v1beta2"]
    events = client.watch(f"{KUEUE}?watch=1&resourceVersion=0&timeoutSeconds=1")
    assert [(e["type"], e["object"]["apiVersion"]) for e in events if e["type"] != "BOOKMARK"] == [("ADDED", "kueue.x-k8s.io/v1beta2")]
    table = client.get(KAI, accept=TABLE).body
    assert [row["cells"][0] for row in table["rows"]] == ["default"]
    for group in ("kai.scheduler", "kueue.x-k8s.io"):
        resources = client.get(f"/apis/{group}/{'v1alpha1' if group == 'kai.scheduler' else 'v1beta2'}").body["resources"]
        assert [(r["name"], r["kind"]) for r in resources] == [("topologies", "Topology")]
    assert client.delete(f"{KAI}/default").code == 200
    assert client.get(f"{KAI}/default").code == 404
    assert client.get(f"{KUEUE}/default").code == 200, "deleting KAI's Topology leaves Kueue's"
    assert client.delete(f"{CRDS}/topologies.kueue.x-k8s.io").code == 200
    assert client.get(KUEUE).code == 404
    assert client.post(KAI, topology("kai.scheduler", "v1alpha1", "again", ["rack"])).code == 201, "KAI's stays served"
