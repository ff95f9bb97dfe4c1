"""A unit's peers file, version 2: what an engine or a router reads to find its peers.

`/etc/tandem/peers.json`, from the ConfigMap `<group>-<unit>-peers` (docs/operator.md,
"peers.json v2"): per role, every replica whose pods are bound (Scheduled or Ready, old
revision or new), with its revision, leader and readiness; per pod its DNS name, IP, node,
readiness, named ports and domain at each level of the group's ClusterTopology; for each
replica of a role that is the `from` of an affinity, the `to` replicas that share its
domain at the affinity's level (`near`). `generation` grows by one whenever the rest
changes, so an engine can tell a fresh file from a stale one.

The document is built in two parts so a pass stays cheap: `peers_body` (everything but the
generation, a function of the unit's pods and their nodes' domains, cached per unit by the
caller) and `with_generation` (the stored file's generation, kept or bumped, spliced in
without parsing either). Pure: payloads in, text out.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from tandem.api.naming import GROUP_LABEL, PEERS_FILE, UNIT_LABEL, peers_config_map, pod_address, pod_name
from tandem.api.resources import InferenceGroup, TopologyLevel
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


def domain_path(pod: PodPayload, nodes: Mapping[tuple[str, str], Object], levels: Sequence[TopologyLevel]) -> Path:
    """The values of the levels' labels on the pod's node (all None without a node)."""
    name = assigned_node(pod)
    labels = ((nodes.get(("", name)) or {}).get("metadata") or {}).get("labels") or {} if name else {}
    return tuple(labels.get(level.node_label) for level in levels)


def peers_body(
    group: GroupPayload, unit: int, typed: InferenceGroup, read: UnitRead, levels: Sequence[str], paths: Mapping[str, Path]
) -> str:
    """The peers file without its generation: sorted keys, no spaces, so equal peers are
    equal bytes. `read` is the unit's `replicas_of_unit`; `paths` each pod's `domain_path`
    by name, over `levels` (the topology's level names, broadest first)."""
    meta = group["metadata"]
    namespace = meta.get("namespace", "default")
    replicas, pods_of = read
    roles: dict[str, list[dict[str, Any]]] = {r.name: [] for r in typed.spec.roles}
    spans: dict[tuple[str, int], list[Path]] = {}  # each listed replica's pods' paths
    for replica in replicas:
        if replica.phase not in _BOUND or replica.role not in roles:
            continue
        members = sorted(pods_of[(replica.role, replica.index)], key=pod_index)
        spans[(replica.role, replica.index)] = [paths[p["metadata"]["name"]] for p in members]
        roles[replica.role].append(
            {
                "replica": replica.index,
                "revision": replica.revision,
                "leader": pod_name(meta["name"], unit, replica.role, replica.index, 0),
                "ready": replica.phase == "Ready",
                "pods": [_pod_entry(p, meta["name"], namespace, levels, paths[p["metadata"]["name"]]) for p in members],
            }
        )
    for rule in typed.spec.affinity:
        if rule.from_ not in roles or rule.to not in roles:
            continue
        depth = levels.index(rule.level) + 1 if rule.level in levels else 0
        targets = [(r["replica"], _domains(spans[(rule.to, r["replica"])], depth)) for r in roles[rule.to]]
        for entry in roles[rule.from_]:
            mine = _domains(spans[(rule.from_, entry["replica"])], depth)
            entry.setdefault("near", {})[rule.to] = [index for index, theirs in targets if mine & theirs]
    document = {"version": VERSION, "group": meta["name"], "namespace": namespace, "unit": unit, "levels": list(levels), "roles": roles}
    return json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n"


def with_generation(body: str, stored: str | None, fresh: int) -> str:
    """The file to store: `stored` itself when its content is `body`; else `body` with the
    stored generation plus one; else (no file, or one not of this version) `fresh`.

    `body` is `peers_body`'s text: "generation" sorts before every other key, so the whole
    document is `{"generation":N,` and the rest of `body`, as json.dumps would write it."""
    if stored is not None and stored.startswith(_PREFIX):
        number, comma, rest = stored[len(_PREFIX) :].partition(",")
        if comma and number.isdigit():
            if rest == body[1:]:
                return stored
            return f"{_PREFIX}{int(number) + 1},{body[1:]}"
    return f"{_PREFIX}{fresh},{body[1:]}"


def fresh_generation(now: float) -> int:
    """A new file's generation: the time in milliseconds. A ConfigMap deleted and written
    anew then starts above the file it replaces (which grew by one per change, at most one
    change per pass), so an engine still holding the old file never takes the new one for
    older; the operator keeps no other record of the last generation."""
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


def _pod_entry(pod: PodPayload, group: str, namespace: str, levels: Sequence[str], path: Path) -> dict[str, Any]:
    name = pod["metadata"]["name"]
    ports: dict[str, int] = {}
    for container in pod.get("spec", {}).get("containers", []):
        for port in container.get("ports") or []:
            if port.get("name") and isinstance(port.get("containerPort"), int):
                ports.setdefault(port["name"], port["containerPort"])
    return {
        "name": name,
        "index": pod_index(pod),
        "address": pod_address(name, group, namespace),
        "ip": (pod.get("status") or {}).get("podIP") or None,
        "node": assigned_node(pod),
        "ready": pod_ready(pod),
        "ports": ports,
        "domains": dict(zip(levels, path)),
    }


def _domains(paths: list[Path], depth: int) -> set[Path]:
    """The replica's domains at `depth` (levels down to the affinity's): a node missing a
    label on the way is in none (as the engine counts it)."""
    if depth == 0:
        return set()
    return {path[:depth] for path in paths if None not in path[:depth]}
