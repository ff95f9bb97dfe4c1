"""Turn YAML/JSON text into typed objects, with one-line errors naming file, document and field.

Accepts what `kubectl get ... -o yaml|json` prints (a `v1` `List`), multi-document YAML,
and single objects. Pure: takes text, or a way to read it in pieces, and never opens
files (the CLI reads them).

A large `kubectl` List is read item by item (api/dumps.py): only one item is held as a
tree at a time, and in YAML the subtrees of Nodes and Pods that no model reads (image
lists, managed fields, ...) are cut before parsing, unchecked. Anything else, and any
input in which that path finds something wrong with the syntax, is parsed whole, so
syntax errors are always reported as the whole-file parse reports them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import chain
from types import MappingProxyType
from typing import Any, Iterable

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from tandem.api import dumps
from tandem.api.kube import Node, Pod
from tandem.api.pod_templates import group_template_problems, merged
from tandem.api.resources import API_VERSION, ClusterTopology, InferenceGroup
from tandem.api.validation import check_group, check_topology
from tandem.errors import InputError, Problem, key_path

KINDS: dict[tuple[str, str], type[BaseModel]] = {
    ("v1", "Node"): Node,
    ("v1", "Pod"): Pod,
    (API_VERSION, "ClusterTopology"): ClusterTopology,
    (API_VERSION, "InferenceGroup"): InferenceGroup,
}
_KNOWN = ", ".join(f"{api}/{kind}" for api, kind in KINDS)
# What a large dump's items of each kind are trimmed to before parsing (Node, Pod).
_PROJECTIONS = MappingProxyType(
    {key: keys for key, keys in ((key, dumps.projection(model)) for key, model in KINDS.items()) if keys is not None}
)

# A source reread from its start on each call, in pieces of text (a file, read as it is parsed).
Reader = Callable[[], Iterable[str]]
# Sources shorter than this (characters) are parsed whole: every key of every subtree checked.
WHOLE_BELOW = 1 << 20

_MESSAGES = {
    "extra_forbidden": "unknown field",
    "missing": "required field is missing",
}
# Pydantic's container errors, said in the words of YAML/JSON rather than Python's.
_EXPECTED = {
    "model_type": "a mapping (an object)",
    "model_attributes_type": "a mapping (an object)",
    "dict_type": "a mapping (an object)",
    "list_type": "a list",
}


# libyaml's parser when PyYAML was built with it (the wheels are), else the Python one;
# the constructor, and so the duplicate-key check below, is the same Python code.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_SafeLoader):  # type: ignore[misc, valid-type]
    """SafeLoader that rejects duplicate keys: with last-one-wins, a repeated key is a silent typo."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: let SafeLoader report it
                continue
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first at line {first.start_mark.line + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping

    def construct_yaml_timestamp(self, node: yaml.ScalarNode) -> Any:
        """An unquoted date that does not exist (2026-13-45) is a mistake on a line, not a crash."""
        try:
            return super().construct_yaml_timestamp(node)
        except ValueError as exc:
            raise yaml.constructor.ConstructorError(None, None, f"not a valid date or time ({exc})", node.start_mark) from None


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_yaml_timestamp)


class _DuplicateKey(ValueError):
    pass


# Deeper than any Kubernetes object tandem reads; libyaml itself would go much further.
MAX_NESTING = 100


class _AliasBomb(ValueError):
    """YAML aliases that expand a document far beyond what it holds."""


def _deeper_than(document: Any, limit: int) -> bool:
    """Whether mappings and lists nest more than `limit` levels (iterative: no recursion).

    YAML aliases make the document a graph whose shared parts a reader walks once per
    reference: walked here as any later reader would, it raises `_AliasBomb` as soon as the
    walk grows past twice the distinct containers (plus some slack) instead of running for
    ever on a "billion laughs" file. A document without aliases walks each container once."""
    stack = [(document, 1)]
    distinct: set[int] = set()
    visits = 0
    while stack:
        value, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        visits += 1
        distinct.add(id(value))
        if visits > 2 * len(distinct) + _ALIAS_SLACK:
            raise _AliasBomb
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


_ALIAS_SLACK = 10_000  # walks of shared containers a document may make beyond its own size


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)  # built in C; only a mapping with a repeated key is walked again
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(f"duplicate key {key!r}")
            seen.add(key)
    return out


