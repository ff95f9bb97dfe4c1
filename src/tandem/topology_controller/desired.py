"""What one backend's topology objects for one ClusterTopology should be: pure.

The backend's own renderer (`tandem.backends.registry`: `render_topology`, the same as
`tandem render --topology-only`) builds them from the nodes; this adds what makes them
tandem's: both ownership labels and an ownerReference to the ClusterTopology's uid. A
renderer's refusal (an InputError: KAI or Kueue refusing a level list, Koordinator a
layer name, Volcano no labelled node) comes back as its message, for the status.

Given the previous rendering, an object the renderer makes again unchanged is the very
object made last time (same identity), so what compared equal to the stored object then
need not be compared again (`memo.in_step`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from tandem.api.kube import Node
from tandem.api.resources import ClusterTopology
from tandem.backends.registry import get_backend
from tandem.cluster.ports import Object
from tandem.errors import InputError
from tandem.topology_controller.kinds import key_of
from tandem.topology_controller.ownership import owner_reference, ownership_labels


@dataclass(frozen=True)
class Rendered:
    objects: tuple[Object, ...] = ()  # by (kind, name)
    refused: str | None = None  # the renderer's words when it would not render
    # (kind, name) -> (the renderer's object, tandem's object made of it)
    made: Mapping[tuple[str, str], tuple[Object, Object]] = field(default_factory=dict, compare=False, repr=False)
    owner: tuple[str, str] = ("", "")  # the ClusterTopology's (name, uid)


def desired_objects(
    backend: str, topology: ClusterTopology, raw: Mapping[str, Any], nodes: Sequence[Node], previous: Rendered | None = None
) -> Rendered:
    """`backend`'s objects for `topology` on `nodes`, each labelled and owned as tandem's."""
    try:
        objects = get_backend(backend).render_topology(topology, nodes)
    except InputError as exc:
        return Rendered(refused=str(exc))
    owner = (topology.metadata.name, str(raw["metadata"].get("uid", "")))
    before = previous.made if previous is not None and previous.owner == owner else {}
    made: dict[tuple[str, str], tuple[Object, Object]] = {}
    for obj in objects:
        target = (key_of(obj), obj["metadata"]["name"])
        kept = before.get(target)
        made[target] = kept if kept is not None and kept[0] == obj else (obj, _own(obj, owner[0], raw))
    owned = tuple(made[target][1] for target in sorted(made))
    return Rendered(objects=owned, made=made, owner=owner)


def _own(obj: Object, topology: str, raw: Mapping[str, Any]) -> Object:
    meta = dict(obj.get("metadata") or {})
    meta["labels"] = {**(meta.get("labels") or {}), **ownership_labels(topology)}
    meta["ownerReferences"] = [owner_reference(raw)]
    return {**obj, "metadata": meta}
