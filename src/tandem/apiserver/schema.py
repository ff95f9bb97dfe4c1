"""A CustomResourceDefinition's structural `openAPIV3Schema` at work, as the API server uses it:
prune fields the schema does not declare, fill in `default`s, then validate.

Validation is JSON Schema (draft 4, what OpenAPI v3 schemas are) with the `x-kubernetes-*`
extensions dropped, `nullable` and `x-kubernetes-int-or-string` honoured, and the items of
an `x-kubernetes-list-type: map` list unique by their keys (on update only when the stored
object's were, as the real server ratchets it). CEL rules
(`x-kubernetes-validations`) are `cel.py`'s. `metadata` is the server's own business
and is neither pruned nor defaulted. Each problem names its field path
(`spec.roles[1].minReplicas`), in path order.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft4Validator
from jsonschema.exceptions import SchemaError, ValidationError

from tandem.errors import key_path

ROOT_FIELDS = ("apiVersion", "kind", "metadata")
PRESERVE = "x-kubernetes-preserve-unknown-fields"
EMBEDDED = "x-kubernetes-embedded-resource"
INT_OR_STRING = "x-kubernetes-int-or-string"
_REQUIRED = re.compile(r"^'(.*)' is a required property$")


@dataclass(frozen=True)
class Cause:
    """One problem, as a Status `details.causes` entry carries it."""

    field: str
    reason: str  # FieldValueInvalid, FieldValueRequired, FieldValueNotSupported, FieldValueTypeInvalid
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class Schema:
    def __init__(self, openapi: dict[str, Any]):
        """Raises SchemaError (jsonschema's) when `openapi` is not a usable schema."""
        self.openapi = openapi
        converted = to_jsonschema(openapi)
        Draft4Validator.check_schema(converted)
        self._validator = Draft4Validator(converted)

    def prune(self, obj: dict[str, Any]) -> list[str]:
        """Drop every field the schema does not declare (in place); returns their paths."""
        unknown: list[str] = []
        properties = self.openapi.get("properties") or {}
        for key in list(obj):
            if key in ROOT_FIELDS:
                continue
            if key in properties:
                _prune(obj[key], properties[key], key, unknown)
            elif not self.openapi.get(PRESERVE):
                unknown.append(key)
                del obj[key]
        return unknown

    def default(self, obj: dict[str, Any]) -> None:
        """Fill in the schema's `default`s (in place), where the parent object exists."""
        for key, sub in (self.openapi.get("properties") or {}).items():
            if key in ROOT_FIELDS:
                continue
            if key not in obj and "default" in sub:
                obj[key] = copy.deepcopy(sub["default"])
            if key in obj:
                _default(obj[key], sub)

    def problems(self, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[Cause]:
        """What is wrong with `obj` (as an update of `old`, when given: a repeated list-map key
        counts only if `old` had none, as the real server ratchets list-type validation)."""
        causes = dict.fromkeys(_cause(e) for e in self._validator.iter_errors(obj))  # anyOf branches may repeat themselves
        if old is None or not _repeated_keys(old, self.openapi, ""):
            causes |= dict.fromkeys(_repeated_keys(obj, self.openapi, ""))
        return sorted(causes, key=lambda c: _field_order(c.field))


def check(openapi: Any) -> str | None:
    """Why `openapi` cannot be used as a schema, or None."""
    if not isinstance(openapi, dict):
        return "must be an object"
    try:
        Schema(openapi)
    except SchemaError as exc:
        return f"invalid schema: {exc.message}"
    except re.error as exc:
        return f"invalid pattern: {exc}"
    return None


def to_jsonschema(node: Any) -> Any:
    """An OpenAPI v3 schema as draft-4 JSON Schema: extensions dropped, `nullable` as a null alternative."""
    if isinstance(node, list):
        return [to_jsonschema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key in ("properties", "patternProperties", "definitions") and isinstance(value, dict):
            out[key] = {name: to_jsonschema(sub) for name, sub in value.items()}
        elif key in ("default", "example", "enum", "required", "description", "type", "format", "pattern"):
            out[key] = value
        else:
            out[key] = to_jsonschema(value)
    if node.get(INT_OR_STRING) and "anyOf" not in out and "type" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable"):
        out = {"anyOf": [out, {"type": "null"}]}
    return out


def _prune(value: Any, schema: dict[str, Any], path: str, unknown: list[str]) -> None:
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for index, item in enumerate(value):
                _prune(item, items, f"{path}[{index}]", unknown)
        return
    if not isinstance(value, dict):
        return
    properties = schema.get("properties")
    additional = schema.get("additionalProperties")
    preserve = bool(schema.get(PRESERVE))
    for key in list(value):
        where = f"{path}{key_path(key)}"
        if properties is not None and key in properties:
            _prune(value[key], properties[key], where, unknown)
        elif isinstance(additional, dict):
            _prune(value[key], additional, where, unknown)
        elif preserve or additional is True or (schema.get(EMBEDDED) and key in ROOT_FIELDS):
            continue
        else:
            unknown.append(where)
            del value[key]


def _default(value: Any, schema: dict[str, Any]) -> None:
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for item in value:
                _default(item, items)
        return
    if not isinstance(value, dict):
        return
    for key, sub in (schema.get("properties") or {}).items():
        if key not in value and "default" in sub:
            value[key] = copy.deepcopy(sub["default"])
        if key in value:
            _default(value[key], sub)
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        for item in value.values():
            _default(item, additional)


def _repeated_keys(value: Any, schema: dict[str, Any], path: str) -> list[Cause]:
    """Items of an `x-kubernetes-list-type: map` list whose keys repeat an earlier item's, as the
    real server's list-type validation words them (`Duplicate value: map[string]interface {}{"name":"rack"}`)."""
    out: list[Cause] = []
    if isinstance(value, list):
        items = schema.get("items")
        keys = (schema.get("x-kubernetes-list-map-keys") or []) if schema.get("x-kubernetes-list-type") == "map" else []
        seen: set[str] = set()
        for index, item in enumerate(value):
            where = f"{path}[{index}]"
            if keys and isinstance(item, dict):
                key = ", ".join(f"{json.dumps(k)}:{json.dumps(item[k], separators=(',', ':'))}" for k in sorted(keys) if k in item)  # Go's %#v
                if key in seen:
                    out.append(Cause(where, "FieldValueDuplicate", f"Duplicate value: map[string]interface {{}}{{{key}}}"))
                seen.add(key)
            if isinstance(items, dict):
                out += _repeated_keys(item, items, where)
    elif isinstance(value, dict):
        properties, additional = schema.get("properties") or {}, schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, additional if isinstance(additional, dict) else None)
            if isinstance(sub, dict) and not (path == "" and key in ROOT_FIELDS):
                out += _repeated_keys(item, sub, f"{path}{key_path(str(key))}".lstrip("."))
    return out


def field_path(parts: Any) -> str:
    """A path from jsonschema (keys and indices) as `spec.roles[1].minReplicas`."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += key_path(str(part))
    return out.lstrip(".")


def _field_order(field: str) -> list[tuple[int, int, str]]:
    """`spec.roles[10].name` after `spec.roles[2].name`: indices compare as numbers."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"[.\[\]]+", field) if part]


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _cause(error: ValidationError) -> Cause:
    path = field_path(error.absolute_path)
    kind = error.validator
    if kind == "required":
        m = _REQUIRED.match(error.message)
        name = m[1] if m else ""
        where = f"{path}{key_path(name)}".lstrip(".") if name else path
        return Cause(where, "FieldValueRequired", "Required value")
    if kind == "type":
        return Cause(path, "FieldValueTypeInvalid", f"Invalid value: {_shown(error.instance)}: must be of type {_types(error.validator_value)}")
    if kind == "enum":
        allowed = ", ".join(json.dumps(v) for v in error.validator_value)
        return Cause(path, "FieldValueNotSupported", f"Unsupported value: {_shown(error.instance)}: supported values: {allowed}")
    if kind == "pattern":
        return Cause(path, "FieldValueInvalid", f"Invalid value: {_shown(error.instance)}: should match '{error.validator_value}'")
    if kind in ("minimum", "maximum"):
        exclusive = (error.schema or {}).get("exclusiveMinimum" if kind == "minimum" else "exclusiveMaximum")
        relation = ("greater than" if kind == "minimum" else "less than") + ("" if exclusive else " or equal to")
        return Cause(path, "FieldValueInvalid", f"Invalid value: {_shown(error.instance)}: should be {relation} {error.validator_value}")
    if kind in ("maxLength", "maxItems", "maxProperties"):
        unit = {"maxLength": "characters", "maxItems": "items", "maxProperties": "properties"}[kind]
        return Cause(path, "FieldValueTooLong", f"Too long: may not be more than {error.validator_value} {unit}")
    if kind in ("minLength", "minItems", "minProperties"):
        unit = {"minLength": "characters", "minItems": "items", "minProperties": "properties"}[kind]
        return Cause(path, "FieldValueInvalid", f"Invalid value: {_shown(error.instance)}: should have at least {error.validator_value} {unit}")
    return Cause(path, "FieldValueInvalid", f"Invalid value: {_shown(error.instance)}: {error.message}")


def _types(value: Any) -> str:
    return " or ".join(value) if isinstance(value, list) else str(value)
