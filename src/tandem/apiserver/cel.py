"""A CRD's CEL validation rules (`x-kubernetes-validations`), compiled once when the CRD is
served and evaluated on every create and update of its objects, with cel-python.

As the real server does it: each rule runs at the schema node where it sits, with `self`
that node's value (a list's `items` rules once per item, a map's `additionalProperties`
rules once per value; null values are not checked); the root's `self` has `apiVersion`,
`kind` and only `metadata.name` and `generateName`. A rule that does not hold is a cause
at the node's path (plus the rule's `fieldPath`), worded as Kubernetes 1.32 words it:
`spec.roles[0].minReplicas: Invalid value: "object": <message>`, the message being the
rule's `messageExpression` (when it gives a one-line string), else its `message`, else
`failed rule: <rule>`; `reason` picks Forbidden, Required or Duplicate instead.

On update, a rule that uses `oldSelf` (a transition rule) runs where the old object has
a value to compare with (object properties and map values by key, `x-kubernetes-list-type:
map` items by their keys); and an error of a rule without `oldSelf` on a value the update
left as it was is only a warning (CRD validation ratcheting, on by default since 1.30).

Where cel-python differs from the real server, the rule is skipped, not guessed: a rule it
cannot parse, one that calls a function it lacks (Kubernetes' CEL libraries: `isSorted`,
`quantity`, `url`, optionals, ...), or one with `optionalOldSelf`. A real server would
refuse such a CRD; this one serves it and `skipped` says which rules it will not check.
cel-python is dynamically typed and has no cost budget, so a rule the real server would
refuse to compile (a type error, an unbounded cost) may still run here. Property names are
not escaped (a rule must say `self['x-y']`, not `self.x__dash__y`).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, Sequence

try:
    import celpy
    from celpy import celtypes
    from celpy.evaluation import CELEvalError, base_functions
    _HAVE_CELPY = True
except ImportError:  # the `apiserver` extra is not installed: CRDs are served without their rules
    _HAVE_CELPY = False

from tandem.apiserver.schema import Cause

VALIDATIONS = "x-kubernetes-validations"
MACROS = frozenset({"has", "dyn", "all", "exists", "exists_one", "map", "filter", "min"})
REASONS = {"FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"}
MAX_MESSAGE = 5 * 1024  # the real server's limit on an evaluated messageExpression
# Schema problems after which the real server does not run the rules (hasBlockingErr).
BLOCKING = frozenset({"FieldValueRequired", "FieldValueNotSupported", "FieldValueTooLong", "FieldValueTooMany", "FieldValueTypeInvalid"})
NOT_CHECKED = Cause("<nil>", "FieldValueInvalid", 'Invalid value: "null": some validation rules were not checked because the object was '
                    "invalid; correct the existing errors to complete validation")
_UNSET = object()  # no old value to compare with


def available() -> bool:
    """Whether cel-python can be imported (else rules are not evaluated)."""
    return _HAVE_CELPY


@dataclass(frozen=True)
class Skipped:
    """A rule this server will not evaluate, and why."""

    where: str  # in the CRD: spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule
    rule: str
    why: str


@dataclass(frozen=True)
class Found:
    causes: list[Cause]
    warnings: list[str]


@dataclass(frozen=True)
class _Rule:
    source: dict[str, Any]
    program: celpy.Runner
    message: celpy.Runner | None  # the compiled messageExpression
    uses_old_self: bool
    field_path: str  # what `fieldPath` adds to the node's path ("" or ".minReplicas")

    def default_message(self) -> str:
        message = str(self.source.get("message") or "").strip()
        return message or f"failed rule: {self.text()}"

    def text(self) -> str:
        """How errors name the rule: its message when it has one (ruleErrorString)."""
        return str(self.source.get("message") or "").strip() or str(self.source.get("rule") or "").strip()


@dataclass
class _Node:
    """The rules at one schema node, and the nodes below it that hold rules."""

    type: str
    rules: list[_Rule] = field(default_factory=list)
    properties: dict[str, "_Node"] = field(default_factory=dict)
    items: "_Node | None" = None
    additional: "_Node | None" = None
    list_keys: tuple[str, ...] | None = None  # an `x-kubernetes-list-type: map` list's keys

    def empty(self) -> bool:
        return not (self.rules or self.properties or self.items or self.additional)


class Rules:
    """Every rule of one CRD version's schema, compiled; `check` runs them on an object."""

    def __init__(self, openapi: dict[str, Any], where: str = "openAPIV3Schema"):
        self.skipped: list[Skipped] = []
        limit = sys.getrecursionlimit()
        self._environment = celpy.Environment()
        sys.setrecursionlimit(max(limit, sys.getrecursionlimit()))  # cel-python sets its own: never lower one already raised
        self._root = self._compile(openapi, where)

    def __bool__(self) -> bool:
        return self._root is not None

    def check(self, obj: dict[str, Any], old: dict[str, Any] | None = None) -> Found:
        """The causes (and ratcheted warnings) of every rule `obj` breaks, as an update of `old` when given."""
        found = Found([], [])
        if self._root is not None:
            self._walk(self._root, _root_view(obj), _root_view(old) if old is not None else _UNSET, "", False, found)
        return found

    # ------------------------------------------------------------------ compiling

    def _compile(self, schema: Any, where: str) -> _Node | None:
        if not isinstance(schema, dict):
            return None
        node = _Node(str(schema.get("type") or ""))
        for index, source in enumerate(schema.get(VALIDATIONS) or []):
            rule = self._rule(source, f"{where}.{VALIDATIONS}[{index}]")
            if rule is not None:
                node.rules.append(rule)
        for name, sub in (schema.get("properties") or {}).items():
            child = self._compile(sub, f"{where}.properties[{name}]")
            if child is not None:
                node.properties[name] = child
        node.items = self._compile(schema.get("items"), f"{where}.items")
        node.additional = self._compile(schema.get("additionalProperties"), f"{where}.additionalProperties")
        if schema.get("x-kubernetes-list-type") == "map":
            node.list_keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())
        return None if node.empty() else node

    def _rule(self, source: Any, where: str) -> _Rule | None:
        text = str(source.get("rule") or "") if isinstance(source, dict) else ""
        why = self._refusal(source, text)
        tree: celpy.Expression | None = None
        if why is None:
            tree, why = self._parse(text)
        if why is not None:
            self.skipped.append(Skipped(f"{where}.rule", text, why))
            return None
        assert tree is not None  # _parse gives a tree whenever it gives no reason
        message = None
        if source.get("messageExpression"):
            expression = str(source["messageExpression"])
            message_tree, why = self._parse(expression)
            if message_tree is not None:  # _parse gives a tree exactly when it gives no reason
                message = self._environment.program(message_tree)
            else:
                self.skipped.append(Skipped(f"{where}.messageExpression", expression, f"{why}; the message is used instead"))
        program = self._environment.program(tree)
        return _Rule(source, program, message, _uses_old_self(tree), _field_path(str(source.get("fieldPath") or "")))

    @staticmethod
    def _refusal(source: Any, text: str) -> str | None:
        if not isinstance(source, dict) or not text.strip():
            return "a rule must be a non-empty string"
        if source.get("optionalOldSelf"):
            return "optionalOldSelf needs CEL optionals, which cel-python lacks"
        if source.get("reason") not in (None, *REASONS):
            return f"unsupported reason {source.get('reason')!r}"
        return None

    def _parse(self, text: str) -> tuple[celpy.Expression | None, str | None]:
        """The parsed expression, or why cel-python cannot run it."""
        try:
            tree = self._environment.compile(text)
        except Exception as exc:  # CELParseError, and lark's own errors on odd input
            return None, f"cel-python cannot parse it: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        unknown = sorted(_functions(tree) - set(base_functions) - MACROS)
        if unknown:
            return None, f"it calls functions cel-python lacks: {', '.join(unknown)}"
        return tree, None

    # ------------------------------------------------------------------ evaluating

    def _walk(self, node: _Node, value: Any, old: Any, path: str, unchanged: bool, found: Found) -> None:
        """Check `value` at `node`; `old` is its correlated old value (or _UNSET); `unchanged`: the
        nearest correlated value at or above it equals its old value (errors are ratcheted)."""
        if value is None:
            return  # only non-null values are checked
        if old is not _UNSET:
            unchanged = _equal(value, old)
        for rule in node.rules:
            if rule.uses_old_self and (old is _UNSET or old is None):
                continue  # a transition rule needs an old value to compare with
            cause = self._evaluate(rule, node, value, old, path)
            if cause is None:
                continue
            if unchanged and not rule.uses_old_self:
                found.warnings.append(str(cause))
            else:
                found.causes.append(cause)
        if isinstance(value, dict):
            old_map = old if isinstance(old, dict) else {}
            for key, item in value.items():
                child = node.properties.get(key)
                where = f"{path}.{key}" if child is not None else f"{path}[{key}]"
                child = child if child is not None else node.additional
                if child is not None:
                    self._walk(child, item, old_map.get(key, _UNSET), where.lstrip("."), unchanged, found)
        elif isinstance(value, list) and node.items is not None:
            olds = _by_keys(old, node.list_keys) if node.list_keys and isinstance(old, list) else {}
            for index, item in enumerate(value):
                key = _key_of(item, node.list_keys) if node.list_keys else None
                self._walk(node.items, item, olds.get(key, _UNSET) if key is not None else _UNSET, f"{path}[{index}]", unchanged, found)

    def _evaluate(self, rule: _Rule, node: _Node, value: Any, old: Any, path: str) -> Cause | None:
        shown = json.dumps(node.type)
        try:
            activation = {"self": celpy.json_to_cel(value)}
            if rule.uses_old_self:
                activation["oldSelf"] = celpy.json_to_cel(old)
        except ValueError:  # an integer beyond 64 bits: CEL's int cannot hold it (a real server reads it as a float)
            return Cause(path, "FieldValueInvalid", f"Invalid value: {shown}: holds an integer beyond the 64-bit range CEL rules evaluate")
        try:
            result = rule.program.evaluate(activation)
        except Exception as exc:  # CELEvalError mostly; cel-python's own failures count as the same
            return Cause(path, "FieldValueInvalid", f"Invalid value: {shown}: {_eval_error(exc, rule)}")
        if isinstance(result, CELEvalError):
            return Cause(path, "FieldValueInvalid", f"Invalid value: {shown}: {_eval_error(result, rule)}")
        if isinstance(result, celtypes.BoolType) and bool(result):
            return None
        where = f"{path}{rule.field_path}".lstrip(".")
        detail = self._message(rule, activation)
        reason = rule.source.get("reason") or "FieldValueInvalid"
        if reason == "FieldValueForbidden":
            return Cause(where, reason, f"Forbidden: {detail}")
        if reason == "FieldValueRequired":
            return Cause(where, reason, f"Required value: {detail}")
        if reason == "FieldValueDuplicate":
            return Cause(where, reason, f"Duplicate value: {shown}")
        return Cause(where, "FieldValueInvalid", f"Invalid value: {shown}: {detail}")

    @staticmethod
    def _message(rule: _Rule, activation: dict[str, Any]) -> str:
        if rule.message is not None:
            try:
                text = rule.message.evaluate(activation)
            except Exception:  # a message that cannot be made falls back to the rule's message
                text = None
            if isinstance(text, str) and text.strip() and "\n" not in text.strip() and len(text.strip().encode()) <= MAX_MESSAGE:
                return text.strip()
        return rule.default_message()


