"""Reading the rendered objects back gives exactly the group's minimums, sizes and topology levels.

Each backend's objects are read by an independent reader (`readback.py`) that knows only the
scheduler's fields; the result must equal the group, unit by unit: replicas, minimum and
pods per replica of every role, and the levels of every pack the backend expresses.
"""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
import pytest

from support.fuzz import examples
from support.strategies import worlds
from tandem.api.loading import Inputs
from tandem.backends.base import Backend
from tandem.backends.domains import node_paths
from tandem.backends.registry import matrix_backends

from backends.readback import EXPRESSED, PODS_ONLY, READERS, expected, normalized
from backends.variants import accepted_variant, load, typed

BACKENDS = [b for b in matrix_backends() if b.name != "native"]


def round_trip(backend: Backend, inputs: Inputs, raw: dict) -> tuple[list, list, int]:
    topology = inputs.topologies[raw["spec"].get("topologyName", "default")]
    variant, steps = accepted_variant(raw, backend, topology)
    group = typed(variant)
    objects = backend.render(group, topology, inputs.nodes, variant)
    read = READERS[backend.name](objects, topology, [r.name for r in group.spec.roles])
    want = expected(group, EXPRESSED[backend.label], topology)
    if backend.label in PODS_ONLY:  # a unit is seen only through its pods: one without pods is invisible
        want = [shape for shape in want if any(role.replicas for role in shape.roles.values())]
    return normalized(read), normalized(want), steps


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.label)
def test_examples_read_back_exactly(backend: Backend, example_inputs: Inputs) -> None:
    for group in example_inputs.groups:
        raw = example_inputs.manifests[(group.metadata.namespace, group.metadata.name)]
        read, want, steps = round_trip(backend, example_inputs, raw)
        assert read == want, f"{backend.label} {group.metadata.name} (after {steps} relaxation steps)"
        assert len(read) == typed(accepted_variant(raw, backend, example_inputs.topologies["default"])[0]).spec.replicas > 0


def test_the_examples_that_backends_accept_as_written(example_inputs: Inputs) -> None:
    """Volcano and the v1alpha3 Workload API take every example unchanged; the reader sees them whole."""
    for backend in BACKENDS:
        if backend.label not in ("volcano", "workload-api v1alpha3"):
            continue
        for group in example_inputs.groups:
            raw = example_inputs.manifests[(group.metadata.namespace, group.metadata.name)]
            read, want, steps = round_trip(backend, example_inputs, raw)
            assert steps == 0 and read == want
            assert any(shape.role_required for shape in read) == any(
                r.pods_per_replica > 1 and r.topology.pack.required for r in group.spec.roles
            )


def test_native_renders_the_group_itself(example_inputs: Inputs) -> None:
    native = matrix_backends()[0]
    for group in example_inputs.groups:
        raw = example_inputs.manifests[(group.metadata.namespace, group.metadata.name)]
        (rendered,) = native.render(group, manifest=raw)
        assert load([rendered]).groups[0] == group
        (from_model,) = native.render(group)  # without the manifest: quantities written back as such
        assert load([from_model]).groups[0] == group


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(worlds(max_groups=2))
def test_generated_groups_read_back_exactly(world: list[dict]) -> None:
    inputs = load(world)
    # Volcano refuses (rightly) to build HyperNodes when no node carries every level label.
    assume(node_paths(inputs.topologies["default"], inputs.nodes))
    for raw in (obj for obj in world if obj["kind"] == "InferenceGroup"):
        for backend in BACKENDS:
            read, want, steps = round_trip(backend, inputs, raw)
            assert read == want, f"{backend.label} after {steps} relaxation steps"
