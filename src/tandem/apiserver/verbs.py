"""The REST verbs over the store: get, list, create, update, patch, delete, deletecollection,
and the status, scale and binding subresources. No HTTP here: a `Call` in, an `Answer` out.

Semantics are the store's (resourceVersion compare-and-swap, generation, status
subresource, finalizers, owner-reference cascades); around them, what the real server
adds: a patch or update carrying a stale `metadata.resourceVersion` is 409; one that
changes nothing is not written (no new resourceVersion); `dryRun=All` checks without
storing; a delete answers the object (built-ins) or a Success Status (custom resources).
Deletion is immediate (no grace period) and cascades at once, whatever the propagation
policy, unless a finalizer holds the object, or the object is a pod that runs an engine
stand-in (`state.graceful_pods`): that one is deleted gracefully, as a real server deletes a
running pod (deletionTimestamp and deletionGracePeriodSeconds set, status unchanged; the
kubelet removes it when its containers stopped; `gracePeriodSeconds: 0` removes it at once).

A write is prepared, admitted and committed (`write`): the object to store is made with the
state's lock held (names, defaults, schema, CEL rules), the validating webhooks it matches
are called with the lock released, and the write is made with the lock held again if the
object did not change meanwhile; if it did, the write is prepared again.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Callable

import yaml

from tandem.api.merge import merge_patch
from tandem.apiserver import admission, patches, review, tables, webhooks
from tandem.apiserver.kinds import Resource
from tandem.apiserver.routes import Route
from tandem.apiserver.schema import Cause
from tandem.apiserver.server_state import State
from tandem.apiserver.error_status import (
    Expired, InvalidObject, MethodNotAllowed, Refused, UnsupportedMediaType, already_exists, conflict, not_found, success,
)
from tandem.apiserver.webhooks import Attributes
from tandem.cluster.selectors import parse, parse_fields
from tandem.errors import AlreadyExists, BadRequest, Conflict, Invalid, NotFound

PROPAGATION = ("Background", "Foreground", "Orphan")
WRITE_ATTEMPTS = 5  # preparations of one write whose object keeps changing while its webhooks answer
SCALE_KIND = ("autoscaling", "v1", "Scale")
BINDING_KIND = ("", "v1", "Binding")


@dataclass
class Call:
    method: str
    route: Route
    params: dict[str, str] = field(default_factory=dict)
    body: Any = None
    content_type: str = "application/json"
    accept: str = "application/json"


@dataclass
class Answer:
    code: int
    body: Any
    warnings: list[str] = field(default_factory=list)


@dataclass
class Pending:
    """A write made ready with the lock held: what webhooks are shown, the warnings so far, and
    how to make it (`commit`, with the lock held again; raises Stale if the object changed)."""

    attributes: Attributes
    commit: Callable[[], Answer]
    warnings: list[str] = field(default_factory=list)


class Stale(Exception):
    """The object changed between preparing a write and committing it: prepare it again."""


def handle(state: State, call: Call) -> Answer:
    """Answer one call (not a watch); raises ApiError on failure (Refused: with warnings)."""
    route = call.route
    if route.subresource == "binding" and call.method != "POST":
        raise MethodNotAllowed(f"{call.method} is not supported on pods/binding")
    if call.method == "GET":
        with state.lock:
            if route.name is None:
                return _list(state, call)
            if route.subresource == "scale":
                return Answer(200, scale_of(route.resource, _get(state, route)))
            return Answer(200, _shown(state, call, _get(state, route)))
    if call.method == "POST" and route.subresource == "binding":
        return write(state, lambda: _bind(state, call))
    if call.method == "POST" and route.name is None:
        return write(state, lambda: prepare_create(state, route.resource, route.namespace, _object(call.body), call.params))
    if call.method == "PUT" and route.name is not None:
        return write(state, lambda: _put(state, call))
    if call.method == "PATCH" and route.name is not None:
        return write(state, lambda: _patch(state, call))
    if call.method == "DELETE":
        return _delete(state, call)
    raise MethodNotAllowed(f"{call.method} is not supported on this path")


def write(state: State, prepare: Callable[[], Pending]) -> Answer:
    """Prepare a write with the lock held, call the webhooks it matches with the lock released
    (a webhook may be slow, and may itself read this server), then commit it with the lock
    held again. An object changed in between is prepared again, as the real server's
    GuaranteedUpdate does: a request that named a resourceVersion now fails its
    precondition (409), one that did not is applied to the new object."""
    for _ in range(WRITE_ATTEMPTS):
        with state.lock:
            pending = prepare()
            calls = webhooks.invocations(state, pending.attributes)
            if not calls:
                return _committed(state, pending, [])
        try:
            warnings = review.admit(calls, pending.attributes)
        except Refused as refused:
            raise Refused(refused.error, pending.warnings + refused.warnings) from None
        with state.lock:
            try:
                return _committed(state, pending, warnings)
            except Stale:
                continue
    raise conflict(pending.attributes.resource, pending.attributes.name)


def _committed(state: State, pending: Pending, admitted: list[str]) -> Answer:
    try:
        answer = pending.commit()
    finally:
        state.changed()  # even a refused write may have done part (a namespace created, a cascade)
    answer.warnings = [*pending.warnings, *admitted, *answer.warnings]
    return answer


def _unchanged(state: State, resource: Resource, before: dict[str, Any]) -> None:
    """Stale when the object read as `before` has changed, or gone, since."""
    meta = before["metadata"]
    try:
        now = state.store.get(resource.key, meta.get("namespace"), meta["name"])
    except NotFound:
        raise Stale from None
    if now["metadata"].get("resourceVersion") != meta.get("resourceVersion"):
        raise Stale


# ----------------------------------------------------------------------------- reads


def _get(state: State, route: Route) -> dict[str, Any]:
    try:
        return state.store.get(route.resource.key, route.namespace, route.name or "")
    except NotFound:
        raise not_found(route.resource, route.name or "") from None


def _list(state: State, call: Call) -> Answer:
    r, params = call.route.resource, call.params
    token = params.get("continue")
    if token:
        page = state.pages.get(token)
        if page is None:
            raise Expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
        items, version = page
    else:
        # The stored objects themselves (a write replaces one, never changes it): what is
        # served is a shallow copy of each (`present`), so a list of 260,000 pods is not
        # deep-copied first.
        snapshot = state.store.snapshot()
        items = snapshot.list(r.key, call.route.namespace, params.get("labelSelector") or None, params.get("fieldSelector") or None)
        version = snapshot.resource_version
    meta: dict[str, Any] = {"resourceVersion": version}
    limit = int(params["limit"]) if (params.get("limit") or "").isdigit() else 0
    if limit and len(items) > limit:
        rest, items = items[limit:], items[:limit]
        next_token = base64.urlsafe_b64encode(json.dumps({"rv": version, "n": state.next("continue")}).encode()).decode()
        state.remember_page(next_token, rest, version)
        meta["continue"] = next_token
        meta["remainingItemCount"] = len(rest)
    shown = [present(r, item) for item in items]
    if tables.wants_table(call.accept):
        return Answer(200, tables.table(r, shown, state.clock(), params.get("includeObject") or "Metadata", meta))
    if not r.custom:  # typed lists carry no apiVersion/kind on their items, as the real server's
        for item in shown:
            item.pop("apiVersion", None)
            item.pop("kind", None)
    return Answer(200, {"apiVersion": r.api_version, "kind": f"{r.kind}List", "metadata": meta, "items": shown})


def present(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as served at the resource's version."""
    return {**obj, "apiVersion": resource.api_version, "kind": resource.kind}


