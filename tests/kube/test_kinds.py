"""The adapter's kind table: a kind registered qualified is addressed `Kind.group`, and an
object's own apiVersion and kind find it; plain kinds keep their plain names."""

from __future__ import annotations

import pytest

from kube.worlds import TWINS
from tandem.errors import BadRequest
from tandem.kube.kinds import key_of, kind_of


def test_two_kinds_of_one_name_are_found_by_their_qualified_keys_and_by_their_objects():
    kai, kueue = TWINS
    assert (kai.key, kueue.key) == ("Topology.kai.scheduler", "Topology.kueue.x-k8s.io")
    assert kind_of("Topology.kai.scheduler").path(name="t") == "/apis/kai.scheduler/v1alpha1/topologies/t"
    assert kind_of("Topology.kueue.x-k8s.io").path(name="t") == "/apis/kueue.x-k8s.io/v1beta2/topologies/t"
    assert key_of({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology"}) == "Topology.kueue.x-k8s.io"
    assert key_of({"apiVersion": "v1", "kind": "Pod"}) == "Pod" and kind_of("Pod").path("ns") == "/api/v1/namespaces/ns/pods"
    assert key_of({"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology"}) == "ClusterTopology"
    with pytest.raises(BadRequest, match="not known"):
        kind_of("Topology")  # ambiguous: no kind is registered under the plain name


def test_every_delegated_kind_is_known_by_its_key_where_its_crd_serves_it():
    from tandem.backends.delegated_kinds import DELEGATED_KINDS, PRIORITY_CLASS

    for kind in (*(k for kinds in DELEGATED_KINDS.values() for k in kinds), PRIORITY_CLASS):
        known = kind_of(kind.key)
        assert (known.api_version, known.plural, known.namespaced, known.status) == (kind.api_version, kind.plural, kind.namespaced, kind.status)
        assert key_of({"apiVersion": kind.api_version, "kind": kind.kind}) == kind.key
    assert kind_of("PodGroup.scheduling.volcano.sh").path("serving", "g") == "/apis/scheduling.volcano.sh/v1beta1/namespaces/serving/podgroups/g"
    assert kind_of("Workload.kueue.x-k8s.io").path("serving") != kind_of("Workload.scheduling.k8s.io").path("serving")
    assert kind_of("PriorityClass").path(name="p") == "/apis/scheduling.k8s.io/v1/priorityclasses/p"
    assert kind_of("CustomResourceDefinition").path() == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
