"""What one backend's topology objects for one ClusterTopology should be: pure.

The backend's own renderer (`tandem.backends.registry`: `render_topology`, the same as
`tandem render --topology-only`) builds them from the nodes; this adds what makes them
tandem's: both ownership labels and an ownerReference to the ClusterTopology's uid. A
renderer's refusal (an InputError: KAI or Kueue refusing a level list, Koordinator a
layer name, Volcano no labelled node) comes back as its message, for the status.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from tandem.api.kube import Node
from tandem.api.resources import ClusterTopology
from tandem.backends.registry import get_backend
from tandem.cluster.ports import Object
from tandem.errors import InputError
from tandem.topology_controller.ownership import owner_reference, ownership_labels


@dataclass(frozen=True)
class Rendered:
    objects: tuple[Object, ...] = ()  # by (kind, name)
    refused: str | None = None  # the renderer's words when it would not render


def desired_objects(backend: str, topology: ClusterTopology, raw: Mapping[str, Any], nodes: Sequence[Node]) -> Rendered:
    """`backend`'s objects for `topology` on `nodes`, each labelled and owned as tandem's."""
    try:
        objects = get_backend(backend).render_topology(topology, nodes)
    except InputError as exc:
        return Rendered(refused=str(exc))
    name = topology.metadata.name
    owned = [_own(obj, name, raw) for obj in objects]
    return Rendered(objects=tuple(sorted(owned, key=lambda o: (o["kind"], o["metadata"]["name"]))))


def _own(obj: Object, topology: str, raw: Mapping[str, Any]) -> Object:
    meta = dict(obj.get("metadata") or {})
    meta["labels"] = {**(meta.get("labels") or {}), **ownership_labels(topology)}
    meta["ownerReferences"] = [owner_reference(raw)]
    return {**obj, "metadata": meta}