def _shown(state: State, call: Call, obj: dict[str, Any]) -> Any:
    shown = present(call.route.resource, obj)
    if tables.wants_table(call.accept):
        meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
        return tables.table(call.route.resource, [shown], state.clock(), call.params.get("includeObject") or "Metadata", meta)
    return shown


# ----------------------------------------------------------------------------- writes


def create(
    state: State, resource: Resource, namespace: str | None, obj: dict[str, Any], params: dict[str, str], *, loading: bool = False
) -> Answer:
    """Create `obj` as `resource` at once, without webhooks (the lock must be held): how the
    server is seeded. `loading` (cluster files): a pod's status is kept as written, as a
    snapshot of a running cluster has it."""
    pending = prepare_create(state, resource, namespace, obj, params, loading=loading)
    answer = pending.commit()
    answer.warnings = [*pending.warnings, *answer.warnings]
    return answer


def prepare_create(
    state: State, resource: Resource, namespace: str | None, obj: dict[str, Any], params: dict[str, str], *, loading: bool = False
) -> Pending:
    """Make `obj` what a create of `resource` stores (the lock must be held)."""
    obj = copy.deepcopy(obj)
    _check_kind(resource, obj)
    obj["apiVersion"], obj["kind"] = _storage(state, resource).api_version, resource.kind
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise BadRequest("metadata must be an object")
    if resource.namespaced:
        if namespace and meta.get("namespace") and meta["namespace"] != namespace:
            raise BadRequest("the namespace of the provided object does not match the namespace sent on the request")
        meta["namespace"] = namespace or meta.get("namespace") or "default"
    else:
        meta.pop("namespace", None)
    warnings = admission.prepare_create(state, resource, obj, params, keep_status=loading)

    def commit() -> Answer:
        if _dry_run(params):
            return Answer(201, present(resource, obj))
        if resource.namespaced:
            admission.ensure_namespace(state, meta["namespace"])
        try:
            stored = state.store.create(copy.deepcopy(obj))
        except AlreadyExists:
            raise already_exists(resource, meta["name"]) from None
        except Invalid as exc:
            raise _invalid(resource, meta["name"], exc) from None
        stored = admission.after_write(state, resource, stored)
        return Answer(201, present(resource, stored), admission.unchecked_rules(state, resource, stored))

    attributes = _attributes("CREATE", resource, None, obj, None, params, "CreateOptions")
    return Pending(attributes, commit, warnings)


