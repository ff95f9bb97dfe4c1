"""The controller's `Writer` over the Kubernetes API.

- `create` POSTs the object; `patch` and `patch_status` send a JSON merge patch
  (`application/merge-patch+json`) to the object or its `/status`, as field manager
  `tandem`. A resourceVersion precondition travels inside the patch as
  `metadata.resourceVersion`: that is how the API server does optimistic concurrency for
  a patch (a stale one gets 409 Conflict); there is no precondition header.
- `delete` sends DeleteOptions with `preconditions` {uid, resourceVersion} and the
  `propagationPolicy`, so a delete never removes a namesake or a newer version.
- `record_event` creates a core/v1 Event and, on a repeat of the same (object, type,
  reason, message), patches its `count` and `lastTimestamp`, as client-go's recorder
  aggregates. Repeats are remembered in an LRU (one PATCH, no read); the Event's name is
  derived from what it says, so a repeat this process does not remember (a restart, a new
  leader) meets AlreadyExists and is counted on the stored one (two patches, no GET); an
  Event the server has meanwhile expired (after an hour) is created anew.

Objects are plain dicts in and out, exactly as the server answers.
"""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Mapping

import httpx2

from tandem.api.timestamps import rfc3339
from tandem.cluster.ports import MERGE_PATCH, AlreadyExists, Conflict, EventType, NotFound, Object, ObjectRef, Propagation
from tandem.kube.kinds import key_of, kind_of
from tandem.kube.rest import Rest, as_rest

COMPONENT = "tandem"


class KubeWriter:
    def __init__(
        self,
        rest: Rest | httpx2.Client,
        *,
        clock: Callable[[], float] = time.time,
        component: str = COMPONENT,
        instance: str | None = None,
        remember: int = 4096,
    ):
        self.rest = as_rest(rest)
        self.clock = clock  # event timestamps only
        self.component = component
        self.instance = instance or socket.gethostname()
        self.remember = remember
        self._counts: OrderedDict[tuple[str, str], int] = OrderedDict()  # (namespace, event name) -> count, LRU
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ objects

    def create(self, obj: Object) -> Object:
        kind = kind_of(key_of(obj))
        namespace = kind.namespace_of((obj.get("metadata") or {}).get("namespace"))
        return self.rest.request("POST", kind.path(namespace), params=self._manager(), body=obj)

    def patch(
        self, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any], *, resource_version: str | None = None
    ) -> Object:
        return self._patch(kind, namespace, name, patch, resource_version, None)

    def patch_status(
        self, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any], *, resource_version: str | None = None
    ) -> Object:
        if not kind_of(kind).status:
            raise NotFound(f"{kind} has no status subresource")
        return self._patch(kind, namespace, name, patch, resource_version, "status")

    def delete(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation: Propagation = "Background",
    ) -> Object:
        """Returns the server's answer: the object (still there while finalizers or a grace
        period hold it, with `deletionTimestamp`), or a Status."""
        k = kind_of(kind)
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        preconditions = {key: value for key, value in (("uid", uid), ("resourceVersion", resource_version)) if value is not None}
        if preconditions:
            options["preconditions"] = preconditions
        return self.rest.request("DELETE", k.path(k.namespace_of(namespace), name), body=options)

    # ------------------------------------------------------------------ events

    def record_event(self, involved: ObjectRef, type: EventType, reason: str, message: str) -> None:
        namespace = involved.namespace or "default"  # events about cluster-scoped objects live in default
        name = event_name(involved, type, reason, message)
        now = rfc3339(int(self.clock()))  # whole seconds, as metav1.Time serialises
        key = (namespace, name)
        with self._lock:
            count = self._counts.get(key)
        if count is not None:
            try:
                self._patch_event(key, count + 1, now)
                return
            except NotFound:
                pass  # expired on the server: create it again
        try:
            self.rest.request("POST", kind_of("Event").path(namespace), params=self._manager(), body=self._event(involved, type, reason, message, name, now))
            self._remember(key, 1)
        except AlreadyExists:
            self._count_stored(key, now)

    def _event(self, involved: ObjectRef, type: str, reason: str, message: str, name: str, now: str) -> Object:
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": involved.namespace or "default"},
            "involvedObject": {
                k: v
                for k, v in (
                    ("kind", involved.kind),
                    ("namespace", involved.namespace),
                    ("name", involved.name),
                    ("uid", involved.uid),
                    ("apiVersion", involved.api_version),
                )
                if v
            },
            "type": type,
            "reason": reason,
            "message": message,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
        }

    def _count_stored(self, key: tuple[str, str], now: str) -> None:
        """A repeat of an Event this writer does not remember: count it on the stored one.
        Its count is read from the answer to a patch of `lastTimestamp` (no GET: RBAC grants
        events create and patch only), then raised by a compare-and-swap patch."""
        path = kind_of("Event").path(*key)
        for _ in range(3):
            current = self.rest.request("PATCH", path, params=self._manager(), body={"lastTimestamp": now}, content_type=MERGE_PATCH)
            try:
                self._patch_event(key, int(current.get("count") or 1) + 1, now, (current.get("metadata") or {}).get("resourceVersion"))
                return
            except Conflict:
                continue  # another writer counted it meanwhile: read again

    def _patch_event(self, key: tuple[str, str], count: int, now: str, resource_version: str | None = None) -> None:
        body: dict[str, Any] = {"count": count, "lastTimestamp": now}
        if resource_version is not None:
            body["metadata"] = {"resourceVersion": resource_version}
        self.rest.request("PATCH", kind_of("Event").path(*key), params=self._manager(), body=body, content_type=MERGE_PATCH)
        self._remember(key, count)

    def _remember(self, key: tuple[str, str], count: int) -> None:
        with self._lock:
            self._counts[key] = count
            self._counts.move_to_end(key)
            while len(self._counts) > self.remember:
                self._counts.popitem(last=False)

    # ------------------------------------------------------------------ internals

    def _patch(
        self, kind: str, namespace: str | None, name: str, patch: Mapping[str, Any], resource_version: str | None, subresource: str | None
    ) -> Object:
        k = kind_of(kind)
        body = dict(patch)
        if resource_version is not None:
            body["metadata"] = {**(patch.get("metadata") or {}), "resourceVersion": resource_version}
        return self.rest.request(
            "PATCH", k.path(k.namespace_of(namespace), name, subresource), params=self._manager(), body=body, content_type=MERGE_PATCH
        )

    def _manager(self) -> dict[str, str]:
        return {"fieldManager": self.rest.field_manager}


def event_name(involved: ObjectRef, type: str, reason: str, message: str) -> str:
    """`<object>.<digest of what the event says>`: the same event, the same name (253 characters at most)."""
    digest = hashlib.sha256("\x00".join((involved.kind, involved.uid, involved.name, type, reason, message)).encode()).hexdigest()[:16]
    return f"{involved.name[:253 - 17]}.{digest}"
