"""Request paths, read: which resource, namespace, object and subresource a URL names.

    /api/v1/<plural>[/<name>[/<subresource>]]                        cluster-scoped, or all namespaces
    /api/v1/namespaces/<ns>/<plural>[/<name>[/<subresource>]]        namespaced
    /apis/<group>/<version>/...                                      the same, in a group
`/api/v1/namespaces/<name>[/status]` is the Namespace itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from tandem.apiserver.kinds import Registry, Resource
from tandem.errors import NotFound

SUBRESOURCES = ("status", "scale", "binding")


@dataclass(frozen=True)
class Route:
    resource: Resource
    namespace: str | None  # None: cluster-scoped, or a namespaced collection across all namespaces
    name: str | None  # None: the collection
    subresource: str | None = None


def route(registry: Registry, path: str) -> Route | None:
    """The resource route `path` names; None when it is not a resource path (discovery and
    the like); NotFound (404, as the real server says it) for a resource path nothing serves."""
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        nested = registry.lookup(group, version, rest[2])
        if nested is not None and nested.namespaced:
            namespace, rest = rest[1], rest[2:]
    resource = registry.lookup(group, version, rest[0])
    if resource is None or len(rest) > 3 or (namespace is not None and not resource.namespaced) or any(not p for p in rest):
        raise NotFound("the server could not find the requested resource")
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    if subresource is not None and (
        subresource not in SUBRESOURCES
        or (subresource == "status" and not resource.status)
        or (subresource == "scale" and resource.scale is None)
        or (subresource == "binding" and not resource.binding)
    ):
        raise NotFound("the server could not find the requested resource")
    return Route(resource, namespace, name, subresource)
