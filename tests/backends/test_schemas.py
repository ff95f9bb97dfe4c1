"""Every object every backend renders validates against the real upstream schema, unknown fields rejected.

Custom resources against the CRDs in ../shared/schemas, Kubernetes' own kinds (Pod,
PriorityClass, the Workload API) against kubernetes-validate's strict schemas for the
Kubernetes version that defines them. A group a backend refuses is rendered as the
nearest variant it accepts (see `variants.accepted_variant`), so every backend renders
every example.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, assume, given, settings

from support.fuzz import examples
from support.strategies import worlds
from tandem.api.loading import Inputs
from tandem.backends.base import Backend
from tandem.backends.domains import node_paths
from tandem.backends.registry import matrix_backends
from tandem.backends.workload_api import WorkloadApiBackend

from backends.schemas import CRDS, LATEST_KUBE, SCHEMAS, SKIP_REASON, assert_valid, crd_validator, schema_problems
from backends.variants import accepted_variant, load, typed

pytestmark = pytest.mark.skipif(not SCHEMAS.exists(), reason=SKIP_REASON)
BACKENDS = matrix_backends()


def kube_of(backend: Backend) -> str:
    return backend.profile.kubernetes if isinstance(backend, WorkloadApiBackend) else LATEST_KUBE


def render_accepted(backend: Backend, inputs: Inputs, raw: dict, topology_name: str = "default") -> tuple[list[dict], int]:
    topology = inputs.topologies.get(topology_name)
    variant, steps = accepted_variant(raw, backend, topology)
    return backend.render(typed(variant), topology, inputs.nodes, variant), steps


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.label)
def test_every_example_renders_objects_the_upstream_schemas_accept(backend: Backend, example_inputs: Inputs) -> None:
    kinds = set()
    for group in example_inputs.groups:
        raw = example_inputs.manifests[(group.metadata.namespace, group.metadata.name)]
        objects, _ = render_accepted(backend, example_inputs, raw)
        assert_valid(objects, kube_of(backend))
        kinds |= {(o["apiVersion"], o["kind"]) for o in objects}
        pods = [o for o in objects if o["kind"] == "Pod"]
        if backend.name != "native":
            variant = typed(accepted_variant(raw, backend, example_inputs.topologies["default"])[0])
            assert len(pods) == variant.spec.replicas * sum(r.replicas * r.pods_per_replica for r in variant.spec.roles)
    expected = {
        "native": {("tandem.dev/v1alpha1", "InferenceGroup"), ("tandem.dev/v1alpha1", "ClusterTopology")},
        "volcano": {("scheduling.volcano.sh/v1beta1", "PodGroup"), ("topology.volcano.sh/v1alpha1", "HyperNode")},
        "koordinator": {("scheduling.sigs.k8s.io/v1alpha1", "PodGroup"), ("scheduling.koordinator.sh/v1alpha1", "ClusterNetworkTopology")},
        "kai": {("scheduling.run.ai/v2alpha2", "PodGroup"), ("kai.scheduler/v1alpha1", "Topology")},
        "kueue": {("kueue.x-k8s.io/v1beta2", "Topology"), ("kueue.x-k8s.io/v1beta2", "Workload"), ("v1", "Pod")},
        "workload-api v1alpha3": {("scheduling.k8s.io/v1alpha3", k) for k in ("Workload", "CompositePodGroup", "PodGroup")},
        "workload-api v1beta1": {("scheduling.k8s.io/v1beta1", "Workload"), ("scheduling.k8s.io/v1beta1", "PodGroup")},
        "workload-api v1alpha2": {("scheduling.k8s.io/v1alpha2", "Workload"), ("scheduling.k8s.io/v1alpha2", "PodGroup")},
        "workload-api v1alpha1": {("scheduling.k8s.io/v1alpha1", "Workload")},
    }[backend.label]
    assert expected <= kinds, f"{backend.label} rendered {sorted(kinds)}"


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.label)
@pytest.mark.parametrize("shape", ["block=2,rack=2,host=2", "rack=3,host=2", "host=4"])
def test_topology_objects_validate_for_every_shape(backend: Backend, shape: str) -> None:
    from support.builders import cluster

    objects = cluster(shape)
    del objects[1]["metadata"]["labels"][objects[0]["spec"]["levels"][0]["nodeLabel"]]  # one node lacks a level label
    inputs = load(objects)
    topology = inputs.topologies["default"]
    rendered = backend.render_topology(topology, inputs.nodes)
    assert_valid(rendered, kube_of(backend))
    if backend.name == "volcano":
        # one HyperNode per domain of every level but the hostname one, plus the root; tier-1
        # HyperNodes select the labelled nodes of their domain (hostname excluded); the
        # unlabelled node is in none
        names = [o["metadata"]["name"] for o in rendered]
        assert len(names) == len(set(names))
        leaves = [o for o in rendered if o["spec"]["tier"] == 1]
        labelled = [n for n in inputs.nodes if all(lv.node_label in n.metadata.labels for lv in topology.spec.levels)]
        tiered = [lv.node_label for lv in topology.spec.levels if lv.node_label != "kubernetes.io/hostname"]
        if tiered:
            selected = [tuple(sorted(m["selector"]["labelMatch"]["matchLabels"].items())) for o in leaves for m in o["spec"]["members"]]
            assert sorted(selected) == sorted({tuple(sorted((k, n.metadata.labels[k]) for k in tiered)) for n in labelled})
        else:
            (root,) = rendered
            assert leaves == [root] and root["spec"]["members"] == [
                {"type": "Node", "selector": {"labelMatch": {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "Exists"}]}}}
            ]


def test_the_strict_schemas_catch_unknown_fields_and_wrong_kinds(example_inputs: Inputs) -> None:
    """The checks above can fail: an extra field anywhere, or another kind, is refused."""
    raw = example_inputs.manifests[("serving", "llama-70b")]
    for backend in BACKENDS[1:]:
        objects, _ = render_accepted(backend, example_inputs, raw)
        for obj in {o["kind"]: o for o in objects}.values():
            spoiled = copy.deepcopy(obj)
            (spoiled.get("spec") or spoiled["metadata"])["notAField"] = 1
            assert schema_problems(spoiled, kube_of(backend)), f"{backend.label} {obj['kind']} took an unknown field"
            if (obj["apiVersion"], obj["kind"]) in CRDS:
                renamed = dict(obj, kind=obj["kind"] + "s")
                assert list(crd_validator(obj["apiVersion"], obj["kind"]).iter_errors(renamed))


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(worlds(max_groups=2))
def test_generated_groups_render_objects_the_upstream_schemas_accept(world: list[dict]) -> None:
    inputs = load(world)
    # Volcano refuses (rightly) to build HyperNodes when no node carries every level label.
    assume(node_paths(inputs.topologies["default"], inputs.nodes))
    for backend in BACKENDS:
        for raw in (obj for obj in world if obj["kind"] == "InferenceGroup"):
            objects, _ = render_accepted(backend, inputs, raw)
            assert_valid(objects, kube_of(backend))