def compile_rules(openapi: dict[str, Any], where: str = "openAPIV3Schema") -> Rules | None:
    """The rules of a schema, compiled; None when it has none or cel-python is missing."""
    if not _HAVE_CELPY:
        return None
    rules = Rules(openapi, where)
    return rules if rules or rules.skipped else None


def _root_view(obj: dict[str, Any]) -> dict[str, Any]:
    """What `self` is at a resource's root: its metadata cut down to name and generateName."""
    meta = obj.get("metadata") or {}
    return {**obj, "metadata": {k: meta[k] for k in ("name", "generateName") if k in meta}}


def _equal(a: Any, b: Any) -> bool:
    """JSON equality (Python's would take True for 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _uses_old_self(tree: celpy.Expression) -> bool:
    return any(t.data == "ident" and t.children and t.children[0] == "oldSelf" for t in tree.iter_subtrees())


def _functions(tree: celpy.Expression) -> set[str]:
    """Every function and method a parsed rule calls."""
    names: set[str] = set()
    for sub in tree.iter_subtrees():
        if sub.data == "member_dot_arg" and len(sub.children) > 1:
            names.add(str(sub.children[1]))
        elif sub.data == "ident_arg" and sub.children:
            names.add(str(sub.children[0]))
    return names


def _field_path(path: str) -> str:
    """A rule's `fieldPath` (`.a.b`, `['x.y']`) as what it adds to a field path."""
    out, rest = "", path.strip()
    while rest:
        if rest.startswith("['") and "']" in rest:
            key, rest = rest[2:].split("']", 1)
            out += f"[{key}]"
        elif rest.startswith("."):
            name = rest[1:].split(".", 1)[0].split("[", 1)[0]
            out += f".{name}"
            rest = rest[1 + len(name):]
        else:
            return ""  # not a path this server can read: the node's own path
    return out


