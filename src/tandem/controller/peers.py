"""A unit's peers file, version 2: what an engine or a router reads to find its peers.

`/etc/tandem/peers.json`, from the ConfigMap `<group>-<unit>-peers` (docs/operator.md,
"peers.json v2"): per role, every replica whose pods are bound (Scheduled or Ready, old
revision or new), with its revision, leader and readiness; per pod its DNS name, IP, node,
readiness, named ports and domain at each level of the group's ClusterTopology; for each
replica of a role that is the `from` of an affinity, the `to` replicas that share its
domain at the affinity's level (`near`). `generation` grows by one whenever the rest
changes, so an engine can tell a fresh file from a stale one.

The document is built in parts so a pass stays cheap: `peers_body` (everything but the
generation, a function of the unit's pods and their nodes' domains; the caller keeps its
`content_digest` per unit, and tells a current stored file by that digest without
building the body again) and `with_generation` (the stored file's generation, kept or
bumped, spliced in without parsing either). Pure: payloads in, text out.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Sequence

from tandem.api.naming import GROUP_LABEL, PEERS_FILE, UNIT_LABEL, peers_config_map, pod_address, pod_name
from tandem.api.resources import InferenceGroup
from tandem.cluster.payloads import GroupPayload, PodPayload
from tandem.cluster.pods import assigned_node, pod_index, pod_ready
from tandem.cluster.ports import Object
from tandem.cluster.replicas import UnitRead
from tandem.controller.manifests import owner_reference

VERSION = 2
# A domain path: the node's label value at each level, broadest first (None: the node lacks it).
Path = tuple[str | None, ...]
_BOUND = ("Scheduled", "Ready")
_PREFIX = '{"generation":'


def domain_path(pod: PodPayload, nodes: Mapping[tuple[str, str], Object], labels: tuple[str, ...]) -> Path:
    """The values of the level labels `labels` (broadest first) on the pod's node, None
    where it lacks one (all None without a node). Read for every pod of a decided unit,
    so kept to a few lookups."""
    name = assigned_node(pod)
    node = nodes.get(("", name)) if name else None
    found = (node.get("metadata") or {}).get("labels") if node is not None else None
    return tuple(map(found.get, labels)) if found else (None,) * len(labels)


def peers_body(
    group: GroupPayload,
    unit: int,
    typed: InferenceGroup,
    read: UnitRead,
    levels: Sequence[str],
    paths: Mapping[str, Path],
) -> str:
    """The peers file without its generation: sorted keys, no spaces, so equal peers are
    equal bytes (what json.dumps writes with sort_keys). `read` is the unit's
    `replicas_of_unit`; `paths` each pod's `domain_path` by name, over `levels` (the
    topology's level names, broadest first)."""
    meta = group["metadata"]
    namespace = meta.get("namespace", "default")
    replicas, pods_of = read
    roles: dict[str, list[tuple[int, str, bool, list[PodPayload]]]] = {r.name: [] for r in typed.spec.roles}
    for replica in replicas:
        if replica.phase in _BOUND and replica.role in roles:
            members = sorted(pods_of[(replica.role, replica.index)], key=pod_index)
            roles[replica.role].append((replica.index, replica.revision, replica.phase == "Ready", members))
    near: dict[tuple[str, int], dict[str, list[int]]] = {}
    for rule in typed.spec.affinity:
        if rule.from_ not in roles or rule.to not in roles:
            continue
        depth = levels.index(rule.level) + 1 if rule.level in levels else 0
        targets = [(index, _domains([paths[p["metadata"]["name"]] for p in members], depth)) for index, _, _, members in roles[rule.to]]
        for index, _, _, members in roles[rule.from_]:
            mine = _domains([paths[p["metadata"]["name"]] for p in members], depth)
            near.setdefault((rule.from_, index), {})[rule.to] = [i for i, theirs in targets if mine & theirs]
    listed = []
    for role in sorted(roles):
        entries = []
        for index, revision, ready, members in roles[role]:
            close = near.get((role, index))
            entries.append(
                f'{{"leader":{_dumps(pod_name(meta["name"], unit, role, index, 0))}'
                + (f',"near":{_dumps(close)}' if close is not None else "")
                + f',"pods":[{",".join(pod_json(p, meta["name"], namespace, levels, paths[p["metadata"]["name"]]) for p in members)}]'
                + f',"ready":{_dumps(ready)},"replica":{index},"revision":{_dumps(revision)}}}'
            )
        listed.append(f'{_dumps(role)}:[{",".join(entries)}]')
    return (
        f'{{"group":{_dumps(meta["name"])},"levels":{_dumps(list(levels))},"namespace":{_dumps(namespace)}'
        f',"roles":{{{",".join(listed)}}},"unit":{unit},"version":{VERSION}}}\n'
    )