def _put(state: State, call: Call) -> Pending:
    route = call.route
    body = _object(call.body)
    if route.subresource == "scale":
        return _scale_update(state, call, body)
    _check_kind(route.resource, body)
    name = (body.get("metadata") or {}).get("name")
    if name not in (None, route.name):
        raise BadRequest(f"the name of the object ({name}) does not match the name on the URL ({route.name})")
    current = _get(state, route)
    new = copy.deepcopy(body)
    new.setdefault("metadata", {})["name"] = route.name
    if not new["metadata"].get("resourceVersion"):
        new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]  # an unconditional update
    return prepare_update(state, route.resource, current, new, call.params, route.subresource)


def _patch(state: State, call: Call) -> Pending:
    route, r = call.route, call.route.resource
    kind = call.content_type.split(";")[0].strip()
    if kind not in patches.PATCH_TYPES:
        raise UnsupportedMediaType(f"the body of the request was in an unknown format - accepted media types include: {', '.join(patches.PATCH_TYPES)}")
    if kind == patches.STRATEGIC and r.custom:
        raise UnsupportedMediaType("strategic merge patch is not supported for custom resources; use a merge or JSON patch")
    try:
        current = _get(state, route)
    except NotFound:
        if kind == patches.APPLY and route.subresource is None:  # server-side apply of a new object: a create
            body = _object(call.body)
            return prepare_create(state, r, route.namespace, {**body, "metadata": {**(body.get("metadata") or {}), "name": route.name}}, call.params)
        raise
    if route.subresource == "scale":
        patched_scale = _apply(kind, scale_of(r, current), call.body, custom=False)
        return _scale_update(state, call, patched_scale, current)
    patched = _apply(kind, present(r, current), call.body, custom=r.custom)
    if not isinstance(patched, dict):
        raise BadRequest("the patch did not produce an object")
    if (patched.get("metadata") or {}).get("name") != route.name:
        raise Invalid("metadata.name: the name cannot be changed by a patch")
    return prepare_update(state, r, current, patched, call.params, route.subresource)


def _apply(kind: str, current: dict[str, Any], body: Any, *, custom: bool) -> Any:
    if kind == patches.MERGE:
        return merge_patch(current, _object(body))
    if kind == patches.STRATEGIC:
        return patches.strategic_merge(current, _object(body)) or {}
    if kind == patches.JSON_PATCH:
        return patches.json_patch(current, body)
    applied = _object(body)  # server-side apply, approximated (no field ownership)
    applied.get("metadata", {}).pop("resourceVersion", None)
    return merge_patch(current, applied) if custom else (patches.strategic_merge(current, applied) or {})


