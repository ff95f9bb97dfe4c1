"""The worlds the contract suite runs against: every one serves the controller's ports.

- `memory`: the in-memory store (the simulator's, and the local API server's storage);
- `kube-over-apiserver`: the Kubernetes adapter (`tandem.kube`: lightkube's connection,
  informers, the writer) over HTTP against `tandem apiserver`, whose tandem kinds are
  served by permissive CRDs (the contract's objects are minimal: an InferenceGroup
  without pod templates) with tandem's scopes and subresources, and whose kubelet is off,
  as no world here has one acting on its pods;
- in every world, KAI's and Kueue's `Topology` (one kind name in two groups) are served
  cluster-scoped, named by their qualified keys (`tests/kube/worlds.py` TWINS);
- `kube-over-fakeapi`: the same adapter against the small API of `tests/kube/fakeapi.py`
  (the server the adapter's own tests inject faults into).

A CRD is installed in a world with `install_crd` (the memory store registers its kind, an
API server is sent the CRD) and removed with `remove_crd`; the delegated backends' kinds
are the adapter's optional kinds, served while their CRDs are installed.

The adapter reads its informers' caches, which trail the server for what the server does
on its own (a cascade, a finalizer's release); its worlds wait in `snapshot()` until the
caches hold what the server holds (`tests/kube/worlds.py`). Every test in this directory
runs in every world.
"""

from __future__ import annotations

import contextlib
from typing import Callable, ContextManager, Iterator

import pytest

from apiserver.helpers import Client
from kube.fakeapi import FakeApi
from kube.worlds import TWINS, kube_over_http
from tandem.apiserver.server import ApiServer
from tandem.cluster.memory import MemoryStore

OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


@contextlib.contextmanager
def _memory() -> Iterator[MemoryStore]:
    clock = {"now": 1_764_003_217.0}
    store = MemoryStore(clock=lambda: clock["now"])
    for twin in TWINS:
        store.register_kind(twin.key, cluster_scoped=True, status=False)
    yield store


@contextlib.contextmanager
def _kube_over_apiserver() -> Iterator[object]:
    with ApiServer(crds=False, kubelet=False, bookmark_every=1.0) as server:
        client = Client(server.url)
        twins = [permissive_crd(t.kind, t.plural, "Cluster", False, group=t.group, version_name=t.api_version.rpartition("/")[2]) for t in TWINS]
        for crd in (permissive_crd("InferenceGroup", "inferencegroups", "Namespaced", True),
                    permissive_crd("ClusterTopology", "clustertopologies", "Cluster", True), *twins):
            assert client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).code == 201
        cluster = kube_over_http(server.url, watch_timeout=5.0)
        try:
            yield cluster
        finally:
            cluster.stop()


@contextlib.contextmanager
def _kube_over_fakeapi() -> Iterator[object]:
    api = FakeApi()
    cluster = kube_over_http(api.url, watch_timeout=5.0)
    try:
        yield cluster
    finally:
        cluster.stop()
        api.close()


def permissive_crd(kind: str, plural: str, scope: str, status: bool, group: str = "tandem.dev", version_name: str = "v1alpha1") -> dict:
    version = {"name": version_name, "served": True, "storage": True,
               "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": OPEN, "status": OPEN}}}}
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": scope, "names": {"kind": kind, "plural": plural}, "versions": [version]},
    }


def install_crd(world: object, crd: dict) -> None:
    """Have `world` serve the kind of `crd`, keyed `Kind.group`."""
    if isinstance(world, MemoryStore):
        spec = crd["spec"]
        has_status = any("status" in (v.get("subresources") or {}) for v in spec["versions"])
        world.register_kind(f"{spec['names']['kind']}.{spec['group']}", cluster_scoped=spec["scope"] == "Cluster", status=has_status)
    else:
        world.create(crd)  # type: ignore[attr-defined]


def remove_crd(world: object, crd: dict) -> None:
    if isinstance(world, MemoryStore):
        world.forget_kind(f"{crd['spec']['names']['kind']}.{crd['spec']['group']}")
    else:
        world.delete("CustomResourceDefinition", None, crd["metadata"]["name"])  # type: ignore[attr-defined]


WORLDS: dict[str, Callable[[], ContextManager[object]]] = {
    "memory": _memory,
    "kube-over-apiserver": _kube_over_apiserver,
    "kube-over-fakeapi": _kube_over_fakeapi,
}


@pytest.fixture(params=sorted(WORLDS))
def world(request):
    """A fresh, empty world: a `Writer` with `snapshot()` for a `Reader`."""
    with WORLDS[request.param]() as world:
        yield world
