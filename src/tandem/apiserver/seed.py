"""What the server starts with: namespaces, tandem's CRDs, and the objects of the cluster files.

Cluster files are what `tandem plan --cluster` reads (Nodes, bound Pods, ClusterTopology,
InferenceGroups; `kubectl get -o yaml` Lists included), checked the same way
(`tandem.api.loading`), then stored as written, through the same admission as a create
over HTTP. Server-set metadata in a dump (uid, resourceVersion, ...) is replaced (owner
references to objects of the dump follow their owners' new uids); a status is kept.
"""

from __future__ import annotations

import json
from typing import Any

from tandem.api.crds import crds as tandem_crds
from tandem.api.loading import load_documents, load_texts
from tandem.apiserver import verbs
from tandem.apiserver.kinds import Resource
from tandem.apiserver.server_state import State
from tandem.cluster.kind_keys import group_of
from tandem.errors import ApiError, InputError, Problem

NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
CHECKED = frozenset({"Node", "Pod", "ClusterTopology", "InferenceGroup"})  # the kinds tandem's commands read from cluster files
# Created first: what later objects may need (CRDs before their objects, nodes before pods).
# Owners before what they own: an owner reference names the owner's uid, which the server
# gives anew, so a dependent's reference is rewritten to the uid its owner got here.
ORDER = ("Namespace", "CustomResourceDefinition", "Node", "ClusterTopology", "InferenceGroup", "Pod")


def cluster_objects(sources: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Every object of the (name, text) sources, Lists expanded; InputError naming the file and field when invalid."""
    if not sources:
        return []
    objects: list[dict[str, Any]] = []
    checked: list[tuple[str, str]] = []
    for name, text in sources:
        first = len(objects)
        for document in load_documents(name, text):
            if not isinstance(document, dict):
                continue
            kind = str(document.get("kind") or "")
            if kind.endswith("List") and isinstance(document.get("items"), list):
                item_kind = kind[: -len("List")] if kind != "List" else None
                for item in document["items"]:
                    if isinstance(item, dict):
                        objects.append({"apiVersion": document.get("apiVersion") or "v1", "kind": item_kind, **item} if item_kind else item)
            else:
                objects.append(document)
        mine = objects[first:]
        if all(o.get("kind") in CHECKED for o in mine):
            checked.append((name, text))
        else:  # others' kinds too (a snapshot's ConfigMaps, Services): those admission checks
            checked.append((name, json.dumps({"apiVersion": "v1", "kind": "List", "items": [o for o in mine if o.get("kind") in CHECKED]})))
    load_texts(checked)  # the checks every tandem command makes of these files
    return objects


def seed(state: State, objects: list[dict[str, Any]], *, crds: bool = True) -> None:
    """Store the starting objects (the lock need not be held: nothing serves yet)."""
    with state.lock:
        for namespace in NAMESPACES:
            verbs.create(state, _resource(state, "Namespace"), None, {"metadata": {"name": namespace}}, {})
        if crds:
            for crd in tandem_crds():
                verbs.create(state, _resource(state, "CustomResourceDefinition"), None, crd, {})
        rank = {kind: i for i, kind in enumerate(ORDER)}
        uids: dict[str, str] = {}  # the file's uid -> the one the server gave
        for index, obj in sorted(enumerate(objects), key=lambda pair: (rank.get(pair[1].get("kind", ""), len(ORDER)), pair[0])):
            kind = obj.get("kind", "")
            resource = state.registry.for_kind(kind, group_of(obj["apiVersion"]) if obj.get("apiVersion") else None)
            meta = obj.get("metadata") or {}
            where = f"{kind} {meta.get('name', '?')}"
            if resource is None:
                raise InputError(Problem("--cluster", f"{where}: kind {kind} is not served (tandem's CRDs are installed unless --no-crds)"))
            owners = meta.get("ownerReferences")
            if isinstance(owners, list) and any(isinstance(o, dict) and o.get("uid") in uids for o in owners):
                obj = {**obj, "metadata": {**meta, "ownerReferences": [
                    {**o, "uid": uids[o["uid"]]} if isinstance(o, dict) and o.get("uid") in uids else o for o in owners]}}
            try:
                answer = verbs.create(state, resource, meta.get("namespace"), obj, {"fieldValidation": "Strict"}, loading=True)
            except ApiError as exc:  # the file says something the API refuses
                raise InputError(Problem("--cluster", f"{where}: {exc.message}")) from None
            if isinstance(meta.get("uid"), str):
                uids[meta["uid"]] = answer.body["metadata"]["uid"]
        state.changed()


def _resource(state: State, kind: str) -> Resource:
    resource = state.registry.for_kind(kind)
    assert resource is not None, kind
    return resource
