"""Mutations of real input files, for fuzzing every reader tandem has.

`mutants(text, rng)` takes a real file (an example group, a cluster dump, a scenario, a
trace, an AdmissionReview) and returns a broken variant: either the parsed tree changed at
a random place (a key dropped or renamed, a value replaced by one of the values that break
readers — huge and non-finite numbers, wrong types, long names, deep nesting — a list item
duplicated) and written back as YAML or JSON, or the text itself cut, spliced, re-indented
or salted with an alias bomb or a 5,000-digit number. Seeded: the same seed, the same
mutant.
"""

from __future__ import annotations

import json
import random
from typing import Any

import yaml

EVIL: list[Any] = [
    None, True, False, 0, -1, 1.5, 2**31, 2**63, -(2**63) - 1, float("nan"), float("inf"), float("-inf"),
    "", " ", "x" * 300, "UPPER_case", "a/b", "ä", "1e400", "0x10", "-0", "null", "~", "[", "{}",
    [], {}, [[[[[[[[[[[[]]]]]]]]]]]], {"a": {"b": {"c": {"d": {}}}}}, ["x"] * 50,
]
ALIAS_BOMB = "bomb: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"bomb{i}: &a{i} [{', '.join(['*a' + (str(i - 1) if i else '')] * 9)}]\n" for i in range(8)
)


def mutants(text: str, rng: random.Random) -> str:
    """One mutant of `text` (tree mutations three times in four when the text parses)."""
    try:
        documents = [d for d in yaml.safe_load_all(text)] if rng.random() < 0.75 else None
    except yaml.YAMLError:
        documents = None
    if documents:
        for _ in range(rng.randint(1, 3)):
            index = rng.randrange(len(documents))
            documents[index] = _mutate_tree(documents[index], rng)
        if rng.random() < 0.3 and len(documents) == 1:
            return json.dumps(documents[0], allow_nan=True)
        try:
            return yaml.safe_dump_all(documents, sort_keys=False)
        except (yaml.YAMLError, RecursionError):
            return json.dumps(documents, allow_nan=True)
    return _mutate_text(text, rng)


def _mutate_tree(tree: Any, rng: random.Random) -> Any:
    paths = list(_paths(tree, ()))
    if not paths:
        return rng.choice(EVIL)
    path = rng.choice(paths)
    if not path:
        return rng.choice(EVIL)
    parent = _at(tree, path[:-1])
    key = path[-1]
    action = rng.random()
    if action < 0.5:
        parent[key] = _evil(rng)
    elif action < 0.65 and isinstance(parent, dict):
        del parent[key]
    elif action < 0.75 and isinstance(parent, dict):
        parent[_evil_key(rng)] = parent.pop(key)
    elif action < 0.85 and isinstance(parent, list):
        parent.insert(key, json.loads(json.dumps(parent[key], allow_nan=True)))
    elif action < 0.95:
        other = rng.choice(paths)
        if other and other[: len(path)] != path and path[: len(other)] != other:
            parent[key] = json.loads(json.dumps(_at(tree, other), allow_nan=True))
    else:
        parent[key] = _deep(rng.randint(50, 400))
    return tree


def _mutate_text(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True) or [""]
    action = rng.randrange(8)
    at = rng.randrange(len(lines))
    if action == 0:
        return text[: rng.randrange(len(text) + 1)]
    if action == 1:
        return "".join(lines[:at] + [lines[at]] + lines[at:])
    if action == 2:
        return "".join(lines[:at] + lines[at + 1:])
    if action == 3:
        return "".join(lines[:at] + ["  " + lines[at]] + lines[at + 1:])
    if action == 4:
        return ALIAS_BOMB + text if rng.random() < 0.5 else text + "\n" + ALIAS_BOMB
    if action == 5:
        position = rng.randrange(len(text) + 1)
        return text[:position] + "9" * 5000 + text[position:]
    if action == 6:
        position = rng.randrange(len(text) + 1)
        return text[:position] + "".join(chr(rng.randrange(32, 127)) for _ in range(rng.randint(1, 20))) + text[position:]
    return text.replace(":", "\t:", 1) if rng.random() < 0.5 else text.replace(" ", "\t", 3)


def _evil(rng: random.Random) -> Any:
    value = rng.choice(EVIL)
    return json.loads(json.dumps(value, allow_nan=True)) if isinstance(value, (list, dict)) else value


def _evil_key(rng: random.Random) -> Any:
    return rng.choice(["", "x" * 300, "apiVersion", "kind", "metadata", "spec", "status", "replicas", "name", "unknownField", "1"])


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def _paths(tree: Any, prefix: tuple) -> Any:
    yield prefix
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(tree, list):
        for index, value in enumerate(tree[:20]):
            yield from _paths(value, (*prefix, index))


def _at(tree: Any, path: tuple) -> Any:
    for step in path:
        tree = tree[step]
    return tree
