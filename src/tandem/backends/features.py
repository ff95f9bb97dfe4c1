"""The InferenceGroup promises a scheduler backend may or may not keep, and when a group relies on each.

A backend is judged per feature (see `base.Support`), and a group is judged only on the
features it actually USES: a pack that a wider pack already implies, a role pack on
single-pod replicas (one pod is always on one host) or an affinity that the unit's
required pack already guarantees are not uses. This is what lets validation reject
exactly the groups that need what a backend lacks, and no others.

Level comparisons need the ClusterTopology (which level is narrower); without it a
different level name counts as a use, so an unknown topology never hides a problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tandem.api.resources import ClusterTopology, InferenceGroup, Role


@dataclass(frozen=True)
class Usage:
    """Where a group relies on a feature (a field path) and how, in a few words."""

    path: str
    detail: str


@dataclass(frozen=True)
class Feature:
    id: str
    title: str  # lower-case phrase used inside messages: "cannot honour <title>"
    promise: str  # what tandem promises, one sentence, for the capability matrix
    detect: Callable[[InferenceGroup, ClusterTopology | None], list[Usage]]


# ----------------------------------------------------------------------------- level order


def _narrower(level: str | None, than: str | None, topology: ClusterTopology | None) -> bool:
    """True when `level` adds something `than` does not already imply.

    None (no constraint) implies nothing. Without a topology only equal names are known
    to imply each other.
    """
    if level is None:
        return False
    if than is None:
        return True
    if topology is None or level not in topology.level_names() or than not in topology.level_names():
        return level != than
    return topology.depth(level) > topology.depth(than)


def _tightest(levels: list[str | None], topology: ClusterTopology | None) -> str | None:
    """The narrowest of the given constraints: the one that implies the others."""
    known = [level for level in levels if level is not None]
    if not known:
        return None
    if topology is None:
        return known[-1]
    names = topology.level_names()
    return max(known, key=lambda level: names.index(level) if level in names else -1)


def _extras(role: Role) -> int:
    return role.replicas - role.minimum


def _each_role(group: InferenceGroup, field: str, uses: Callable[[Role], bool], detail: Callable[[Role], str]) -> list[Usage]:
    """A usage at `spec.roles[i].<field>` for every role that `uses` the feature."""
    return [Usage(f"spec.roles[{i}].{field}", detail(role)) for i, role in enumerate(group.spec.roles) if uses(role)]


# ----------------------------------------------------------------------------- detectors


def _replica_gang(group: InferenceGroup, _: ClusterTopology | None) -> list[Usage]:
    # A replica inside the minimum is covered by the minimum's gang; extras are gangs of their own.
    return _each_role(
        group,
        "podsPerReplica",
        uses=lambda role: role.pods_per_replica > 1 and _extras(role) > 0,
        detail=lambda role: f"{role.name}: {_extras(role)} extra replica(s) of {role.pods_per_replica} pods each",
    )


def _complete_replica_minimum(group: InferenceGroup, _: ClusterTopology | None) -> list[Usage]:
    # When the minimum is every replica, counting pods and counting replicas agree.
    return _each_role(
        group,
        "minReplicas",
        uses=lambda role: role.pods_per_replica > 1 and 0 < role.minimum < role.replicas,
        detail=lambda role: f"{role.name}: {role.minimum} of {role.replicas} replicas of {role.pods_per_replica} pods, whole",
    )


def _unit_gang(group: InferenceGroup, _: ClusterTopology | None) -> list[Usage]:
    needed = [role.name for role in group.spec.roles if role.minimum > 0]
    if len(needed) < 2:
        return []
    return [Usage("spec.roles", f"{len(needed)} roles with minimums: {', '.join(needed)}")]


def _role_minimums(group: InferenceGroup, _: ClusterTopology | None) -> list[Usage]:
    return _each_role(
        group,
        "minReplicas",
        uses=lambda role: role.minimum < role.replicas,
        detail=lambda role: f"{role.name}: functional with {role.minimum} of {role.replicas} replicas",
    )


def _minimums_before_extras(group: InferenceGroup, _: ClusterTopology | None) -> list[Usage]:
    with_extras = [(i, role) for i, role in enumerate(group.spec.roles) if _extras(role) > 0]
    if not with_extras:
        return []
    first = with_extras[0][0]
    detail = ", ".join(f"{role.name} +{_extras(role)}" for _, role in with_extras)
    return [Usage(f"spec.roles[{first}].replicas", f"extra replicas beyond the minimums: {detail}")]


def _unit_pack(field: str) -> Callable[[InferenceGroup, ClusterTopology | None], list[Usage]]:
    def detect(group: InferenceGroup, topology: ClusterTopology | None) -> list[Usage]:
        pack = group.spec.topology.pack
        level = getattr(pack, field)
        if level is None or (field == "preferred" and not _narrower(level, pack.required, topology)):
            return []
        return [Usage(f"spec.topology.pack.{field}", f"each unit in one {level}")]

    return detect


def _role_pack(field: str) -> Callable[[InferenceGroup, ClusterTopology | None], list[Usage]]:
    def detect(group: InferenceGroup, topology: ClusterTopology | None) -> list[Usage]:
        unit_required = group.spec.topology.pack.required
        usages = []
        for i, role in enumerate(group.spec.roles):
            pack = role.topology.pack
            level = getattr(pack, field)
            if role.pods_per_replica < 2 or role.replicas == 0:
                continue  # one pod is always in one domain
            implied_by = [unit_required] if field == "required" else [unit_required, pack.required]
            if _narrower(level, _tightest(implied_by, topology), topology):
                usages.append(Usage(f"spec.roles[{i}].topology.pack.{field}", f"each {role.name} replica in one {level}"))
        return usages

    return detect


def _affinity(mode: str) -> Callable[[InferenceGroup, ClusterTopology | None], list[Usage]]:
    def detect(group: InferenceGroup, topology: ClusterTopology | None) -> list[Usage]:
        unit_required = group.spec.topology.pack.required
        usages = []
        for i, rule in enumerate(group.spec.affinity):
            if rule.mode != mode:
                continue
            # A unit packed into one domain at or below the affinity's level already keeps it.
            if unit_required is not None and not _narrower(rule.level, unit_required, topology):
                continue
            usages.append(Usage(f"spec.affinity[{i}]", f"{rule.from_} near {rule.to} within one {rule.level}"))
        return usages

    return detect


def _exclusive(group: InferenceGroup, _: ClusterTopology | None) -> list[Usage]:
    level = group.spec.topology.exclusive
    return [Usage("spec.topology.exclusive", f"each unit's {level} domains its own")] if level is not None else []


def _priority(group: InferenceGroup, _: ClusterTopology | None) -> list[Usage]:
    priority = group.spec.priority
    return [Usage("spec.priority", f"priority {priority}")] if priority != 0 else []


def _gang_timeout(group: InferenceGroup, _: ClusterTopology | None) -> list[Usage]:
    scheduler = group.spec.scheduler
    if "gang_timeout_seconds" not in scheduler.model_fields_set:
        return []
    return [Usage("spec.scheduler.gangTimeoutSeconds", f"release after {scheduler.gang_timeout_seconds}s")]


def _coordination(group: InferenceGroup, _: ClusterTopology | None) -> list[Usage]:
    if not group.spec.coordination.model_fields_set:
        return []
    return [Usage("spec.coordination", "ratio steps and skew limits for rollout, scaling and updates")]


def _autoscaling(group: InferenceGroup, _: ClusterTopology | None) -> list[Usage]:
    if group.spec.autoscaling is None:
        return []
    return [Usage("spec.autoscaling", "replica counts follow load")]


FEATURES: tuple[Feature, ...] = (
    Feature(
        "replica-gang",
        "replica gang",
        "The pods of one replica (leader and workers) are placed all together or not at all, extra replicas included.",
        _replica_gang,
    ),
    Feature(
        "complete-replica-minimum",
        "minimums in complete replicas",
        "`minReplicas` counts complete replicas: partial multi-pod replicas never satisfy a minimum.",
        _complete_replica_minimum,
    ),
    Feature(
        "unit-gang",
        "unit gang across roles",
        "A unit holds nothing until every role has its minimum (prefill never lands without decode).",
        _unit_gang,
    ),
    Feature(
        "role-minimums",
        "per-role minimums",
        "A unit is functional with `minReplicas` of each role; the other replicas are extras.",
        _role_minimums,
    ),
    Feature(
        "minimums-before-extras",
        "minimums before extras",
        "Every pending unit's minimum (priority, then age) is served before any extra replica.",
        _minimums_before_extras,
    ),
    Feature(
        "unit-pack-required",
        "required unit pack",
        "`spec.topology.pack.required`: all pods of a unit in one domain of that level.",
        _unit_pack("required"),
    ),
    Feature(
        "unit-pack-preferred",
        "preferred unit pack",
        "`spec.topology.pack.preferred`: a unit is tried in one domain of that level first.",
        _unit_pack("preferred"),
    ),
    Feature(
        "role-pack-required",
        "required replica pack",
        "`spec.roles[].topology.pack.required`: all pods of one multi-pod replica in one domain.",
        _role_pack("required"),
    ),
    Feature(
        "role-pack-preferred",
        "preferred replica pack",
        "`spec.roles[].topology.pack.preferred`: a multi-pod replica is tried in one domain first.",
        _role_pack("preferred"),
    ),
    Feature(
        "affinity-required",
        "required cross-role affinity",
        "`affinity` mode Required: every `from` replica shares a `level` domain with a `to` replica.",
        _affinity("Required"),
    ),
    Feature(
        "affinity-preferred",
        "preferred cross-role affinity",
        "`affinity` mode Preferred: as many `from` replicas as possible near a `to` replica.",
        _affinity("Preferred"),
    ),
    Feature(
        "exclusive",
        "exclusive domains",
        "`topology.exclusive`: a domain of that level holding a pod of an exclusive unit holds pods of no other exclusive unit.",
        _exclusive,
    ),
    Feature("priority", "priority", "`spec.priority`: higher-priority units are placed first.", _priority),
    Feature(
        "gang-timeout",
        "gang timeout",
        "`spec.scheduler.gangTimeoutSeconds`: a unit not complete in time releases what it holds and is requeued.",
        _gang_timeout,
    ),
    Feature(
        "coordination",
        "coordinated rollout, scaling and updates",
        "`spec.coordination`: roles move in ratio steps within `maxSkew`.",
        _coordination,
    ),
    Feature(
        "autoscaling",
        "autoscaling",
        "`spec.autoscaling`: replica counts follow load, roles in ratio.",
        _autoscaling,
    ),
)

FEATURE_IDS = tuple(feature.id for feature in FEATURES)


def feature(feature_id: str) -> Feature:
    for candidate in FEATURES:
        if candidate.id == feature_id:
            return candidate
    raise KeyError(feature_id)