@dataclass
class Inputs:
    """Everything loaded from a set of files, in input order."""

    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    topologies: dict[str, ClusterTopology] = field(default_factory=dict)
    groups: list[InferenceGroup] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # ("InferenceGroup", "ns/name") -> (file and document, path prefix), for error messages
    sources: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    # (namespace, name) -> the InferenceGroup document as written: pod templates with every field
    manifests: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def source_of(self, group: InferenceGroup) -> tuple[str, str]:
        return self.sources.get(("InferenceGroup", f"{group.metadata.namespace}/{group.metadata.name}"), ("", ""))


def load_texts(sources: list[tuple[str, str]], *, whole_below: int = WHOLE_BELOW) -> Inputs:
    """Parse and validate every document of every (name, text) source.

    Raises InputError carrying all problems found; nothing is returned half-valid.
    """
    return load_sources([(source, _once(text)) for source, text in sources], whole_below=whole_below)


def load_sources(sources: list[tuple[str, Reader]], *, whole_below: int = WHOLE_BELOW) -> Inputs:
    """`load_texts` for sources read in pieces (a reader may raise InputError, e.g. for a
    file that is not UTF-8: a problem of that source). Sources of `whole_below` characters
    or more that are a `kubectl` List are read item by item, never held whole."""
    inputs = Inputs()
    problems: list[Problem] = []
    origins: dict[tuple[str, str], tuple[str, str]] = {}
    for source, reader in sources:
        try:
            entries = _entries(source, reader, whole_below)
        except InputError as exc:
            problems += exc.problems
            continue
        for where, path, parsed, raw in entries:
            if isinstance(parsed, list):
                problems += parsed
                continue
            _add(inputs, parsed, where, path, origins, problems)
            if isinstance(parsed, InferenceGroup) and raw is not None:
                inputs.manifests.setdefault((parsed.metadata.namespace, parsed.metadata.name), raw)
    for group in inputs.groups:
        topology = inputs.topologies.get(group.spec.topology_name)
        where, path = _origin(origins, group)
        problems += [Problem(_join(path, p.path), p.message, where) for p in check_group(group, topology)]
    for topology in inputs.topologies.values():
        where, path = _origin(origins, topology)
        problems += [Problem(_join(path, p.path), p.message, where) for p in check_topology(topology)]
    if problems:
        raise InputError(problems)
    inputs.sources = dict(origins)
    return inputs


def load_documents(source: str, text: str) -> list[Any]:
    """Every document of `text`, None for an empty one. JSON is read as JSON (PyYAML is
    YAML 1.1 and misreads some JSON, e.g. tab indentation); anything else as YAML.
    A syntax error or a duplicate key is an InputError naming `source`."""
    text = text.removeprefix("\ufeff")
    if not text.strip():
        return []  # whitespace only (PyYAML would trip over a tab on an empty line)
    json_error: str | None = None
    if text.lstrip()[:1] in ("{", "["):
        try:
            document = json.loads(text, object_pairs_hook=_json_object)
            if _deeper_than(document, MAX_NESTING):  # as deep as YAML may go, no deeper
                raise RecursionError
            return [document]
        except _DuplicateKey as exc:
            raise InputError(Problem("", f"not valid JSON: {exc}", source)) from None
        except json.JSONDecodeError as exc:
            # Perhaps YAML in flow style; if YAML cannot read it either, the JSON error is the clearer one.
            json_error = f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        except RecursionError:
            raise InputError(Problem("", "not valid JSON: nested too deeply", source)) from None
        except ValueError as exc:
            if "integer string conversion" not in str(exc):
                raise
            raise InputError(Problem("", f"not valid JSON: a number of more than {sys.get_int_max_str_digits()} digits", source)) from None
    try:
        documents = list(yaml.load_all(text, Loader=_Loader))  # noqa: S506 - _Loader is a SafeLoader
        if any(_deeper_than(doc, MAX_NESTING) for doc in documents):
            raise RecursionError
        return documents
    except yaml.YAMLError as exc:
        if json_error:
            raise InputError(Problem("", json_error, source)) from None
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(Problem("", f"not valid YAML or JSON: {reason}{at}", source)) from None
    except RecursionError:
        raise InputError(Problem("", "not valid YAML or JSON: nested too deeply", source)) from None
    except _AliasBomb:
        raise InputError(Problem("", "not valid YAML or JSON: aliases expand the document far beyond its size", source)) from None
    except ValueError as exc:  # Python's own limit on turning digits into an int (CVE-2020-10735)
        if "integer string conversion" not in str(exc):
            raise
        raise InputError(Problem("", f"not valid YAML or JSON: a number of more than {sys.get_int_max_str_digits()} digits", source)) from None


