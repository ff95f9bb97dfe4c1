"""Synthetic clusters: Nodes and a matching ClusterTopology, as plain manifests.

`generate_cluster([("block", 4), ("rack", 4), ("host", 8)], gpus=8)` gives 4 blocks of 4
racks of 8 nodes. The last level is the node itself (label `kubernetes.io/hostname`);
the broader levels use `network.tandem.dev/<level>` with globally numbered values
(`block-0`, `rack-13`). Deterministic: the same arguments give the same manifests.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

from tandem.api.naming import HOSTNAME_LABEL
from tandem.errors import InputError, Problem

# Bandwidth by distance from the narrowest level: same host, same rack, same block, wider.
_BANDWIDTH_GBPS = (7200.0, 400.0, 200.0, 100.0)


def parse_shape(text: str, path: str = "shape", source: str = "") -> list[tuple[str, int]]:
    """`block=4,rack=4,host=8` -> [("block", 4), ("rack", 4), ("host", 8)]; a bad shape is an
    `InputError` at `path` (the option or field the user wrote it in)."""
    levels: list[tuple[str, int]] = []
    for part in text.split(","):
        name, sep, count = part.strip().partition("=")
        digits = count.strip()
        if not sep or not name or not digits.isdigit() or len(digits) > 7 or int(digits) < 1:
            raise InputError(Problem(path, f"{part.strip()[:60]!r} is not LEVEL=COUNT with COUNT >= 1 (e.g. block=4,rack=4,host=8)", source))
        levels.append((name.strip(), int(digits)))
    names = [name for name, _ in levels]
    if len(set(names)) != len(names):
        raise InputError(Problem(path, f"level names must be unique, got {', '.join(names)}", source))
    nodes = math.prod(count for _, count in levels)
    if nodes > MAX_GENERATED_NODES:
        raise InputError(Problem(path, f"makes {nodes:,} nodes; at most {MAX_GENERATED_NODES:,} are generated", source))
    return levels


MAX_GENERATED_NODES = 131_072  # twice the largest clusters on one control plane today


def generate_cluster(
    shape: Sequence[tuple[str, int]],
    gpus: int = 8,
    *,
    topology_name: str = "default",
    gpu_resource: str = "nvidia.com/gpu",
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(ClusterTopology, Nodes) for a cluster of the given shape."""
    names = [name for name, _ in shape]
    labels = [f"network.tandem.dev/{name}" for name in names[:-1]] + [HOSTNAME_LABEL]
    levels = []
    for depth, (name, label) in enumerate(zip(names, labels)):
        from_narrowest = len(names) - 1 - depth
        level: dict[str, Any] = {"name": name, "nodeLabel": label}
        level["linkBandwidthGbps"] = _BANDWIDTH_GBPS[min(from_narrowest, len(_BANDWIDTH_GBPS) - 1)]
        levels.append(level)
    topology = {
        "apiVersion": "tandem.dev/v1alpha1",
        "kind": "ClusterTopology",
        "metadata": {"name": topology_name},
        "spec": {"levels": levels},
    }
    counts = [count for _, count in shape]
    total = 1
    for count in counts:
        total *= count
    width = max(3, len(str(total - 1)))
    nodes = []
    for number, path in enumerate(itertools.product(*(range(c) for c in counts))):
        node_name = f"n-{number:0{width}d}"
        node_labels = {}
        for depth in range(len(counts) - 1):
            # Global number of this domain at its level: its index in row-major order.
            index = 0
            for d in range(depth + 1):
                index = index * counts[d] + path[d]
            node_labels[labels[depth]] = f"{names[depth]}-{index}"
        node_labels[HOSTNAME_LABEL] = node_name
        allocatable = {"cpu": str(max(8, 16 * gpus)), "memory": f"{max(64, 256 * gpus)}Gi", "pods": "110"}
        if gpus > 0:
            allocatable[gpu_resource] = str(gpus)
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node_name, "labels": node_labels},
                "spec": {},
                "status": {
                    "allocatable": allocatable,
                    "capacity": dict(allocatable),
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return topology, nodes
