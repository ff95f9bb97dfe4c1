"""The patch types the API server takes, applied to a copy of the current object.

- `application/merge-patch+json` (RFC 7386): maps merge, `null` deletes, lists replace.
- `application/strategic-merge-patch+json` (built-in kinds only, as the real server): like
  a merge patch, but lists of objects whose field has a merge key in Kubernetes' types
  (`containers`, `env`, `volumes`, a webhook configuration's `webhooks`, ... by `name`; `ports` by `containerPort` or `port`;
  `conditions` by `type`; ...) merge element by element, and `finalizers` merges as a set.
  The directives kubectl sends are honoured: `$patch: replace|delete`, `$retainKeys`,
  `$setElementOrder/<field>`, `$deleteFromPrimitiveList/<field>`. Any other list replaces.
- `application/json-patch+json` (RFC 6902): add, remove, replace, move, copy, test.

Server-side apply (`application/apply-patch+yaml`) is approximated by the caller as a
create, or a strategic (built-in) or merge (custom) patch: no field ownership.
"""

from __future__ import annotations

import copy
from typing import Any

from tandem.errors import BadRequest, Invalid

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
PATCH_TYPES = (MERGE, STRATEGIC, JSON_PATCH, APPLY)

# List fields of the built-in kinds and the key their elements merge by (patchMergeKey).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "readinessGates": "conditionType",
    "conditions": "type",
    "ownerReferences": "uid",
    "taints": "key",
    "addresses": "type",
    "topologySpreadConstraints": "topologyKey",
    "webhooks": "name",  # Validating- and MutatingWebhookConfiguration
}
SET_FIELDS = frozenset({"finalizers"})  # primitive lists merged as sets
ORDER = "$setElementOrder/"
DELETE_FROM = "$deleteFromPrimitiveList/"


def strategic_merge(target: Any, patch: Any) -> Any:
    """A strategic merge patch of `target` (not changed); None when the patch deletes it."""
    if not isinstance(patch, dict):
        return _strip(patch)
    patch = dict(patch)
    directive = patch.pop("$patch", None)
    if directive == "replace":
        return _strip(patch)
    if directive == "delete":
        return None
    if directive is not None:
        raise BadRequest(f"unknown patch directive $patch: {directive}")
    retain = patch.pop("$retainKeys", None)
    orders = {k[len(ORDER):]: patch.pop(k) for k in list(patch) if k.startswith(ORDER)}
    removals = {k[len(DELETE_FROM):]: patch.pop(k) for k in list(patch) if k.startswith(DELETE_FROM)}
    out = dict(target) if isinstance(target, dict) else {}
    for name, values in removals.items():
        if isinstance(out.get(name), list):
            out[name] = [v for v in out[name] if v not in values]
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
            continue
        if isinstance(value, list):
            merged = _merge_list(key, out.get(key), value)
        elif isinstance(value, dict):
            merged = strategic_merge(out.get(key), value)
        else:
            merged = value
        if merged is None:
            out.pop(key, None)
        else:
            out[key] = merged
    for name, order in orders.items():
        if isinstance(out.get(name), list) and isinstance(order, list):
            out[name] = _ordered(name, out[name], order)
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out


def _merge_key(field: str, *lists: Any) -> str | None:
    key = MERGE_KEYS.get(field)
    if field == "ports":
        elements = [e for values in lists if isinstance(values, list) for e in values if isinstance(e, dict)]
        key = "containerPort" if any("containerPort" in e for e in elements) else "port"
    return key


def _merge_list(field: str, target: Any, patch: list[Any]) -> list[Any]:
    current = target if isinstance(target, list) else []
    if field in SET_FIELDS and all(not isinstance(v, (dict, list)) for v in patch):
        return list(current) + [v for v in patch if v not in current]
    key = _merge_key(field, current, patch)
    if key is None or not all(isinstance(e, dict) for e in patch):
        return [_strip(e) for e in patch]
    if any(e.get("$patch") == "replace" for e in patch):
        return [_strip(e) for e in patch if e.get("$patch") != "replace"]
    out = [copy.deepcopy(e) for e in current]
    for element in patch:
        if key not in element:
            out.append(_strip(element))
            continue
        index = next((i for i, e in enumerate(out) if isinstance(e, dict) and e.get(key) == element[key]), None)
        if element.get("$patch") == "delete":
            if index is not None:
                del out[index]
            continue
        if index is None:
            out.append(_strip(element))
        else:
            out[index] = strategic_merge(out[index], element)
    return out


def _ordered(field: str, values: list[Any], order: list[Any]) -> list[Any]:
    """`values` in the order `$setElementOrder` gives; those it does not name keep their order after."""
    key = _merge_key(field, values)

    def ident(value: Any) -> Any:
        if isinstance(value, dict):
            return value.get(key) if key else None
        return None if isinstance(value, list) else value

    rank: dict[Any, int] = {}
    for index, element in enumerate(order):
        rank.setdefault(ident(element), index)
    rank.pop(None, None)
    return sorted(values, key=lambda v: rank.get(ident(v), len(order)))


def _strip(value: Any) -> Any:
    """New content from a strategic patch, without its directives."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return copy.deepcopy(value)


# ----------------------------------------------------------------------------- RFC 6902


def json_patch(document: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch of `document` (not changed); a failed `test` is 422."""
    if not isinstance(operations, list):
        raise BadRequest("a JSON patch is a list of operations")
    doc = copy.deepcopy(document)
    for number, op in enumerate(operations):
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise BadRequest(f"JSON patch operation {number}: needs op and path")
        kind, path = op["op"], _pointer(op["path"])
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(_value(op)))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            doc, _ = _remove(doc, path)
            doc = _add(doc, path, copy.deepcopy(_value(op)))
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            if kind == "move":
                doc, value = _remove(doc, source)
            else:
                value = copy.deepcopy(_get(doc, source))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise Invalid(f"JSON patch test failed at {op['path']}")
        else:
            raise BadRequest(f"JSON patch operation {number}: unknown op {kind!r}")
    return doc


def _value(op: dict[str, Any]) -> Any:
    if "value" not in op:
        raise BadRequest(f"JSON patch {op['op']} at {op['path']}: needs a value")
    return op["value"]


def _pointer(text: str) -> list[str]:
    if text == "":
        return []
    if not text.startswith("/"):
        raise BadRequest(f"JSON pointer {text!r} must start with /")
    return [part.replace("~1", "/").replace("~0", "~") for part in text[1:].split("/")]


def _get(doc: Any, path: list[str]) -> Any:
    for part in path:
        doc = _child(doc, part, path)
    return doc


def _child(doc: Any, part: str, path: list[str]) -> Any:
    if isinstance(doc, dict) and part in doc:
        return doc[part]
    if isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
        return doc[int(part)]
    raise Invalid(f"JSON patch: path /{'/'.join(path)} does not exist")


def _add(doc: Any, path: list[str], value: Any) -> Any:
    if not path:
        return value
    parent = _get(doc, path[:-1])
    last = path[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise Invalid(f"JSON patch: index {last} out of range at /{'/'.join(path)}")
    else:
        raise Invalid(f"JSON patch: /{'/'.join(path[:-1])} is not an object or a list")
    return doc


def _remove(doc: Any, path: list[str]) -> tuple[Any, Any]:
    if not path:
        return None, doc
    parent = _get(doc, path[:-1])
    value = _child(parent, path[-1], path)
    if isinstance(parent, dict):
        del parent[path[-1]]
    else:
        del parent[int(path[-1])]
    return doc, value