def _key_of(item: Any, keys: tuple[str, ...]) -> tuple[str, ...] | None:
    return tuple(json.dumps(item.get(k), sort_keys=True) for k in keys) if isinstance(item, dict) else None


def _by_keys(items: list[Any], keys: tuple[str, ...] | None) -> dict[tuple[str, ...], Any]:
    if not keys:
        return {}
    return {key: item for item in items if (key := _key_of(item, keys)) is not None}


def _eval_error(error: Any, rule: _Rule) -> str:
    """A runtime error as the real server words it (`no such key: x evaluating rule: ...`)."""
    text = str(error.args[0]) if error.args else str(error)
    if text.startswith("no such member in mapping: "):
        return f"no such key: {text.split(': ', 1)[1].strip(chr(39))} evaluating rule: {rule.text()}"
    if "no matching overload" in text or "no such overload" in text:
        return f"'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {rule.text()}"
    if "divide by zero" in text:
        return f"division by zero evaluating rule: {rule.text()}"
    return f"{text} evaluating rule: {rule.text()}"


def match_conditions(conditions: Sequence[tuple[str, str]], variables: dict[str, Any]) -> tuple[bool, str | None]:
    """A webhook's `matchConditions` on one request (`object`, `oldObject`, `request`), in
    Kubernetes' order: any that is false skips the webhook (False, None), whatever the others'
    errors; else all true calls it (True, None); else the first that cannot be evaluated and
    why (`name: reason`), for the failurePolicy to decide. They are compiled on each call:
    only writes a webhook's rules already match get here. Without cel-python, all hold (the
    webhook is called, as before conditions were evaluated)."""
    if not _HAVE_CELPY or not conditions:
        return True, None
    environment = celpy.Environment()
    try:
        activation = {name: celpy.json_to_cel(value) for name, value in variables.items()}
    except ValueError as exc:
        return False, f"{conditions[0][0]}: {exc}"
    errors: list[str] = []
    for name, expression in conditions:
        try:
            result = environment.program(environment.compile(expression)).evaluate(activation)
        except Exception as exc:  # a parse error, CELEvalError, cel-python's own failures
            errors.append(f"{name}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            continue
        if isinstance(result, CELEvalError):
            errors.append(f"{name}: {result.args[0] if result.args else 'no value'}")
        elif not isinstance(result, celtypes.BoolType):
            errors.append(f"{name}: does not evaluate to a bool")
        elif not bool(result):
            return False, None  # one false condition skips the webhook, even beside an error
    return (False, errors[0]) if errors else (True, None)
