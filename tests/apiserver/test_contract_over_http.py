"""The ports' contract (tests/contract/test_ports.py), run through the Kubernetes adapter
(`tandem.kube`, lightkube's connection, informers) against `tandem apiserver` over HTTP.

The contract's objects are minimal (an InferenceGroup without pod templates), so the
tandem kinds are served here by permissive CRDs (any spec and status; the same scopes
and subresources as tandem's own); the kubelet is off, as no world of the contract has
one acting on its pods.
"""

from __future__ import annotations

import pytest

from apiserver.helpers import Client
from contract import test_ports
from kube.worlds import kube_over_http
from tandem.apiserver.server import ApiServer

globals().update({name: getattr(test_ports, name) for name in dir(test_ports) if name.startswith("test_")})

OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def permissive_crd(kind: str, plural: str, scope: str, status: bool) -> dict:
    version = {"name": "v1alpha1", "served": True, "storage": True,
               "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": OPEN, "status": OPEN}}}}
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.tandem.dev"},
        "spec": {"group": "tandem.dev", "scope": scope, "names": {"kind": kind, "plural": plural}, "versions": [version]},
    }


@pytest.fixture
def world():
    with ApiServer(crds=False, kubelet=False, bookmark_every=1.0) as server:
        client = Client(server.url)
        for crd in (permissive_crd("InferenceGroup", "inferencegroups", "Namespaced", True),
                    permissive_crd("ClusterTopology", "clustertopologies", "Cluster", False)):
            assert client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).code == 201
        cluster = kube_over_http(server.url, watch_timeout=5.0)
        yield cluster
        cluster.stop()
