"""Large `kubectl get -o yaml|json` dumps, taken apart as text: one item at a time.

A dump of 50,000 nodes is hundreds of megabytes, most of it what no model reads (image
lists, managed fields). Parsed whole it takes minutes and gigabytes. Here the text of a
`List` is cut at its items, each item's unread subtrees are cut out before parsing, and
JSON is decoded one item at a time, so only one item is ever held as a tree.

Only the regular shape `kubectl` prints is taken this way; anything else raises
`Irregular` and is parsed whole by the caller, which also owns every error message.
Pure: text in, text or values out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

Projection = Mapping[str, frozenset[str] | None]

# At most this much text may follow the items of a YAML list (`kind: List`, `metadata`).
_MAX_TAIL = 1 << 20


class Irregular(Exception):
    """Not the regular shape read item by item: the caller parses the text whole instead."""


# ----------------------------------------------------------------------------- which keys are read


def projection(model: type[BaseModel]) -> Projection | None:
    """The keys an object of `model` is read from, each with the keys read from its own
    mapping (None: all of them); None when every key counts (unknown keys are errors, or a
    validator sees the whole input). Derived from the model, so a field added there is read."""
    if not _ignores_the_rest(model):
        return None
    keys: dict[str, frozenset[str] | None] = {}
    for name, info in model.model_fields.items():
        field = info.annotation
        inner = frozenset(_keys(field)) if isinstance(field, type) and issubclass(field, BaseModel) and _ignores_the_rest(field) else None
        keys.update({name: inner, info.alias or name: inner})
    return MappingProxyType(keys)


def _ignores_the_rest(model: type[BaseModel]) -> bool:
    return model.model_config.get("extra") == "ignore" and not model.__pydantic_decorators__.model_validators


def _keys(model: type[BaseModel]) -> Iterator[str]:
    """Every key pydantic takes a field from: its alias and, as populate_by_name allows, its name."""
    for name, info in model.model_fields.items():
        yield name
        yield info.alias or name


# ----------------------------------------------------------------------------- YAML: the items of a block list

# `items:` at the top level, its first item on the next line, and the keys before it.
_YAML_LIST_HEAD = re.compile(r"(?P<header>(?:(?!items:)[^\n]*\n)*)items:[ ]*\n(?=(?P<indent>[ ]*)- \S)")


def yaml_list_head(text: str) -> tuple[str, int, int] | None:
    """(the keys before `items:`, the column of its items, where the first item starts)
    for a YAML list in block style; None for anything else."""
    found = _YAML_LIST_HEAD.match(text)
    return (found["header"], len(found["indent"]), found.end()) if found else None


@dataclass(frozen=True)
class Layout:
    """The patterns for a block list whose `- ` items stand at one column."""

    dash: str  # an item's first line starts with this
    boundary: re.Pattern[str]  # the line break before a line that starts an item, or that ends the list
    type_line: re.Pattern[str]  # an item's own apiVersion or kind, on one line
    section: re.Pattern[str]  # a key of an item, with every line of its value
    child: re.Pattern[str]  # a key of a mapping an item's key holds, with its value
    child_indent: str
    mapping: re.Pattern[str]  # a value that is a block mapping at the child column


def layout(indent: int) -> Layout:
    dash, key = " " * indent + "- ", " " * (indent + 2)
    child = key + "  "
    shallower = r"[^\s#]" if indent == 0 else rf"[ ]{{0,{indent - 1}}}[^\s#]"
    lead = rf"(?P<lead>{re.escape(dash)}|{key})"
    return Layout(
        dash=dash,
        boundary=re.compile(rf"\n(?={re.escape(dash)}|{shallower})"),  # not `^`: a line break is found faster
        type_line=re.compile(rf"^{lead}(?P<key>apiVersion|kind):[ ]+(?P<value>[A-Za-z0-9./-]+)[ ]*$", re.MULTILINE),
        section=re.compile(rf"^{lead}(?P<key>[A-Za-z][A-Za-z0-9]*):(?P<rest>.*)\n(?P<body>(?:{key}(?: |- ).*\n|[ ]*\n)*)", re.MULTILINE),
        child=re.compile(rf"^{child}(?P<key>[A-Za-z][A-Za-z0-9]*):(?P<rest>.*)\n(?P<body>(?:{child}(?: |- ).*\n|[ ]*\n)*)", re.MULTILINE),
        child_indent=child,
        mapping=re.compile(rf"{child}[A-Za-z]"),
    )


def whole_lines(pieces: Iterable[str]) -> Iterator[str]:
    """The same text in blocks that each end at the end of a line."""
    rest = ""
    for piece in pieces:
        cut = piece.rfind("\n") + 1
        if not cut:
            rest += piece
            continue
        yield piece if not rest and cut == len(piece) else rest + piece[:cut]
        rest = piece[cut:]
    if rest:
        yield rest + "\n"


def at_least(pieces: Iterator[str], size: int) -> str:
    """The next pieces joined: `size` characters or more, or all that are left."""
    parts: list[str] = []
    held = 0
    for piece in pieces:
        parts.append(piece)
        held += len(piece)
        if held >= size:
            break
    return "".join(parts)


class YamlItems:
    """The text of each item of a block list, in order; then `tail` holds what follows them."""

    def __init__(self, blocks: Iterator[str], shape: Layout):
        self._blocks = blocks
        self._layout = shape
        self.tail = ""

    def __iter__(self) -> Iterator[str]:
        pending = ""  # an item whose end has not been read yet
        for block in self._blocks:
            text = pending + block
            start = 0
            for found in self._layout.boundary.finditer(text):
                yield text[start : found.end()]
                start = found.end()
                if not text.startswith(self._layout.dash, start):
                    self.tail = _bounded(text[start:], self._blocks)
                    return
            pending = text[start:]
        if pending:
            yield pending


def _bounded(text: str, blocks: Iterator[str]) -> str:
    parts = [text]
    size = len(text)
    for block in blocks:
        size += len(block)
        if size > _MAX_TAIL:
            raise Irregular  # a second document, say: not a plain List
        parts.append(block)
    return "".join(parts)


def type_of(text: str, shape: Layout) -> tuple[str, str] | None:
    """(apiVersion, kind) as an item states them on lines of their own, if it does."""
    found: dict[str, str] = {}
    for line in shape.type_line.finditer(text):
        found.setdefault(line["key"], line["value"])
        if len(found) == 2:
            return found["apiVersion"], found["kind"]
    return None


def trimmed(text: str, shape: Layout, keys: Projection) -> str:
    """The item with the value of every key no model reads replaced by null, where that
    value is a block of its own lines; the key stays, so the item keeps its shape."""
    return shape.section.sub(partial(_section_trimmed, shape, keys), text)


def _section_trimmed(shape: Layout, keys: Projection, found: re.Match[str]) -> str:
    key, body = found["key"], found["body"]
    if found["rest"].strip() or not body.strip():
        return found[0]  # a value on the key's own line (or none): as written
    if key not in keys:
        return f"{found['lead']}{key}: null\n"
    read = keys[key]
    if read is None or not shape.mapping.match(body):
        return found[0]
    head = found[0][: len(found[0]) - len(body)]
    return head + shape.child.sub(partial(_child_trimmed, shape.child_indent, read), body)


def _child_trimmed(indent: str, read: frozenset[str], found: re.Match[str]) -> str:
    if found["key"] in read or found["rest"].strip() or not found["body"].strip():
        return found[0]
    return f"{indent}{found['key']}: null\n"


# ----------------------------------------------------------------------------- JSON: one value at a time

_JSON_TOKEN = re.compile(r"[^ \t\n\r]")


class JsonText:
    """JSON text arriving in pieces, read from a position; what lies behind it is let go."""

    def __init__(self, pieces: Iterable[str], decode: Callable[[str, int], tuple[Any, int]]):
        self._pieces = iter(pieces)
        self._decode = decode
        self.text = ""
        self.pos = 0

    def _more(self) -> bool:
        """Read on until the text held has doubled (so a value cut short is decoded again
        only a few times); False at the end."""
        held = len(self.text) - self.pos
        parts = [self.text[self.pos :]]
        size = held
        for piece in self._pieces:
            parts.append(piece)
            size += len(piece)
            if size >= 2 * held:
                break
        self.text, self.pos = "".join(parts), 0
        return size > held

    def peek(self) -> str:
        """The next character that is not white space ("" at the end), not taken."""
        while True:
            found = _JSON_TOKEN.search(self.text, self.pos)
            if found:
                self.pos = found.start()
                return found[0]
            self.pos = len(self.text)
            if not self._more():
                return ""

    def take(self, token: str) -> None:
        if self.peek() != token:
            raise Irregular
        self.pos += 1

    def value(self) -> Any:
        """The JSON value after the position, reading on while it is cut short."""
        self.peek()
        while True:
            try:
                value, end = self._decode(self.text, self.pos)
            except json.JSONDecodeError:
                if self._more():
                    continue  # cut short, or wrong: read on to tell
                raise Irregular from None
            except (ValueError, RecursionError):  # a duplicate key, nesting too deep
                raise Irregular from None
            if end == len(self.text) and self._more():
                continue  # a number may go on in the next piece
            self.pos = end
            return value

    def array(self) -> Iterator[Any]:
        """The values of the array at the position, one at a time."""
        self.take("[")
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            yield self.value()
            separator = self.peek()
            if separator not in (",", "]"):
                raise Irregular
            self.pos += 1
            if separator == "]":
                return


def json_decoder(object_pairs_hook: Callable[[list[tuple[str, Any]]], Any]) -> Callable[[str, int], tuple[Any, int]]:
    return json.JSONDecoder(object_pairs_hook=object_pairs_hook).raw_decode
