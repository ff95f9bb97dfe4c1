"""Replica identity: what a unit's pods say about its replicas.

A pod's labels name its group, unit, role, replica and index; its state (gated, admitted,
bound, Ready, failed) gives the replica's phase. The coordination planner, the status,
the simulator's sampler and its serving load all read replicas this one way.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from tandem.api.naming import ADMITTED, CREATION, REPLICA_LABEL, REVISION_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.api.resources import InferenceGroup
from tandem.api.timestamps import seconds
from tandem.cluster.payloads import PodPayload
from tandem.cluster.pods import pod_failed, pod_index, pod_ready
from tandem.coordination.model import Phase, Replica

# What `replicas_of_unit` reads of a unit: its replicas, and the pods of each.
UnitRead = tuple[list[Replica], dict[tuple[str, int], list[PodPayload]]]


def replicas_of_unit(
    pods: list[PodPayload],
    pods_per_replica: dict[str, int],
    revision: str | None = None,
    created_whole: int | None = None,
    replace_missing: frozenset[str] = frozenset(),
) -> UnitRead:
    """The unit's replicas as the coordination planner sees them, and the pods of each
    (in teardown order: workers first, the leader, index 0, last).

    A replica's pods are created workers first and the leader last, in one pass, and deleted
    in the same order, so a replica missing pods tells how it got there:

    - **Creation cut short** (a writer stopped between two creates): no leader, a run of the
      highest indices, none failed, and created by a pass whose writes did not all go out.
      Each pod carries the number of the pass that created it (`naming.CREATION`); the
      group's `status.creations` (`created_whole`) is written once a pass's creates all
      went through (a status patch after them, skipped when one failed), or raised to the
      highest number read when no replica lacks a pod, so pods numbered above it may belong
      to a creation cut short.
      Placement and admission cannot tell: a replica's pods are created admitted and placed
      in the same pass. Such a replica is completed, not replaced, and its phase counts the
      missing pods as just created. Without `created_whole` (a reader that has no status)
      every such replica is taken for one.
    - **Lost a pod** (deleted, evicted, its node gone) after being created whole: it is
      Failed and will be re-created whole, as is one with a failed pod or with pods of two
      revisions (a replacement created beside a pod whose delete failed). A leader lost is
      always so: a multi-node engine starts again around a new leader.
    - **Lost only workers**, in a role of `replace_missing` (`recovery: ReplaceMissingPod`):
      completed like a creation cut short (the controller then places the missing pods
      beside the surviving ones, or re-creates the replica whole when they do not fit).

    With `revision`, only a replica of that revision can be completed (the template of
    another is gone). Otherwise its phase is that of its least advanced pod: Gated (held by
    coordination), Pending (admitted, not yet bound), Scheduled, Ready.
    """
    by_replica: dict[tuple[str, int], list[PodPayload]] = defaultdict(list)
    for pod in pods:
        labels = pod["metadata"].get("labels", {})
        by_replica[(labels[ROLE_LABEL], int(labels[REPLICA_LABEL]))].append(pod)
    replicas: list[Replica] = []
    for (role, index), members in sorted(by_replica.items()):
        members.sort(key=pod_index, reverse=True)
        own_revision = members[0]["metadata"]["labels"].get(REVISION_LABEL, "")
        phases = [_pod_phase(p) for p in members]
        size = pods_per_replica.get(role, 1)
        mixed = any(p["metadata"]["labels"].get(REVISION_LABEL, "") != own_revision for p in members)
        current = revision is None or own_revision == revision
        phase: Phase
        if "Failed" in phases or mixed:
            phase = "Failed"
        elif len(members) >= size:
            phase = min(phases, key=PHASE_ORDER.index)
        elif current and (unfinished(members, size, created_whole) or (role in replace_missing and pod_index(members[-1]) == 0)):
            phase = min([*phases, "Pending"], key=PHASE_ORDER.index)
        else:
            phase = "Failed"
        created = min(seconds(p["metadata"].get("creationTimestamp")) for p in members)
        replicas.append(Replica(role, index, own_revision, phase, created))
    return replicas, dict(by_replica)


PHASE_ORDER: list[Phase] = ["Gated", "Pending", "Scheduled", "Ready"]


def unfinished(members: list[PodPayload], size: int, created_whole: int | None = None) -> bool:
    """A replica's pods are the highest indices of `size` and lack the leader, and (with
    `created_whole`) some was created by a pass numbered above it: a creation cut short."""
    indices = sorted(pod_index(p) for p in members)
    if not (0 < len(indices) < size and indices == list(range(size - len(indices), size))):
        return False
    return created_whole is None or max(creation_of(p) for p in members) > created_whole


def creations_whole(pods: Sequence[PodPayload], pods_per_replica: dict[str, int], stored: int) -> int:
    """A group's `status.creations` as its pods read say it: the highest creation number
    among them when no replica lacks a pod (none can be a creation cut short), else `stored`."""
    members: dict[tuple[str, str, str], int] = defaultdict(int)
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        members[(labels.get(UNIT_LABEL, ""), labels.get(ROLE_LABEL, ""), labels.get(REPLICA_LABEL, ""))] += 1
    if any(count < pods_per_replica.get(role, 1) for (_, role, _), count in members.items()):
        return stored
    return max([stored, *map(creation_of, pods)])


def creation_of(pod: PodPayload) -> int:
    """The number of the pass that created the pod (0: none written, by an older tandem)."""
    value = (pod["metadata"].get("annotations") or {}).get(CREATION, "")
    return int(value) if value.isdigit() else 0


def unit_replicas(pods: list[PodPayload], group: InferenceGroup, read: UnitRead | None = None) -> dict[str, list[Replica]]:
    """One unit's replicas per role (every role present, possibly empty); `read` as for
    `peers_document`."""
    replicas, _ = read or replicas_of_unit(pods, {r.name: r.pods_per_replica for r in group.spec.roles})
    out: dict[str, list[Replica]] = {r.name: [] for r in group.spec.roles}
    for replica in replicas:
        out.setdefault(replica.role, []).append(replica)
    return out


def is_functional(replicas: dict[str, list[Replica]], group: InferenceGroup) -> bool:
    """Every role has at least its minimum of complete, Ready replicas: the unit serves."""
    return all(sum(1 for r in replicas.get(role.name, []) if r.phase == "Ready") >= role.minimum for role in group.spec.roles)


def minimum_placed(replicas: dict[str, list[Replica]], group: InferenceGroup) -> bool:
    """Every role has at least its minimum of complete replicas bound to nodes."""
    return all(
        sum(1 for r in replicas.get(role.name, []) if r.phase in ("Scheduled", "Ready")) >= role.minimum for role in group.spec.roles
    )


def _pod_phase(pod: PodPayload) -> Phase:
    if pod.get("metadata", {}).get("deletionTimestamp") or pod_failed(pod):
        return "Failed"
    if pod_ready(pod):
        return "Ready"
    if pod.get("spec", {}).get("nodeName"):
        return "Scheduled"
    if pod.get("metadata", {}).get("annotations", {}).get(ADMITTED) == "true":
        return "Pending"
    return "Gated"