def prepare_update(
    state: State, resource: Resource, current: dict[str, Any], new: dict[str, Any], params: dict[str, str], subresource: str | None
) -> Pending:
    """Make ready the replacing of `current` by `new` (or only its status); `new`'s
    resourceVersion is the precondition. The lock must be held."""
    name = current["metadata"]["name"]
    new = copy.deepcopy(new)
    new["apiVersion"], new["kind"] = current["apiVersion"], current["kind"]
    meta = new.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise BadRequest("metadata must be an object")
    if resource.namespaced:
        meta["namespace"] = current["metadata"]["namespace"]
    else:
        meta.pop("namespace", None)
    if str(meta.get("resourceVersion") or "") != current["metadata"]["resourceVersion"]:
        raise conflict(resource, name)
    if subresource == "status":
        status = new.get("status")
        new = copy.deepcopy(current)
        if status is None:
            new.pop("status", None)
        else:
            new["status"] = status
    elif resource.status:
        if "status" in current:
            new["status"] = copy.deepcopy(current["status"])
        else:
            new.pop("status", None)
    warnings = admission.prepare_update(state, resource, new, current, params)

    def commit() -> Answer:
        _unchanged(state, resource, current)
        if _same(new, current) or _same(new, _as_read(resource, current)):
            return Answer(200, present(resource, current))  # nothing changed: nothing written
        if _dry_run(params):
            return Answer(200, present(resource, new))
        try:
            stored = state.store.update_status(copy.deepcopy(new)) if subresource == "status" else state.store.update(copy.deepcopy(new))
        except Conflict:
            raise conflict(resource, name) from None
        except Invalid as exc:
            raise _invalid(resource, name, exc) from None
        if stored["metadata"].get("deletionTimestamp") and not stored["metadata"].get("finalizers"):
            return Answer(200, present(resource, stored))  # the last finalizer went: the object is gone
        stored = admission.after_write(state, resource, stored)
        return Answer(200, present(resource, stored), admission.unchecked_rules(state, resource, stored))

    attributes = _attributes("UPDATE", resource, subresource, new, current, params, "UpdateOptions")
    return Pending(attributes, commit, warnings)


def _as_read(resource: Resource, stored: dict[str, Any]) -> dict[str, Any]:
    """`stored` as a read serves it: a custom object pruned and defaulted by its CRD's
    schema, as Kubernetes does on reading from etcd (an object written before a default
    existed, or around the server, reads with it). An update that only adds those
    defaults changes nothing: no write, no new resourceVersion."""
    if not resource.custom or resource.schema is None:
        return stored
    out = copy.deepcopy(stored)
    resource.schema.prune(out)
    resource.schema.default(out)
    return out


