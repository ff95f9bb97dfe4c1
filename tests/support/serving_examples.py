"""What the serving examples run: each engine or router container's argv, as its pod would see it.

The pods are the ones tandem's operator makes from each InferenceGroup (`replica_pods`), so
the `$(TANDEM_...)` references in args are expanded from the environment tandem really sets,
as the kubelet expands them. Flags are then checked against the engine's own flag table
(engine_flags/*.json, written from its parser by tools/engine_flags.py).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tandem.api.resources import InferenceGroup
from tandem.controller.manifests import replica_pods

REPO = Path(__file__).resolve().parents[2]
SERVING = REPO / "examples" / "serving"
FLAG_TABLES = REPO / "tests" / "examples" / "engine_flags"
ENGINES = ("sglang", "vllm", "sglang-router", "vllm-router")

# How each program is started: the command's words that come before its flags.
_ENTRIES = {
    ("-m", "sglang.launch_server"): "sglang",
    ("vllm", "serve"): "vllm",
    ("-m", "sglang_router.launch_router"): "sglang-router",
    ("-m", "vllm_router.launch_router"): "vllm-router",
}
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


@dataclass(frozen=True)
class Invocation:
    where: str  # file and object, for messages
    engine: str
    argv: tuple[str, ...]  # after the program's entry words, variables expanded
    pod: dict[str, Any]  # the pod (or the Deployment's pod template) it runs in
    container: dict[str, Any]


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: known names replaced, unknown ones left as they are, $$ is $."""

    def replace(match: re.Match[str]) -> str:
        if match[0] == "$$":
            return "$"
        return env.get(match[1], match[0])

    return _REFERENCE.sub(replace, value)


def entry_of(words: list[str]) -> tuple[str, int] | None:
    """The engine a command line starts, and where its flags begin."""
    for start in range(len(words)):
        for entry, engine in _ENTRIES.items():
            if tuple(words[start : start + len(entry)]) == entry:
                return engine, start + len(entry)
    return None


def _container_invocations(where: str, pod: dict[str, Any]) -> list[Invocation]:
    found = []
    for container in pod["spec"].get("containers", []):
        env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
        words = [expand(word, env) for word in [*container.get("command", []), *container.get("args", [])]]
        if len(words) == 3 and words[:2] in (["sh", "-c"], ["bash", "-c"]):
            words = shlex.split(words[2])
        entry = entry_of(words)
        if entry is not None:
            engine, start = entry
            found.append(Invocation(f"{where} container {container['name']}", engine, tuple(words[start:]), pod, container))
    return found


def group_pods(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod of unit 0's replica 0 of each role, as the operator makes them."""
    raw = {**raw, "metadata": {**raw["metadata"], "uid": "example"}}  # as stored: the API server gives it one
    typed = InferenceGroup.model_validate(raw)
    pods = []
    for role in typed.spec.roles:
        pods.extend(replica_pods(raw, typed, 0, role.name, 0, "r0", True))
    return pods


def invocations(path: Path) -> list[Invocation]:
    found = []
    for doc in documents(path):
        name = f"{path.relative_to(REPO)} {doc['kind']}/{doc['metadata']['name']}"
        if doc["kind"] == "InferenceGroup":
            for pod in group_pods(doc):
                found.extend(_container_invocations(f"{name} pod {pod['metadata']['name']}", pod))
        elif doc["kind"] == "Deployment":
            found.extend(_container_invocations(name, doc["spec"]["template"]))
    return found


def all_invocations() -> list[Invocation]:
    return [found for path in sorted(SERVING.glob("*.yaml")) for found in invocations(path)]


def flag_table(engine: str) -> dict[str, Any]:
    table: dict[str, Any] = json.loads((FLAG_TABLES / f"{engine}.json").read_text(encoding="utf-8"))
    return table


def flag_problems(table: dict[str, Any], argv: tuple[str, ...] | list[str]) -> list[str]:
    """Each flag the engine's parser would refuse: unknown, a value where it takes none, a missing
    value, a value outside its choices; and positional arguments beyond the parser's."""
    flags, problems, positionals = table["flags"], [], 0
    words = list(argv)
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-") or re.fullmatch(r"-\d+(\.\d+)?", word):
            positionals += 1
            continue
        flag, has_value, inline = word.partition("=")
        spec = flags.get(flag)
        if spec is None:
            problems.append(f"{flag}: not a flag of {table['source']}")
            continue
        if spec["values"] == "none":
            if has_value:
                problems.append(f"{flag}: takes no value, got {inline!r}")
            continue
        values = [inline] if has_value else []
        if not has_value:
            limit = 1 if spec["values"] in ("one", "optional") else len(words)
            while i < len(words) and len(values) < limit and not (words[i].startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?", words[i])):
                values.append(words[i])
                i += 1
        if not values and spec["values"] != "optional":
            problems.append(f"{flag}: expects a value")
        for value in values:
            if spec["choices"] is not None and value not in spec["choices"]:
                problems.append(f"{flag}: {value!r} is not one of {', '.join(spec['choices'])}")
    if positionals > table["positionals"]:
        problems.append(f"{positionals} positional argument(s), the parser takes {table['positionals']}")
    return problems
