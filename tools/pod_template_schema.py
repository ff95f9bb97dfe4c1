"""Write `src/tandem/api/schemas/pod_template_spec.json`: Kubernetes' PodTemplateSpec schema,
the closure of `io.k8s.api.core.v1.PodTemplateSpec` only, with the allowed values of every
enum field.

Two sources, both Apache-2.0:
- the structure (fields, types, unknown fields refused): Kubernetes' own OpenAPI schema as
  the PyPI package kubernetes-validate ships it (a dev dependency), `vX-local-strict`
  (`additionalProperties: false` on every object, `null` accepted where Kubernetes takes
  it for "unset");
- the enums: Kubernetes' published OpenAPI documents carry none (the generator drops
  them), so they are read from the Go types, `k8s.io/api` `core/v1/types.go`: every type
  marked `+enum`, its constants, and the struct fields of that type.

    python tools/pod_template_schema.py --types-go PATH/TO/k8s.io/api/core/v1/types.go \
        --api-commit COMMIT [--version 1.37.0] [--out src/tandem/api/schemas/pod_template_spec.json]

`tests/api/test_pod_templates.py` checks that the shipped file's structure is still what
the installed kubernetes-validate gives (`structure()` below, without enums).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

ROOT = "io.k8s.api.core.v1.PodTemplateSpec"
CORE = "io.k8s.api.core.v1."
OUT = Path(__file__).resolve().parents[1] / "src/tandem/api/schemas/pod_template_spec.json"
# Kept: what a validator reads. Dropped: descriptions and the x-kubernetes-* list/map hints.
KEEP = {"$ref", "type", "properties", "additionalProperties", "items", "required", "oneOf", "anyOf", "allOf", "enum", "format"}


def definitions(version: str) -> dict[str, Any]:
    import kubernetes_validate  # a dev dependency: only this script and its test read it

    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{version}-local-strict"
    return json.loads((base / "_definitions.json").read_text())["$defs"]


def structure(version: str, roots: tuple[str, ...] = (ROOT,)) -> dict[str, Any]:
    """The closure of PodTemplateSpec (or of `roots`), descriptions dropped, refs local to the result."""
    defs = definitions(version)
    kept: dict[str, Any] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in kept:
            continue
        kept[name] = _trim(defs[name], todo)
    return dict(sorted(kept.items()))


def _trim(node: Any, todo: list[str]) -> Any:
    if isinstance(node, list):
        return [_trim(item, todo) for item in node]
    if not isinstance(node, dict):
        return node
    if _plain_types(node.get("oneOf")):  # int-or-string, quantity: one type list (null would match each member)
        types = [t for member in node["oneOf"] for t in _as_list(member["type"])]
        return {"type": list(dict.fromkeys(types))}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref":
            name = value.rsplit("/", 1)[-1]
            todo.append(name)
            out[key] = f"#/$defs/{name}"
        elif key == "properties":
            out[key] = {field: _trim(schema, todo) for field, schema in value.items()}
        elif key in KEEP:
            out[key] = _trim(value, todo)
    return out


def _plain_types(members: Any) -> bool:
    return isinstance(members, list) and bool(members) and all(isinstance(m, dict) and set(m) == {"type"} for m in members)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


_ENUM_TYPE = re.compile(r"^// \+enum\s*\n(?://[^\n]*\n)*type (\w+) string", re.M)
_CONST = re.compile(r"^\s*(?:const\s+)?\w+\s+(\w+)\s*=\s*\"([^\"]*)\"", re.M)
_STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.M | re.S)
_FIELD = re.compile(r"^\s*\w+\s+(\[\])?\*?(\w+)\s+`json:\"(\w+)")


def enums(types_go: str) -> dict[tuple[str, str], tuple[list[str], bool]]:
    """(struct, json field) -> (allowed values, is a list) for every field of a `+enum` type."""
    text = types_go.replace("\r\n", "\n")
    marked = set(_ENUM_TYPE.findall(text))
    values: dict[str, list[str]] = {name: [] for name in marked}
    for type_name, value in _CONST.findall(text):
        if type_name in values and value not in values[type_name]:
            values[type_name].append(value)
    out: dict[tuple[str, str], tuple[list[str], bool]] = {}
    for struct, body in _STRUCT.findall(text):
        for line in body.splitlines():
            match = _FIELD.match(line)
            if match and match[2] in values and values[match[2]]:
                out[(struct, match[3])] = (values[match[2]], bool(match[1]))
    return out


def with_enums(defs: dict[str, Any], found: dict[tuple[str, str], tuple[list[str], bool]]) -> int:
    """Put each field's allowed values into `defs` (in place); how many fields got them."""
    count = 0
    for (struct, field), (allowed, is_list) in sorted(found.items()):
        schema = defs.get(CORE + struct, {}).get("properties", {}).get(field)
        if schema is None:
            continue
        target = schema.get("items", schema) if is_list else schema
        target["enum"] = [*allowed, None]  # null is "unset", as for every optional field
        count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--types-go", type=Path, required=True, help="k8s.io/api core/v1/types.go")
    parser.add_argument("--api-commit", required=True, help="the kubernetes/api commit types.go was read at")
    parser.add_argument("--version", default="1.37.0", help="the Kubernetes version of kubernetes-validate's schema")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    import importlib.metadata

    defs = structure(args.version)
    fields = with_enums(defs, enums(args.types_go.read_text()))
    document = {
        "$comment": (
            f"Kubernetes {args.version} PodTemplateSpec (io.k8s.api.core.v1.PodTemplateSpec and what it refers to), "
            "made by tools/pod_template_schema.py. Structure: Kubernetes' OpenAPI schema as shipped by the PyPI package "
            f"kubernetes-validate {importlib.metadata.version('kubernetes-validate')} (github.com/willthames/kubernetes-validate, "
            f"kubernetes-json-schema/v{args.version}-local-strict/_definitions.json), descriptions dropped. "
            f"Enums ({fields} fields): the +enum types of github.com/kubernetes/api core/v1/types.go at commit {args.api_commit}. "
            "Both Apache-2.0 (The Kubernetes Authors; Will Thames)."
        ),
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": f"#/$defs/{ROOT}",
        "$defs": defs,
    }
    write(args.out, document, f"{fields} enum fields, ")


def write(out: Path, document: dict[str, Any], extra: str = "") -> None:
    """The schema document, compact, and a line saying what was written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, separators=(",", ":"), sort_keys=False) + "\n")
    print(f"{out}: {len(document['$defs'])} definitions, {extra}{out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
