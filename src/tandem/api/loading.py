"""Turn YAML/JSON text into typed objects, with one-line errors naming file, document and field.

Accepts what `kubectl get ... -o yaml|json` prints (a `v1` `List`), multi-document YAML,
and single objects. Pure: takes text, never opens files (the CLI reads them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from tandem.api.kube import Node, Pod
from tandem.api.resources import API_VERSION, ClusterTopology, InferenceGroup
from tandem.api.validation import check_group, check_topology
from tandem.errors import InputError, Problem

KINDS: dict[tuple[str, str], type[BaseModel]] = {
    ("v1", "Node"): Node,
    ("v1", "Pod"): Pod,
    (API_VERSION, "ClusterTopology"): ClusterTopology,
    (API_VERSION, "InferenceGroup"): InferenceGroup,
}
_KNOWN = ", ".join(f"{api}/{kind}" for api, kind in KINDS)

_MESSAGES = {
    "extra_forbidden": "unknown field",
    "missing": "required field is missing",
}


@dataclass
class Inputs:
    """Everything loaded from a set of files, in input order."""

    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    topologies: dict[str, ClusterTopology] = field(default_factory=dict)
    groups: list[InferenceGroup] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def load_texts(sources: list[tuple[str, str]]) -> Inputs:
    """Parse and validate every document of every (name, text) source.

    Raises InputError carrying all problems found; nothing is returned half-valid.
    """
    inputs = Inputs()
    problems: list[Problem] = []
    origins: dict[tuple[str, str], str] = {}
    for source, text in sources:
        try:
            documents = _documents(source, text)
        except InputError as exc:
            problems += exc.problems
            continue
        for where, path, raw in documents:
            obj = _parse(where, path, raw, problems)
            if obj is not None:
                _add(inputs, obj, where, path, origins, problems)
    for group in inputs.groups:
        topology = inputs.topologies.get(group.spec.topology_name)
        where, path = _origin(origins, group)
        problems += [Problem(_join(path, p.path), p.message, where) for p in check_group(group, topology)]
    for topology in inputs.topologies.values():
        where, path = _origin(origins, topology)
        problems += [Problem(_join(path, p.path), p.message, where) for p in check_topology(topology)]
    if problems:
        raise InputError(problems)
    return inputs


def _documents(source: str, text: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(where, path prefix, mapping) for each object, with `List`s expanded."""
    try:
        loaded = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(Problem("", f"not valid YAML or JSON: {reason}{at}", source)) from None
    if not loaded:
        raise InputError(Problem("", "no documents: the file is empty", source))
    out: list[tuple[str, str, dict[str, Any]]] = []
    problems: list[Problem] = []
    for number, doc in enumerate(loaded, start=1):
        where = source if len(loaded) == 1 else f"{source} (document {number})"
        if not isinstance(doc, dict):
            problems.append(Problem("", f"must be a mapping (an object), got {_type_name(doc)}", where))
            continue
        if doc.get("kind") == "List" or (isinstance(doc.get("kind"), str) and doc["kind"].endswith("List") and "items" in doc):
            items = doc.get("items")
            if not isinstance(items, list):
                problems.append(Problem("items", "must be a list", where))
                continue
            for index, item in enumerate(items):
                if not isinstance(item, dict):
                    problems.append(Problem(f"items[{index}]", f"must be a mapping, got {_type_name(item)}", where))
                    continue
                # kubectl omits apiVersion/kind on items of typed lists (NodeList, PodList).
                if doc["kind"] in ("NodeList", "PodList"):
                    item = {"apiVersion": "v1", "kind": doc["kind"][:-4], **item}
                out.append((where, f"items[{index}]", item))
        else:
            out.append((where, "", doc))
    if problems:
        raise InputError(problems)
    return out


def _parse(where: str, path: str, raw: dict[str, Any], problems: list[Problem]) -> BaseModel | None:
    api_version, kind = raw.get("apiVersion"), raw.get("kind")
    if not isinstance(api_version, str) or not api_version:
        problems.append(Problem(_join(path, "apiVersion"), "required field is missing or not a string", where))
        return None
    if not isinstance(kind, str) or not kind:
        problems.append(Problem(_join(path, "kind"), "required field is missing or not a string", where))
        return None
    model = KINDS.get((api_version, kind))
    if model is None:
        problems.append(Problem(_join(path, "kind"), f"unsupported {api_version}/{kind} (expected one of {_KNOWN})", where))
        return None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            problems.append(Problem(_join(path, _loc_path(raw, error["loc"])), _message(error), where))
        return None


def _add(
    inputs: Inputs,
    obj: BaseModel,
    where: str,
    path: str,
    origins: dict[tuple[str, str], str],
    problems: list[Problem],
) -> None:
    if isinstance(obj, Node):
        key = ("Node", obj.metadata.name)
    elif isinstance(obj, Pod):
        key = ("Pod", f"{obj.metadata.namespace}/{obj.metadata.name}")
    elif isinstance(obj, ClusterTopology):
        key = ("ClusterTopology", obj.metadata.name)
    else:
        assert isinstance(obj, InferenceGroup)
        key = ("InferenceGroup", f"{obj.metadata.namespace}/{obj.metadata.name}")
    if key in origins:
        problems.append(Problem(_join(path, "metadata.name"), f"duplicate {key[0]} {key[1]!r} (also in {origins[key]})", where))
        return
    origins[key] = f"{where}\x00{path}"
    if isinstance(obj, Node):
        inputs.nodes.append(obj)
    elif isinstance(obj, Pod):
        inputs.pods.append(obj)
    elif isinstance(obj, ClusterTopology):
        inputs.topologies[obj.metadata.name] = obj
    else:
        inputs.groups.append(obj)


def _origin(origins: dict[tuple[str, str], str], obj: InferenceGroup | ClusterTopology) -> tuple[str, str]:
    if isinstance(obj, InferenceGroup):
        key = ("InferenceGroup", f"{obj.metadata.namespace}/{obj.metadata.name}")
    else:
        key = ("ClusterTopology", obj.metadata.name)
    where, _, path = origins[key].partition("\x00")
    return where, path


def _loc_path(raw: Any, loc: tuple[int | str, ...]) -> str:
    """Render a pydantic location as a field path, dropping union/validator tags."""
    parts: list[str] = []
    node: Any = raw
    for item in loc:
        if isinstance(node, list) and isinstance(item, int) and 0 <= item < len(node):
            parts.append(f"[{item}]")
            node = node[item]
        elif isinstance(item, str) and (isinstance(node, dict) or node is None):
            if "." in item or "/" in item:
                parts.append(f'["{item}"]')
            else:
                parts.append(f".{item}" if parts else item)
            node = node.get(item) if isinstance(node, dict) else None
        # anything else is a pydantic tag (a union member, a validator name): skip it
    return "".join(parts)


def _message(error: dict[str, Any]) -> str:
    kind = error.get("type", "")
    if kind in _MESSAGES:
        return _MESSAGES[kind]
    message = str(error.get("msg", "invalid value"))
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix):]
    if kind == "literal_error":
        message = message.replace("Input should be", "must be")
    elif message.startswith("Input should be"):
        message = "must be" + message[len("Input should be"):]
    if "input" in error and kind not in ("missing",) and not isinstance(error["input"], (dict, list)):
        shown = repr(error["input"])
        if shown not in message and len(shown) <= 60:
            message += f", got {shown}"
    return message.replace("\n", " ")


def _join(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}"


def _type_name(value: object) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(type(value), type(value).__name__)
