"""ValidatingWebhookConfigurations: checked and defaulted when written, and read on every
write to decide which webhooks it goes to, as kube-apiserver decides it.

Written: the fields the real server requires are required (a fully qualified webhook name,
`clientConfig` with exactly one of `url` (https, no query or fragment) and `service`,
`sideEffects` None or NoneOnDryRun, `admissionReviewVersions`, each rule's operations,
groups, versions and resources), with the same defaults (failurePolicy Fail, matchPolicy
Equivalent, empty selectors, timeoutSeconds 10, scope `*`, service port 443); a timeout
outside 1..30 s is refused.

Matched: a write goes to a webhook when one of its rules names its operation (or `*`),
its group, version and resource (`*`, `pods/status`, `*/status`, `pods/*`, `*/*`) and fits
its scope, and the namespace's labels (the object's own for a Namespace) and the object's
labels (new or old) satisfy the selectors. With matchPolicy Equivalent a rule naming
another served version of the same resource matches too, and the webhook is sent the
object at that version. Writes of webhook configurations themselves are never sent to
webhooks, as the real server exempts them. `matchConditions` (CEL over `object`,
`oldObject` and `request`, the AdmissionRequest but its uid and objects) are evaluated on what the rules and selectors matched: one
that is false skips the webhook, all true call it, else one that cannot be evaluated
refuses the write (failurePolicy Fail) or skips the webhook (Ignore). Without
cel-python they are taken as holding.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tandem.apiserver.cel import match_conditions
from tandem.apiserver.error_status import StatusError
from tandem.apiserver.kinds import Resource, version_priority
from tandem.apiserver.schema import Cause
from tandem.apiserver.server_state import State
from tandem.cluster.selectors import Requirement
from tandem.errors import NotFound

GROUP = "admissionregistration.k8s.io"
CONFIG_KIND = "ValidatingWebhookConfiguration"
EXEMPT_KINDS = frozenset({"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"})
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT", "*")
SIDE_EFFECTS = ("None", "NoneOnDryRun")
FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Exact", "Equivalent")
SCOPES = ("*", "Cluster", "Namespaced")
REVIEW_VERSIONS = ("v1", "v1beta1")
DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S = 10, 30
SELECTOR_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}


@dataclass(frozen=True)
class Attributes:
    """A write as admission sees it (the real server's admission.Attributes)."""

    operation: str  # CREATE, UPDATE, DELETE, CONNECT
    resource: Resource  # the resource the request names
    subresource: str  # "" for the object itself
    kind: tuple[str, str, str]  # group, version, kind of `object` (autoscaling/v1 Scale for /scale)
    namespace: str  # "" when cluster-scoped
    name: str
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    dry_run: bool
    options: dict[str, Any]

    @property
    def labels(self) -> list[dict[str, str]]:
        """The labels of the new object and of the old one (an object selector may match either)."""
        return [dict((o.get("metadata") or {}).get("labels") or {}) for o in (self.object, self.old_object) if isinstance(o, dict)]


@dataclass(frozen=True)
class Hook:
    """One webhook of a configuration, defaults filled in."""

    name: str
    configuration: str
    client: dict[str, Any]  # clientConfig: url or service, caBundle
    rules: tuple[dict[str, Any], ...]
    failure_policy: str
    match_policy: str
    namespace_selector: dict[str, Any]
    object_selector: dict[str, Any]
    side_effects: str
    timeout_s: int
    review_versions: tuple[str, ...]
    match_conditions: tuple[tuple[str, str], ...] = ()  # (name, CEL expression)

    @property
    def fails_open(self) -> bool:
        return self.failure_policy == "Ignore"


@dataclass(frozen=True)
class Invocation:
    """A call to make: the hook, and the request as it sees it (another version, with Equivalent)."""

    hook: Hook
    uid: str
    resource: Resource
    kind: tuple[str, str, str]
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None


# ----------------------------------------------------------------------------- writing a configuration


def default(config: dict[str, Any]) -> None:
    """Fill in what the real server defaults (in place)."""
    for hook in config.get("webhooks") or []:
        if not isinstance(hook, dict):
            continue
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", DEFAULT_TIMEOUT_S)
        for rule in hook.get("rules") or []:
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")
        service = (hook.get("clientConfig") or {}).get("service")
        if isinstance(service, dict):
            service.setdefault("port", 443)


def problems(config: dict[str, Any]) -> list[Cause]:
    """What the real server refuses in a ValidatingWebhookConfiguration, with field paths."""
    causes: list[Cause] = []
    hooks = config.get("webhooks") or []
    if not isinstance(hooks, list):
        return [Cause("webhooks", "FieldValueTypeInvalid", "Invalid value: must be a list")]
    seen: set[str] = set()
    for index, hook in enumerate(hooks):
        where = f"webhooks[{index}]"
        if not isinstance(hook, dict):
            causes.append(Cause(where, "FieldValueTypeInvalid", "Invalid value: must be an object"))
            continue
        name = hook.get("name") or ""
        if not name:
            causes.append(Cause(f"{where}.name", "FieldValueRequired", "Required value"))
        elif name in seen:
            causes.append(Cause(f"{where}.name", "FieldValueDuplicate", f"Duplicate value: {json.dumps(name)}"))
        elif len(str(name).split(".")) < 3:
            causes.append(Cause(f"{where}.name", "FieldValueInvalid",
                                f"Invalid value: {json.dumps(name)}: should be a domain with at least three segments separated by dots"))
        seen.add(str(name))
        causes += _client_problems(hook.get("clientConfig"), f"{where}.clientConfig")
        versions = hook.get("admissionReviewVersions")
        if not isinstance(versions, list) or not versions:
            causes.append(Cause(f"{where}.admissionReviewVersions", "FieldValueRequired", "Required value: must specify one of v1, v1beta1"))
        elif not any(v in REVIEW_VERSIONS for v in versions):
            causes.append(Cause(f"{where}.admissionReviewVersions", "FieldValueInvalid",
                                f"Invalid value: {json.dumps(versions)}: must include at least one of v1, v1beta1"))
        causes += _choice(hook, "sideEffects", SIDE_EFFECTS, where, required=True)
        causes += _choice(hook, "failurePolicy", FAILURE_POLICIES, where)
        causes += _choice(hook, "matchPolicy", MATCH_POLICIES, where)
        timeout = hook.get("timeoutSeconds", DEFAULT_TIMEOUT_S)
        if not isinstance(timeout, int) or isinstance(timeout, bool) or not 1 <= timeout <= MAX_TIMEOUT_S:
            causes.append(Cause(f"{where}.timeoutSeconds", "FieldValueInvalid",
                                f"Invalid value: {json.dumps(timeout)}: the timeout value must be between 1 and {MAX_TIMEOUT_S} seconds"))
        for field in ("namespaceSelector", "objectSelector"):
            causes += _selector_problems(hook.get(field), f"{where}.{field}")
        rules = hook.get("rules") or []
        for r, rule in enumerate(rules if isinstance(rules, list) else []):
            causes += _rule_problems(rule, f"{where}.rules[{r}]")
    return causes


def _client_problems(client: Any, where: str) -> list[Cause]:
    if not isinstance(client, dict) or bool(client.get("url")) == bool(client.get("service")):
        return [Cause(where, "FieldValueRequired", "Required value: exactly one of url or service is required")]
    causes = []
    url = client.get("url")
    if url:
        parts = urlsplit(str(url))
        if parts.scheme != "https":
            causes.append(Cause(f"{where}.url", "FieldValueInvalid", f"Invalid value: {json.dumps(url)}: 'https' is the only allowed URL scheme"))
        elif not parts.hostname:
            causes.append(Cause(f"{where}.url", "FieldValueInvalid", f"Invalid value: {json.dumps(url)}: host must be specified"))
        elif parts.query or parts.fragment:
            what = "query parameters" if parts.query else "fragments"
            causes.append(Cause(f"{where}.url", "FieldValueInvalid", f"Invalid value: {json.dumps(url)}: {what} are not permitted"))
    bundle = client.get("caBundle")
    if bundle is not None and ca_bundle(client) is None:
        causes.append(Cause(f"{where}.caBundle", "FieldValueInvalid", "Invalid value: illegal base64 data"))
    return causes


def _rule_problems(rule: Any, where: str) -> list[Cause]:
    if not isinstance(rule, dict):
        return [Cause(where, "FieldValueTypeInvalid", "Invalid value: must be an object")]
    causes = []
    for field in ("operations", "apiGroups", "apiVersions", "resources"):
        if not isinstance(rule.get(field), list) or not rule[field]:
            causes.append(Cause(f"{where}.{field}", "FieldValueRequired", "Required value"))
    for i, operation in enumerate(rule.get("operations") or []):
        if operation not in OPERATIONS:
            causes.append(Cause(f"{where}.operations[{i}]", "FieldValueNotSupported", f"Unsupported value: {json.dumps(operation)}: supported values: "
                                + ", ".join(f'"{o}"' for o in OPERATIONS)))
    causes += _choice(rule, "scope", SCOPES, where)
    return causes


def _selector_problems(selector: Any, where: str) -> list[Cause]:
    if selector is None:
        return []
    if not isinstance(selector, dict):
        return [Cause(where, "FieldValueTypeInvalid", "Invalid value: must be a label selector")]
    causes = []
    for i, expression in enumerate(selector.get("matchExpressions") or []):
        operator = expression.get("operator") if isinstance(expression, dict) else None
        if operator not in SELECTOR_OPERATORS:
            causes.append(Cause(f"{where}.matchExpressions[{i}].operator", "FieldValueNotSupported",
                                f"Unsupported value: {json.dumps(operator)}: supported values: " + ", ".join(f'"{o}"' for o in SELECTOR_OPERATORS)))
    return causes


def _choice(holder: dict[str, Any], field: str, allowed: tuple[str, ...], where: str, *, required: bool = False) -> list[Cause]:
    value = holder.get(field)
    if value is None:
        return [Cause(f"{where}.{field}", "FieldValueRequired", f"Required value: must specify one of {', '.join(allowed)}")] if required else []
    if value not in allowed:
        return [Cause(f"{where}.{field}", "FieldValueNotSupported", f"Unsupported value: {json.dumps(value)}: supported values: "
                      + ", ".join(f'"{a}"' for a in allowed))]
    return []


def ca_bundle(client: dict[str, Any]) -> bytes | None:
    """The PEM a `caBundle` holds (b"" when there is none); None when it is not base64."""
    try:
        return base64.b64decode(str(client.get("caBundle") or ""), validate=True)
    except (binascii.Error, ValueError):
        return None


# ----------------------------------------------------------------------------- matching a write


def hooks(config: dict[str, Any]) -> list[Hook]:
    """The webhooks of a stored configuration, defaults filled in."""
    config = copy.deepcopy(config)
    default(config)
    out = []
    for hook in config.get("webhooks") or []:
        out.append(Hook(
            name=str(hook.get("name") or ""),
            configuration=config["metadata"]["name"],
            client=dict(hook.get("clientConfig") or {}),
            rules=tuple(r for r in hook.get("rules") or [] if isinstance(r, dict)),
            failure_policy=hook["failurePolicy"],
            match_policy=hook["matchPolicy"],
            namespace_selector=hook["namespaceSelector"] or {},
            object_selector=hook["objectSelector"] or {},
            side_effects=str(hook.get("sideEffects") or ""),
            timeout_s=min(max(int(hook["timeoutSeconds"]), 1), MAX_TIMEOUT_S),
            review_versions=tuple(hook.get("admissionReviewVersions") or ()),
            match_conditions=tuple((str(c.get("name") or ""), str(c.get("expression") or ""))
                                   for c in hook.get("matchConditions") or [] if isinstance(c, dict)),
        ))
    return out


def invocations(state: State, attributes: Attributes) -> list[Invocation]:
    """Every webhook `attributes` goes to, configurations by name and webhooks in order; the lock must be held."""
    if attributes.resource.group == GROUP and attributes.resource.kind in EXEMPT_KINDS:
        return []
    configurations = sorted(state.store.list(CONFIG_KIND), key=lambda c: c["metadata"]["name"])
    out = []
    for config in configurations:
        for hook in hooks(config):
            resource = _matching_resource(state, hook, attributes)
            if resource is None or not _selected(state, hook, attributes):
                continue
            invocation = _invocation(state, hook, attributes, resource)
            if _conditions_hold(invocation, attributes):
                out.append(invocation)
    return out


USER = {"username": "tandem", "groups": ["system:masters", "system:authenticated"]}  # everyone is this one local user


def admission_request(invocation: Invocation, attributes: Attributes) -> dict[str, Any]:
    """The AdmissionRequest's fields but its uid and objects: what a webhook is sent around
    them, and matchConditions' `request` (as Kubernetes' CreateAdmissionRequest: empty
    subresource and namespace left out, as its JSON omits them)."""
    resource, asked = invocation.resource, attributes.resource
    namespace = attributes.namespace or (attributes.name if asked.group == "" and asked.plural == "namespaces" else "")
    request: dict[str, Any] = {
        "kind": _kind(invocation.kind),
        "resource": {"group": resource.group, "version": resource.version, "resource": resource.plural},
        "requestKind": _kind(attributes.kind),
        "requestResource": {"group": asked.group, "version": asked.version, "resource": asked.plural},
        "name": attributes.name,
        "operation": attributes.operation,
        "userInfo": USER,
        "dryRun": attributes.dry_run,
        "options": attributes.options,
    }
    if attributes.subresource:
        request["subResource"] = request["requestSubResource"] = attributes.subresource
    if namespace:
        request["namespace"] = namespace
    return request


def _kind(kind: tuple[str, str, str]) -> dict[str, str]:
    return {"group": kind[0], "version": kind[1], "kind": kind[2]}


def _conditions_hold(invocation: Invocation, attributes: Attributes) -> bool:
    """Whether the webhook's matchConditions all hold for this request (the object as the
    webhook would see it); with none false, one that cannot be evaluated refuses the write,
    or with failurePolicy Ignore skips the webhook."""
    hook = invocation.hook
    if not hook.match_conditions:
        return True
    request = admission_request(invocation, attributes)
    holds, error = match_conditions(hook.match_conditions, {"object": invocation.object, "oldObject": invocation.old_object, "request": request})
    if error is None:
        return holds
    if hook.fails_open:
        return False
    failure = f'failed calling webhook "{hook.name}": failed to evaluate match condition {error}'
    raise StatusError(500, "InternalError", f"Internal error occurred: {failure}", {"causes": [{"message": failure}]})


def _matching_resource(state: State, hook: Hook, attributes: Attributes) -> Resource | None:
    """The resource (the request's, or with Equivalent another version of it) a rule of `hook` names."""
    if any(_rule_matches(rule, attributes, attributes.resource) for rule in hook.rules):
        return attributes.resource
    if hook.match_policy != "Equivalent":
        return None
    asked = attributes.resource
    others = [r for r in state.registry.all() if r.group == asked.group and r.plural == asked.plural and r.version != asked.version]
    for other in sorted(others, key=lambda r: version_priority(r.version)):
        if any(_rule_matches(rule, attributes, other) for rule in hook.rules):
            return other
    return None


def _rule_matches(rule: dict[str, Any], attributes: Attributes, resource: Resource) -> bool:
    operations = rule.get("operations") or []
    if "*" not in operations and attributes.operation not in operations:
        return False
    if not _named(rule.get("apiGroups"), resource.group) or not _named(rule.get("apiVersions"), resource.version):
        return False
    if not any(_resource_named(entry, resource.plural, attributes.subresource) for entry in rule.get("resources") or []):
        return False
    namespace_object = resource.group == "" and resource.plural == "namespaces"
    scope = rule.get("scope") or "*"
    if scope == "Namespaced":
        return not namespace_object and bool(attributes.namespace)
    if scope == "Cluster":
        return namespace_object or not attributes.namespace
    return True


def _named(items: Any, requested: str) -> bool:
    return any(item in ("*", requested) for item in items or [])


def _resource_named(entry: str, plural: str, subresource: str) -> bool:
    resource, _, sub = str(entry).partition("/")
    return resource in ("*", plural) and sub in ("*", subresource)


def _selected(state: State, hook: Hook, attributes: Attributes) -> bool:
    if hook.object_selector and not any(_selector_matches(hook.object_selector, labels) for labels in attributes.labels):
        return False
    if not hook.namespace_selector:
        return True
    resource = attributes.resource
    if resource.group == "" and resource.plural == "namespaces":
        labels = attributes.labels[0] if attributes.labels else {}
    elif not attributes.namespace:
        return True  # a cluster-scoped object is never exempted by a namespace selector
    else:
        try:
            namespace = state.store.get("Namespace", None, attributes.namespace)
        except NotFound:
            namespace = {}  # created with the object (NamespaceAutoProvision): no labels yet
        labels = dict((namespace.get("metadata") or {}).get("labels") or {})
    return _selector_matches(hook.namespace_selector, labels)


def _selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    requirements = [Requirement(str(k), "=", frozenset([str(v)])) for k, v in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or []:
        operator = SELECTOR_OPERATORS.get(expression.get("operator"), "")
        requirements.append(Requirement(str(expression.get("key")), operator, frozenset(str(v) for v in expression.get("values") or ())))
    return all(r.matches(labels) for r in requirements)


def _invocation(state: State, hook: Hook, attributes: Attributes, resource: Resource) -> Invocation:
    kind, obj, old = attributes.kind, attributes.object, attributes.old_object
    if resource is not attributes.resource and kind == (attributes.resource.group, attributes.resource.version, attributes.resource.kind):
        kind = (resource.group, resource.version, resource.kind)
        obj = {**obj, "apiVersion": resource.api_version} if obj is not None else None
        old = {**old, "apiVersion": resource.api_version} if old is not None else None
    digest = hashlib.sha256(f"admission\x00{state.next('admission')}".encode()).digest()
    return Invocation(hook, str(uuid.UUID(bytes=digest[:16], version=4)), resource, kind, obj, old)