_load = load_documents  # the former private name, for callers not yet moved


def _documents(source: str, text: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(where, path prefix, mapping) for each object, with `List`s expanded."""
    # Numbered as the user counts them: an empty document between two `---` still counts.
    loaded = [(number, doc) for number, doc in enumerate(load_documents(source, text), start=1) if doc is not None]
    if not loaded:
        raise InputError(Problem("", "no documents: the file is empty (or holds only whitespace and comments)", source))
    out: list[tuple[str, str, dict[str, Any]]] = []
    problems: list[Problem] = []
    for number, doc in loaded:
        where = source if len(loaded) == 1 else f"{source} (document {number})"
        if not isinstance(doc, dict):
            problems.append(Problem("", f"must be a mapping (an object), got {_type_name(doc)}", where))
            continue
        kind = doc.get("kind")
        if _is_list(doc):
            items = doc.get("items")
            if not isinstance(items, list):
                problems.append(Problem("items", f"must be a list, got {_type_name(items)}", where))
                continue
            for index, item in enumerate(items):
                if not isinstance(item, dict):
                    problems.append(Problem(f"items[{index}]", f"must be a mapping (an object), got {_type_name(item)}", where))
                    continue
                # The API server omits apiVersion/kind on items of typed lists (NodeList, PodList):
                # they are the list's, without the suffix (core "v1" when the list states none).
                if kind != "List":
                    item = {"apiVersion": doc.get("apiVersion") or "v1", "kind": str(kind)[: -len("List")], **item}
                out.append((where, f"items[{index}]", item))
        else:
            out.append((where, "", doc))
    if problems:
        raise InputError(problems)
    return out


def _is_list(doc: dict[str, Any]) -> bool:
    kind = doc.get("kind")
    return kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in doc)


# (where, path prefix, the object or its problems, the document as written for an InferenceGroup)
_Entry = tuple[str, str, BaseModel | list[Problem], dict[str, Any] | None]


def _once(text: str) -> Reader:
    return lambda: (text,)


def _entries(source: str, reader: Reader, whole_below: int) -> list[_Entry]:
    """Every object of one source: a large List item by item, anything else parsed whole."""
    pieces = iter(reader())
    head = dumps.at_least(pieces, max(whole_below, 1))
    if len(head) < whole_below:  # all of it
        return _whole_entries(source, head)
    head = head.removeprefix("\ufeff")
    read_list = _json_list if head.lstrip(" \t\r\n")[:1] == "{" else _yaml_list
    try:
        return read_list(source, chain([head], pieces))
    except dumps.Irregular:
        return _whole_entries(source, "".join(reader()))


def _whole_entries(source: str, text: str) -> list[_Entry]:
    return [_entry(where, path, raw) for where, path, raw in _documents(source, text)]


def _entry(where: str, path: str, raw: dict[str, Any]) -> _Entry:
    problems: list[Problem] = []
    obj = _parse(where, path, raw, problems)
    if obj is None:
        return where, path, problems, None
    return where, path, obj, raw if isinstance(obj, InferenceGroup) else None


def _list_entries(source: str, start: dict[str, Any], items: Iterable[Any]) -> list[_Entry]:
    """What `_documents` makes of the items of a List, one item at a time; `start` holds
    the List's keys that come before its items."""
    entries: list[_Entry] = []
    shapes: list[Problem] = []
    kind = start.get("kind")
    if "kind" in start and not _is_list({**start, "items": []}):
        raise dumps.Irregular  # an object that merely has `items`: not a List
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            shapes.append(Problem(f"items[{index}]", f"must be a mapping (an object), got {_type_name(item)}", source))
            continue
        if kind != "List" and ("apiVersion" not in item or "kind" not in item):
            if not isinstance(kind, str) or "apiVersion" not in start:
                raise dumps.Irregular  # the List's own kind and apiVersion come after its items
            item = {"apiVersion": start["apiVersion"] or "v1", "kind": kind[: -len("List")], **item}
        if not shapes:
            entries.append(_entry(source, f"items[{index}]", item))
    if shapes:
        raise InputError(shapes)
    return entries


def _yaml_list(source: str, pieces: Iterable[str]) -> list[_Entry]:
    """A YAML List in block style (what `kubectl get -o yaml` prints), item by item."""
    blocks = dumps.whole_lines(pieces)
    first = dumps.at_least(blocks, 1 << 16)
    head = dumps.yaml_list_head(first)
    if head is None:
        raise dumps.Irregular
    header, indent, at = head
    shape = dumps.layout(indent)
    items = dumps.YamlItems(chain([first[at:]], blocks), shape)
    entries = _list_entries(source, _yaml_skeleton(header, ""), (_yaml_item(text, shape) for text in items))
    if not _is_list(_yaml_skeleton(header, items.tail)):
        raise dumps.Irregular
    return entries


def _yaml_skeleton(header: str, tail: str) -> dict[str, Any]:
    """The List's own keys: what comes before and after its items, with the items left out."""
    try:
        documents = list(yaml.load_all(header + "items: []\n" + tail, Loader=_Loader))  # noqa: S506 - a SafeLoader
        if len(documents) != 1 or not isinstance(documents[0], dict) or _deeper_than(documents[0], MAX_NESTING):
            raise dumps.Irregular
    except (yaml.YAMLError, RecursionError, _AliasBomb):
        raise dumps.Irregular from None  # the whole-file reader says what is wrong
    return documents[0]


def _yaml_item(text: str, shape: dumps.Layout) -> Any:
    """One item, parsed on its own; a Node or Pod without the subtrees no model reads."""
    stated = dumps.type_of(text, shape)
    keys = _PROJECTIONS.get(stated) if stated else None
    if keys is not None:
        text = dumps.trimmed(text, shape, keys)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if not isinstance(node, yaml.SequenceNode) or len(node.value) != 1:
            raise dumps.Irregular
        item = _built(loader, node.value[0], 3, set())  # under the List and `items`
    except (yaml.YAMLError, RecursionError):
        raise dumps.Irregular from None
    finally:
        loader.dispose()
    if keys is not None and not (isinstance(item, dict) and (item.get("apiVersion"), item.get("kind")) == stated):
        raise dumps.Irregular  # the lines read as its kind were not its own
    return item


_STR, _MAP, _SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


def _built(loader: _Loader, node: yaml.Node, depth: int, building: set[int]) -> Any:
    """What `loader` constructs from `node`, built directly for strings, mappings and lists
    (several times faster than PyYAML's general constructor, which builds the rest). Raises
    Irregular for what the whole-file parse must report: a repeated or unhashable key, a
    merge key, nesting deeper than MAX_NESTING, an alias of a node inside itself."""
    if node.tag == _STR and isinstance(node, yaml.ScalarNode):
        return node.value
    if node.tag not in (_MAP, _SEQ) or isinstance(node, yaml.ScalarNode):
        return loader.construct_object(node, deep=True)
    if depth > MAX_NESTING or id(node) in building:
        raise dumps.Irregular
    building.add(id(node))
    built: Any
    if isinstance(node, yaml.SequenceNode):
        built = [_built(loader, child, depth + 1, building) for child in node.value]
    else:
        built = {}
        for key, value in node.value:
            if key.tag != _STR or not isinstance(key, yaml.ScalarNode) or key.value in built:
                raise dumps.Irregular
            is_text = value.tag == _STR and isinstance(value, yaml.ScalarNode)
            built[key.value] = value.value if is_text else _built(loader, value, depth + 1, building)
    building.discard(id(node))
    return built


def _json_list(source: str, pieces: Iterable[str]) -> list[_Entry]:
    """A JSON object with an `items` array (what `kubectl get -o json` prints), item by item."""
    text = dumps.JsonText(pieces, dumps.json_decoder(_json_object))
    doc: dict[str, Any] = {}
    entries: list[_Entry] | None = None
    text.take("{")
    more = text.peek() != "}"
    while more:
        if text.peek() != '"':
            raise dumps.Irregular
        key = text.value()
        text.take(":")
        if key in doc:
            raise dumps.Irregular
        if key == "items" and text.peek() == "[":
            start = dict(doc)
            doc[key] = []
            entries = _list_entries(source, start, text.array())
        else:
            doc[key] = text.value()
        more = text.peek() == ","
        if more:
            text.pos += 1
    text.take("}")
    if text.peek() or entries is None or not _is_list(doc):
        raise dumps.Irregular
    return entries


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
    templates = [Problem(_join(path, p.path), p.message, where) for p in group_template_problems(raw)] if model is InferenceGroup else []
    try:
        parsed = model.model_validate(raw)
    except ValidationError as exc:
        problems += merged(validation_problems(raw, exc, where, path), templates)
        return None
    if templates:
        problems += templates
        return None
    return parsed


def validation_problems(raw: Any, exc: ValidationError, where: str, prefix: str = "") -> list[Problem]:
    """One Problem per error of validating `raw`, at its field path as the user wrote it
    (under `prefix`) and in the words of YAML/JSON rather than pydantic's."""
    return [
        Problem(_join(prefix, _loc_path(raw, error["loc"], error.get("type") == "missing")), _message(error), where)
        for error in exc.errors(include_url=False)
    ]


def _add(
    inputs: Inputs,
    obj: BaseModel,
    where: str,
    path: str,
    origins: dict[tuple[str, str], tuple[str, str]],
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
        first_where, first_path = origins[key]
        first = f"{first_where}: {first_path}" if first_path else first_where
        problems.append(Problem(_join(path, "metadata.name"), f"duplicate {key[0]} {key[1]!r} (also in {first})", where))
        return
    origins[key] = (where, path)
    if isinstance(obj, Node):
        inputs.nodes.append(obj)
    elif isinstance(obj, Pod):
        inputs.pods.append(obj)
    elif isinstance(obj, ClusterTopology):
        inputs.topologies[obj.metadata.name] = obj
    else:
        inputs.groups.append(obj)


def _origin(origins: dict[tuple[str, str], tuple[str, str]], obj: InferenceGroup | ClusterTopology) -> tuple[str, str]:
    if isinstance(obj, InferenceGroup):
        key = ("InferenceGroup", f"{obj.metadata.namespace}/{obj.metadata.name}")
    else:
        key = ("ClusterTopology", obj.metadata.name)
    where, path = origins[key]
    return where, path


def _loc_path(raw: Any, loc: tuple[int | str, ...], missing: bool = False) -> str:
    """Render a pydantic location as a field path, dropping union/validator tags.

    A step is kept only when it exists in the input (or is the missing field itself), so
    tags such as `int` or `function-after[...]` never show up as if they were fields.
    """
    parts: list[str] = []
    node: Any = raw
    last = len(loc) - 1
    for position, item in enumerate(loc):
        if isinstance(node, list) and isinstance(item, int) and 0 <= item < len(node):
            parts.append(f"[{item}]")
            node = node[item]
        elif isinstance(node, dict) and isinstance(item, str) and (item in node or (missing and position == last)):
            step = key_path(item)  # .name, or ["nvidia.com/gpu"] for keys that are not plain
            parts.append(step[1:] if not parts and step.startswith(".") else step)
            node = node.get(item)
        # anything else is a pydantic tag (a union member, a validator name): skip it
    return "".join(parts)


def _message(error: ErrorDetails) -> str:
    kind = error.get("type", "")
    if kind in _MESSAGES:
        return _MESSAGES[kind]
    if kind in _EXPECTED:
        return f"must be {_EXPECTED[kind]}, got {_type_name(error.get('input'))}"
    ctx = error.get("ctx") or {}
    if kind == "too_short":
        return f"must have at least {_items(ctx.get('min_length'))}, got {ctx.get('actual_length')}"
    if kind == "too_long":
        return f"must have at most {_items(ctx.get('max_length'))}, got {ctx.get('actual_length')}"
    if kind == "finite_number":
        return f"must be a finite number, got {error.get('input')!r}"
    message = str(error.get("msg", "invalid value"))
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix):]
    if kind == "literal_error":
        message = message.replace("Input should be", "must be")
    elif message.startswith("Input should be"):
        message = "must be" + message[len("Input should be"):]
    if "input" in error and kind not in ("missing",) and not isinstance(error["input"], (dict, list)):
        shown = _shown(error["input"])
        if isinstance(error["input"], str):
            said = shown in message  # a quoted string is unmistakable
        else:
            said = f"got {shown}" in message or f"not {shown}" in message  # "0" alone could be anything
        if not said and len(shown) <= 60:
            message += f", got {shown}"
    return message.replace("\n", " ")


def _shown(value: object) -> str:
    """A scalar as the user wrote it in YAML: null and true/false, not None and True."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _join(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}"


def _items(count: object) -> str:
    return f"{count} item" + ("" if count == 1 else "s")


def _type_name(value: object) -> str:
    names = {list: "a list", dict: "a mapping", str: "a string", int: "a number", float: "a number", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), type(value).__name__)