def pod_json(pod: PodPayload, group: str, namespace: str, levels: Sequence[str], path: Path) -> str:
    """A pod's entry in the file: name, index, DNS name, IP, node, readiness, named ports
    (of every container; the first of a name wins) and its domain at each level."""
    name = pod["metadata"]["name"]
    ports: dict[str, int] = {}
    for container in pod.get("spec", {}).get("containers", []):
        for port in container.get("ports") or []:
            if port.get("name") and isinstance(port.get("containerPort"), int):
                ports.setdefault(port["name"], port["containerPort"])
    entry = {
        "name": name,
        "index": pod_index(pod),
        "address": pod_address(name, group, namespace),
        "ip": (pod.get("status") or {}).get("podIP") or None,
        "node": assigned_node(pod),
        "ready": pod_ready(pod),
        "ports": ports,
        "domains": dict(zip(levels, path)),
    }
    return _dumps(entry)


def with_generation(body: str, stored: str | None, fresh: int) -> str:
    """The file to store: `stored` itself when its content is `body`; else `body` with the
    stored generation plus one; else (no file, or one not of this version) `fresh`.

    `body` is `peers_body`'s text: "generation" sorts before every other key, so the whole
    document is `{"generation":N,` and the rest of `body`, as json.dumps would write it."""
    held = stored_content(stored)
    if held is None:
        return f"{_PREFIX}{fresh},{body[1:]}"
    generation, rest = held
    if stored is not None and rest == body[1:]:
        return stored
    return f"{_PREFIX}{generation + 1},{body[1:]}"


def stored_content(stored: str | None) -> tuple[int, str] | None:
    """A stored file's generation and the rest of it (what `content_digest` reads of a
    body); None for no file, or one not of version 2."""
    if stored is None or not stored.startswith(_PREFIX):
        return None
    number, comma, rest = stored[len(_PREFIX) :].partition(",")
    return (int(number), rest) if comma and number.isdigit() else None


def content_digest(body_or_rest: str, is_body: bool = True) -> bytes:
    """A digest of a file's content without its generation (of a `peers_body` text, or of
    `stored_content`'s rest): what the caller keeps per unit instead of the text, so a pass
    tells an unchanged file with one hash and the cache holds 16 bytes a unit."""
    text = body_or_rest[1:] if is_body else body_or_rest
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def fresh_generation(now: float) -> int:
    """A new file's generation: the time in milliseconds. A ConfigMap deleted and written
    anew then starts above the file it replaces (which started at its own creation time and
    grew by one per change, far fewer than one a millisecond), so an engine still holding
    the old file never takes the new one for older; the operator keeps no other record of
    the last generation (a status field would be one more write per change)."""
    return max(1, int(now * 1000))


def peers_config_map_object(group: GroupPayload, unit: int, document: str) -> dict[str, Any]:
    meta = group["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": peers_config_map(meta["name"], unit),
            "namespace": meta.get("namespace", "default"),
            "labels": {GROUP_LABEL: meta["name"], UNIT_LABEL: str(unit)},
            "ownerReferences": [owner_reference(group)],
        },
        "data": {PEERS_FILE: document},
    }


def _domains(paths: list[Path], depth: int) -> set[Path]:
    """The replica's domains at `depth` (levels down to the affinity's): a node missing a
    label on the way is in none (as the engine counts it)."""
    if depth == 0:
        return set()
    return {path[:depth] for path in paths if None not in path[:depth]}


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


# json.dumps with these options builds an encoder on every call: one, kept (it holds no state).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
