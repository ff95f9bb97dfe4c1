"""Where `tandem operator --namespace NS` watches each kind.

Groups and what the controller makes for them (Services, ConfigMaps) are watched in the
namespaces named, and the controller writes only there (a group's pods, companions and
events live in its namespace). Pods are watched in every namespace all the same: a pod of
any workload holds capacity on its node, and placement that did not see it would promise
the same GPUs twice. Nodes and ClusterTopologies are cluster-scoped.
"""

from __future__ import annotations

from typing import Iterable

CLUSTER_WIDE_READS = ("Pod",)


def informer_scopes(namespaces: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """`KubeCluster`'s `scopes`: the kinds read in every namespace even when `namespaces` limits the rest."""
    return {kind: () for kind in CLUSTER_WIDE_READS} if tuple(namespaces) else {}
