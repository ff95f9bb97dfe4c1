"""What the server does to an object before it is stored, and around its removal, per kind.

- Every kind: names are checked (DNS subdomains; namespaces DNS labels), `generateName`
  is honoured, and a namespaced object in a namespace that does not exist creates it
  (lenient, like the NamespaceAutoProvision admission plugin).
- Custom resources: status is dropped on create when a status subresource exists; fields
  the schema does not declare are pruned (per `fieldValidation`: Strict refuses them with
  400, Warn — the default — answers a warning, Ignore is silent); defaults are filled in;
  the result is validated (422 naming each field), then checked with the CRD's CEL rules
  (`cel.py`; on update against the old object), unless the schema found a problem that
  keeps the real server from running them.
- The Workload API's kinds (`tandem apiserver --workload-api`) are checked against
  Kubernetes' own schema of them (`workload_api.py`): pruned or refused as custom
  resources are, status dropped on create.
- Pods are checked against Kubernetes' PodSpec schema on create (`pod_checks.py`: a bad
  enum or type is a 422 naming the field; an unknown field is pruned with a warning, or
  refused under `fieldValidation=Strict`; those loaded from cluster files are not). Pods
  start `Pending` (those loaded from cluster files keep the status written) and, as
  the DefaultTolerationSeconds plugin does, tolerate not-ready and unreachable nodes for
  `default_toleration_seconds` (300) unless they say otherwise (`evictions.py`); Services
  get a cluster IP (127.30.x.y: on this machine) unless headless; Namespaces are `Active`.
- CustomResourceDefinitions are checked, and once stored their resources are served (a
  CEL rule cel-python cannot run is a warning, not a refusal); deleting one deletes its
  objects. Deleting a Namespace deletes what it holds.
- ValidatingWebhookConfigurations are checked and defaulted (`webhooks.py`).
Built-in kinds are otherwise stored as sent. Validating webhooks are called after all of
this, without the lock (`verbs.py`, `review.py`).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from tandem.apiserver import cel, crds, webhooks, workload_api
from tandem.apiserver.evictions import with_default_tolerations
from tandem.apiserver.error_status import InvalidObject
from tandem.apiserver.kinds import Resource
from tandem.apiserver.pod_checks import check_pod
from tandem.apiserver.schema import Cause
from tandem.apiserver.server_state import State
from tandem.cluster.kind_keys import group_of
from tandem.errors import BadRequest, NotFound

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation", "managedFields", "selfLink")
FIELD_VALIDATION = ("Ignore", "Warn", "Strict")
NAMESPACE_KIND = "Namespace"
POD_KIND = "Pod"
CRD_KIND = "CustomResourceDefinition"


def prepare_create(state: State, resource: Resource, obj: dict[str, Any], params: dict[str, str], *, keep_status: bool = False) -> list[str]:
    """Make `obj` what is stored (in place); returns warnings for the client."""
    meta = obj["metadata"]
    for field in SERVER_FIELDS:
        meta.pop(field, None)
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = _unused_name(state, resource, meta.get("namespace"), meta["generateName"])
    check_name(resource, meta.get("name") or "")
    if resource.namespaced:
        check_namespace(meta["namespace"])
    warnings: list[str] = []
    if resource.kind == POD_KIND and not resource.custom and not keep_status:
        warnings = check_pod(resource, obj, _field_validation(params))
    if resource.custom:
        if resource.status and not keep_status:  # a cluster file's status is kept, as a snapshot of a running cluster has it
            obj.pop("status", None)
        warnings = check_custom(resource, obj, params)
    elif resource.definition:
        if resource.status:
            obj.pop("status", None)
        warnings = workload_api.check(resource, obj, _field_validation(params))
    elif resource.kind == POD_KIND:
        spec = obj.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("tolerations") or [], list):
            spec["tolerations"] = with_default_tolerations(spec.get("tolerations") or [], state.default_toleration_seconds)
        if not (keep_status and obj.get("status")):
            obj["status"] = {"phase": "Pending"}
    elif resource.kind == "Service":
        _allocate_cluster_ip(state, obj)
    elif resource.kind == NAMESPACE_KIND:
        obj["status"] = {"phase": "Active"}
    elif resource.kind == CRD_KIND:
        _check_crd(state, resource, obj, None)
    elif _is_webhook_configuration(resource):
        _check_webhooks(resource, obj)
    return warnings


def prepare_update(state: State, resource: Resource, new: dict[str, Any], current: dict[str, Any], params: dict[str, str]) -> list[str]:
    """Check an object about to replace `current` (status already settled by the caller)."""
    if resource.custom:
        return check_custom(resource, new, params, current)
    if resource.definition:
        return workload_api.check(resource, new, _field_validation(params))
    if resource.kind == "Service":
        spec, old = new.setdefault("spec", {}), current.get("spec") or {}
        for field in ("clusterIP", "clusterIPs"):
            if field not in spec and field in old:
                spec[field] = copy.deepcopy(old[field])
    elif resource.kind == CRD_KIND:
        _check_crd(state, resource, new, current)
    elif _is_webhook_configuration(resource):
        _check_webhooks(resource, new)
    return []


def ensure_namespace(state: State, namespace: str) -> None:
    """Create `namespace` if it does not exist (with the lock held)."""
    try:
        state.store.get(NAMESPACE_KIND, None, namespace)
    except NotFound:
        state.store.create({"apiVersion": "v1", "kind": NAMESPACE_KIND, "metadata": {"name": namespace}, "status": {"phase": "Active"}})


def after_write(state: State, resource: Resource, stored: dict[str, Any]) -> dict[str, Any]:
    """What follows a create or update: an object whose owner is gone is collected (the
    garbage collector's work, done at once); a CRD's resources are served, and it says so
    in its status."""
    if _owner_gone(state, stored):
        meta = stored["metadata"]
        _delete_quietly(state, stored["kind"], meta.get("namespace"), meta["name"])
        return stored
    if resource.kind != CRD_KIND or resource.custom:
        return stored
    state.registry.replace_crd(stored["metadata"]["name"], crds.resources_of(stored))
    status = crds.accepted_status(stored, state.clock())
    if stored.get("status") == status:
        return stored
    return state.store.update_status({**stored, "status": status})


def unchecked_rules(state: State, resource: Resource, stored: dict[str, Any]) -> list[str]:
    """Warnings for a CRD's CEL rules this server cannot run (a real server would refuse the CRD)."""
    if resource.kind != CRD_KIND or resource.custom:
        return []
    name = stored["metadata"]["name"]
    served = [r for r in state.registry.all() if r.crd == name and r.rules is not None]
    return [f"{s.where}: not checked by this server ({s.why}); a Kubernetes API server would refuse this CustomResourceDefinition"
            for r in served for s in r.rules.skipped]


def before_delete(state: State, resource: Resource, obj: dict[str, Any]) -> None:
    """A Namespace takes what it holds with it; a CRD takes its objects and stops being served."""
    if resource.custom:
        return
    name = obj["metadata"]["name"]
    if resource.kind == NAMESPACE_KIND:
        for served in {r.key: r for r in state.registry.all() if r.namespaced and r.storage}.values():
            for item in state.store.list(served.key, name):
                _delete_quietly(state, served.key, name, item["metadata"]["name"])
    elif resource.kind == CRD_KIND:
        custom = next((r for r in state.registry.all() if r.crd == name and r.storage), None)
        if custom is not None:
            for item in state.store.list(custom.key):
                _delete_quietly(state, custom.key, item["metadata"].get("namespace"), item["metadata"]["name"])
            state.registry.replace_crd(name, [])


def check_custom(resource: Resource, obj: dict[str, Any], params: dict[str, str], old: dict[str, Any] | None = None) -> list[str]:
    """Prune, default and validate a custom object against its CRD's schema (in place), then
    run its CEL rules (as an update of `old`, when given)."""
    if resource.schema is None:
        return []
    mode = _field_validation(params)
    unknown = resource.schema.prune(obj)
    if unknown and mode == "Strict":
        fields = ", ".join(f'unknown field "{path}"' for path in unknown)
        raise BadRequest(f'{resource.kind} in version "{resource.version}" cannot be handled as a {resource.kind}: strict decoding error: {fields}')
    resource.schema.default(obj)
    causes = resource.schema.problems(obj, old)
    warnings = [f'unknown field "{path}"' for path in unknown] if mode == "Warn" else []
    if resource.rules is not None:
        if any(c.reason in cel.BLOCKING for c in causes):
            causes.append(cel.NOT_CHECKED)
        else:
            found = resource.rules.check(obj, old)
            causes += found.causes
            warnings += found.warnings
    if causes:
        raise InvalidObject(resource, obj["metadata"].get("name", ""), causes)
    return warnings


def _field_validation(params: dict[str, str]) -> str:
    mode = params.get("fieldValidation") or "Warn"
    if mode not in FIELD_VALIDATION:
        raise BadRequest(f"fieldValidation: unsupported value {mode!r}: supported values: Ignore, Warn, Strict")
    return mode


def check_name(resource: Resource, name: str) -> None:
    if not name:
        raise InvalidObject(resource, name, [Cause("metadata.name", "FieldValueRequired", "Required value: name or generateName is required")])
    label = resource.kind == NAMESPACE_KIND
    pattern, limit = (_LABEL, 63) if label else (_SUBDOMAIN, 253)
    if len(name) > limit or not pattern.match(name):
        what, chars = ("RFC 1123 label", "'-'") if label else ("RFC 1123 subdomain", "'-' or '.'")
        message = (f'Invalid value: "{name}": a lowercase {what} must consist of lower case alphanumeric characters, {chars}, '
                   f"and must start and end with an alphanumeric character (at most {limit})")
        raise InvalidObject(resource, name, [Cause("metadata.name", "FieldValueInvalid", message)])


def check_namespace(namespace: str) -> None:
    if len(namespace) > 63 or not _LABEL.match(namespace):
        raise BadRequest(f'namespace "{namespace}" is not a valid RFC 1123 label')


def _check_crd(state: State, resource: Resource, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    causes = crds.problems(obj, state.registry, old)
    if causes:
        raise InvalidObject(resource, obj["metadata"].get("name", ""), causes)


def _is_webhook_configuration(resource: Resource) -> bool:
    return resource.group == webhooks.GROUP and resource.kind == webhooks.CONFIG_KIND


def _check_webhooks(resource: Resource, obj: dict[str, Any]) -> None:
    webhooks.default(obj)
    causes = webhooks.problems(obj)
    if causes:
        raise InvalidObject(resource, obj["metadata"].get("name", ""), causes)


def _unused_name(state: State, resource: Resource, namespace: str | None, prefix: str) -> str:
    while True:
        name = state.generated_name(prefix)
        try:
            state.store.get(resource.key, namespace, name)
        except NotFound:
            return name


def _allocate_cluster_ip(state: State, obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
    if spec["type"] == "ExternalName" or spec.get("clusterIP"):
        if spec.get("clusterIP") and "clusterIPs" not in spec:
            spec["clusterIPs"] = [spec["clusterIP"]]
        return
    n = state.next("clusterIP")
    ip = f"127.30.{n // 254 % 256}.{n % 254 + 1}"
    spec["clusterIP"], spec["clusterIPs"] = ip, [ip]


def _owner_gone(state: State, obj: dict[str, Any]) -> bool:
    """An owner reference names an object that no longer exists (by uid): a write that raced
    its owner's deletion. Such a dependent is collected, as a cluster's garbage collector
    collects it; an owner of a kind this server does not serve is taken to exist."""
    meta = obj["metadata"]
    for owner in meta.get("ownerReferences") or []:
        kind, name, uid = owner.get("kind"), owner.get("name"), owner.get("uid")
        served = state.registry.for_kind(kind, group_of(str(owner.get("apiVersion") or ""))) if kind else None
        if not name or not uid or served is None:
            continue
        namespace = None if state.store.is_cluster_scoped(served.key) else meta.get("namespace")
        try:
            if state.store.get(served.key, namespace, name)["metadata"].get("uid") == uid:
                continue
        except NotFound:
            pass
        return True
    return False


def _delete_quietly(state: State, kind: str, namespace: str | None, name: str) -> None:
    try:
        state.store.delete(kind, namespace, name)
    except NotFound:
        pass  # taken already by a cascade