def _same(new: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether writing `new` would change nothing the store keeps."""
    server = ("uid", "creationTimestamp", "deletionTimestamp", "generation", "resourceVersion", "managedFields")
    strip = lambda o: {**o, "metadata": {k: v for k, v in (o.get("metadata") or {}).items() if k not in server}}  # noqa: E731
    return strip(new) == strip(current)


# ----------------------------------------------------------------------------- delete


def _delete(state: State, call: Call) -> Answer:
    route, r = call.route, call.route.resource
    options = _object(call.body) if call.body else {}
    propagation = options.get("propagationPolicy") or call.params.get("propagationPolicy") or "Background"
    if propagation not in PROPAGATION:
        raise BadRequest(f"propagationPolicy: unsupported value {propagation!r}: supported values: {', '.join(PROPAGATION)}")
    if route.name is None:
        return _delete_collection(state, call, options, propagation)
    return write(state, lambda: _prepare_delete(state, r, _get(state, route), options, call.params, propagation))


def _prepare_delete(state: State, r: Resource, current: dict[str, Any], options: dict[str, Any], params: dict[str, str], propagation: str) -> Pending:
    """Make ready the deleting of `current` (its preconditions checked); the lock must be held."""
    dry_run = _dry_run(params) or _dry_run(options)
    meta, pre = current["metadata"], options.get("preconditions") or {}
    uid, version = pre.get("uid"), pre.get("resourceVersion")
    if not dry_run and uid is not None and uid != meta.get("uid"):
        raise Conflict(f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta.get('uid')}")
    if not dry_run and version is not None and version != meta.get("resourceVersion"):
        raise Conflict(f"Precondition failed: ResourceVersion in precondition: {version}, ResourceVersion in object meta: {meta.get('resourceVersion')}")

    grace = grace_period(options, params, current) if r.key == "Pod" else 0

    def commit() -> Answer:
        _unchanged(state, r, current)
        if dry_run:
            return Answer(200, present(r, current))
        if r.key == "Pod" and grace > 0 and meta.get("uid") in state.graceful_pods:
            return Answer(200, present(r, state.store.delete_gracefully("Pod", meta.get("namespace"), meta["name"], grace, uid=meta.get("uid"))))
        return Answer(200, delete(state, r, current, propagation))

    attributes = _attributes("DELETE", r, None, None, current, {**params, **({"dryRun": "All"} if dry_run else {})}, "DeleteOptions",
                             {k: v for k, v in options.items() if k in ("propagationPolicy", "preconditions", "gracePeriodSeconds")})
    return Pending(attributes, commit)


def grace_period(options: dict[str, Any], params: dict[str, str], pod: dict[str, Any]) -> int:
    """A pod's grace period for this deletion: DeleteOptions' `gracePeriodSeconds` (body or
    query), else the pod's `terminationGracePeriodSeconds`, else Kubernetes' 30."""
    for value in (options.get("gracePeriodSeconds"), params.get("gracePeriodSeconds"), (pod.get("spec") or {}).get("terminationGracePeriodSeconds")):
        if value is None or value == "":
            continue
        try:
            return max(int(value), 0)
        except (TypeError, ValueError):
            raise BadRequest(f"gracePeriodSeconds: invalid value {value!r}: must be a whole number of seconds") from None
    return 30


def delete(state: State, r: Resource, current: dict[str, Any], propagation: str) -> Any:
    """Delete `current` (the lock held); what the API answers for it."""
    meta = current["metadata"]
    if not meta.get("finalizers"):
        admission.before_delete(state, r, current)
    state.store.delete(r.key, meta.get("namespace"), meta["name"], propagation=propagation)  # type: ignore[arg-type]
    try:
        remaining = state.store.get(r.key, meta.get("namespace"), meta["name"])
    except NotFound:
        return success(r, current) if r.custom else present(r, current)
    return present(r, remaining)  # held by finalizers: deletionTimestamp set


def _delete_collection(state: State, call: Call, options: dict[str, Any], propagation: str) -> Answer:
    """Each object is deleted as by its own request (webhooks included); the first refusal ends it."""
    r = call.route.resource
    with state.lock:
        items = state.store.list(r.key, call.route.namespace, call.params.get("labelSelector") or None, call.params.get("fieldSelector") or None)
    if _dry_run(call.params):
        return Answer(200, {"apiVersion": r.api_version, "kind": f"{r.kind}List", "metadata": {}, "items": [present(r, i) for i in items]})
    warnings: list[str] = []
    for item in items:
        try:
            warnings += _delete_one(state, r, item["metadata"], options, call.params, propagation).warnings
        except NotFound:
            continue  # a cascade took it
    with state.lock:
        version = state.store.resource_version
    return Answer(200, {"apiVersion": r.api_version, "kind": f"{r.kind}List", "metadata": {"resourceVersion": version},
                        "items": [present(r, i) for i in items]}, warnings)


def _delete_one(state: State, r: Resource, meta: dict[str, Any], options: dict[str, Any], params: dict[str, str], propagation: str) -> Answer:
    def prepare() -> Pending:
        return _prepare_delete(state, r, state.store.get(r.key, meta.get("namespace"), meta["name"]), options, params, propagation)

    return write(state, prepare)


# ----------------------------------------------------------------------------- scale, binding


def scale_of(r: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """The object's autoscaling/v1 Scale, read through the CRD's scale paths."""
    assert r.scale is not None
    meta = obj["metadata"]
    spec = tables.evaluate(r.scale.spec_replicas, obj)
    current = tables.evaluate(r.scale.status_replicas, obj)
    status: dict[str, Any] = {"replicas": current[0] if current and isinstance(current[0], int) else 0}
    if r.scale.label_selector:
        selector = tables.evaluate(r.scale.label_selector, obj)
        if selector and isinstance(selector[0], str) and selector[0]:
            status["selector"] = selector[0]
    scale_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": scale_meta,
            "spec": {"replicas": spec[0] if spec and isinstance(spec[0], int) else 0}, "status": status}


def _scale_update(state: State, call: Call, scale: dict[str, Any], current: dict[str, Any] | None = None) -> Pending:
    r = call.route.resource
    assert r.scale is not None
    current = current if current is not None else _get(state, call.route)
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise InvalidObject(r, call.route.name or "", [Cause("spec.replicas", "FieldValueInvalid", f"Invalid value: {json.dumps(replicas)}: must be greater than or equal to 0")])
    new = copy.deepcopy(current)
    new["metadata"]["resourceVersion"] = (scale.get("metadata") or {}).get("resourceVersion") or current["metadata"]["resourceVersion"]
    _set_path(new, r.scale.spec_replicas, replicas)
    pending = prepare_update(state, r, current, new, call.params, None)

    def commit() -> Answer:
        answer = pending.commit()
        stored = state.store.get(r.key, call.route.namespace, call.route.name or "")
        return Answer(200, scale_of(r, stored), answer.warnings)

    attributes = dataclasses.replace(pending.attributes, subresource="scale", kind=SCALE_KIND, object=scale_of(r, new),
                                     old_object=scale_of(r, current))
    return Pending(attributes, commit, pending.warnings)


def _set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    steps = path.strip().lstrip(".").split(".")
    for step in steps[:-1]:
        obj = obj.setdefault(step, {})
    obj[steps[-1]] = value


def _bind(state: State, call: Call) -> Pending:
    route = call.route
    body = _object(call.body)
    target = (body.get("target") or {}).get("name")
    if not target:
        raise InvalidObject(route.resource, route.name or "", [Cause("target.name", "FieldValueRequired", "Required value")])
    pod = _get(state, route)
    binding = {**body, "apiVersion": "v1", "kind": "Binding",
               "metadata": {**(body.get("metadata") or {}), "name": route.name, "namespace": pod["metadata"]["namespace"]}}

    def commit() -> Answer:
        _get(state, route)
        state.store.bind(route.namespace or "default", route.name or "", target)
        return Answer(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})

    attributes = _attributes("CREATE", route.resource, "binding", binding, None, call.params, "CreateOptions")
    return Pending(dataclasses.replace(attributes, kind=BINDING_KIND, name=route.name or "", object=binding), commit)


# ----------------------------------------------------------------------------- helpers


def _attributes(operation: str, resource: Resource, subresource: str | None, obj: dict[str, Any] | None, old: dict[str, Any] | None,
                params: dict[str, Any], options_kind: str, options: dict[str, Any] | None = None) -> Attributes:
    """What the webhooks are shown of a write (objects at the version the request named)."""
    meta = (obj if obj is not None else old or {}).get("metadata") or {}
    shown_options = {"kind": options_kind, "apiVersion": "meta.k8s.io/v1", **(options or {})}
    if _dry_run(params):
        shown_options["dryRun"] = ["All"]
    if params.get("fieldManager") and options_kind != "DeleteOptions":
        shown_options["fieldManager"] = params["fieldManager"]
    return Attributes(
        operation=operation,
        resource=resource,
        subresource=subresource or "",
        kind=(resource.group, resource.version, resource.kind),
        namespace=str(meta.get("namespace") or "") if resource.namespaced else "",
        name=str(meta.get("name") or ""),
        object=present(resource, obj) if obj is not None else None,
        old_object=present(resource, old) if old is not None else None,
        dry_run=_dry_run(params),
        options=shown_options,
    )


def _object(body: Any) -> dict[str, Any]:
    if isinstance(body, (bytes, str)):
        try:
            body = yaml.safe_load(body) if body else {}
        except yaml.YAMLError as exc:
            raise BadRequest(f"the request body is not valid JSON or YAML: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be an object")
    return body


def _check_kind(resource: Resource, obj: dict[str, Any]) -> None:
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if kind and kind != resource.kind:
        raise BadRequest(f"the kind of the object ({kind}) does not match the resource ({resource.qualified}: {resource.kind})")
    if api_version and api_version.rpartition("/")[0] != resource.group:
        raise BadRequest(f"the apiVersion of the object ({api_version}) is not of the resource's group ({resource.group or 'core'})")


def _storage(state: State, resource: Resource) -> Resource:
    return state.registry.for_key(resource.key) or resource


def _dry_run(params: dict[str, Any]) -> bool:
    value = params.get("dryRun")
    return value == "All" or (isinstance(value, list) and "All" in value)


def _invalid(resource: Resource, name: str, exc: Invalid) -> InvalidObject:
    """The store's refusal ("spec.nodeName: set by binding only") as a field-naming 422."""
    where, sep, message = exc.message.partition(": ")
    cause = Cause(where, "FieldValueForbidden", message) if sep and " " not in where else Cause("", "FieldValueInvalid", exc.message)
    return InvalidObject(resource, name, [cause])


def check_selectors(params: dict[str, str]) -> None:
    """A malformed label or field selector is 400 before anything else happens."""
    parse(params.get("labelSelector") or None)
    parse_fields(params.get("fieldSelector") or None)
