"""Where a unit is: the narrowest domain of its topology that holds every one of its pods.

Read from the nodes its pods are bound to (or placed on: the hostname `nodeSelector` tandem
writes), and the levels of the group's ClusterTopology, broadest first, as the engine names
a domain (`level/name`). Pure: payloads in, a string out.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from tandem.api.resources import TopologyLevel
from tandem.cluster.payloads import PodPayload
from tandem.cluster.pods import assigned_node
from tandem.cluster.ports import Object


def unit_domain(pods: Iterable[PodPayload], nodes: Mapping[tuple[str, str], Object], levels: Iterable[TopologyLevel]) -> str:
    """`level/name` of the narrowest level whose label all the pods' nodes share; "" when
    no pod has a node, or the nodes share not even the broadest level."""
    names = {node for node in map(assigned_node, pods) if node}
    labels = [(nodes.get(("", name)) or {}).get("metadata", {}).get("labels") or {} for name in sorted(names)]
    if not labels:
        return ""
    domain = ""
    for level in levels:
        values = {each.get(level.node_label) for each in labels}
        if len(values) != 1 or None in values:
            break
        domain = f"{level.name}/{values.pop()}"
    return domain
