"""The domains of a ClusterTopology as label-value paths, and object names derived from them.

Schedulers with a topology object that lists domains (Volcano HyperNodes) need every
domain by name; the others only need the level labels. A domain is the tuple of label
values from the broadest level down, so a rack `r1` in two blocks is two domains, as in
`tandem.topology`. Nodes lacking a level label belong to no domain.
"""

from __future__ import annotations

import hashlib
import re
from typing import Sequence

from tandem.api.kube import Node
from tandem.api.resources import ClusterTopology

_NOT_NAME = re.compile(r"[^a-z0-9-]+")
MAX_NAME = 253


def node_paths(topology: ClusterTopology, nodes: Sequence[Node]) -> list[tuple[str, ...]]:
    """Sorted, distinct label-value paths of the nodes carrying every level label."""
    keys = [level.node_label for level in topology.spec.levels]
    paths = {tuple(node.metadata.labels[key] for key in keys) for node in nodes if all(key in node.metadata.labels for key in keys)}
    return sorted(paths)


def unlabelled_nodes(topology: ClusterTopology, nodes: Sequence[Node]) -> list[str]:
    keys = [level.node_label for level in topology.spec.levels]
    return sorted(node.metadata.name for node in nodes if not all(key in node.metadata.labels for key in keys))


def object_name(*parts: str) -> str:
    """A DNS-1123 subdomain from free text: lower-cased, other characters as '-'; when that
    changed anything or the name is too long, a hash of the original keeps it unique."""
    raw = "-".join(parts)
    clean = _NOT_NAME.sub("-", raw.lower()).strip("-") or "x"
    if clean == raw and len(clean) <= MAX_NAME:
        return clean
    digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
    return f"{clean[: MAX_NAME - 9].rstrip('-')}-{digest}"
