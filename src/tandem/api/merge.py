"""RFC 7386 JSON merge patch: the one implementation the store, the local API server, the
controller's view of its own writes and the scenario variants share."""

from __future__ import annotations

import copy
from typing import Any, Mapping


def merge_patch(target: Any, patch: Any) -> Any:
    """`target` merged with `patch` as a new value (`target` is not changed): mappings merge
    key by key, null deletes, anything else replaces (copied)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


SAME: Any = object()  # what `merge_diff` answers when nothing differs


def merge_diff(current: Any, wanted: Any) -> Any:
    """The merge patch taking `current` to `wanted`, or `SAME` when they are equal: keys
    `wanted` lacks are nulled, mappings are compared key by key, anything else replaced."""
    if current == wanted:
        return SAME
    if not isinstance(current, Mapping) or not isinstance(wanted, Mapping):
        return wanted
    out: dict[str, Any] = {}
    for key, value in wanted.items():
        part = merge_diff(current.get(key), value) if key in current else value
        if part is not SAME:
            out[key] = part
    for key in current:
        if key not in wanted:
            out[key] = None
    return out
