"""Rules that relate several fields, or a group to its ClusterTopology.

Each rule returns `Problem`s naming the exact field path, so a user sees
`spec.roles[1].minReplicas: must be <= replicas (4)` and not a generic failure.
"""

from __future__ import annotations

from collections import Counter

from tandem.api.naming import MAX_POD_NAME, pod_name
from tandem.api.resources import ClusterTopology, InferenceGroup, Pack
from tandem.errors import Problem, key_path


# The name of the root domain (every node) in plans, messages and topology views.
RESERVED_LEVEL = "cluster"


def check_topology(topology: ClusterTopology) -> list[Problem]:
    problems: list[Problem] = []
    levels = topology.spec.levels
    for index, level in enumerate(levels):
        if level.name == RESERVED_LEVEL:
            problems.append(
                Problem(
                    f"spec.levels[{index}].name",
                    f"{RESERVED_LEVEL!r} is reserved for the whole cluster (the root above every level); choose another name",
                )
            )
    for field, values in (("name", [lv.name for lv in levels]), ("nodeLabel", [lv.node_label for lv in levels])):
        seen: dict[str, int] = {}
        for index, value in enumerate(values):
            if value in seen:
                problems.append(
                    Problem(f"spec.levels[{index}].{field}", f"duplicate {value!r} (also spec.levels[{seen[value]}])")
                )
            seen.setdefault(value, index)
    return problems


def check_group(group: InferenceGroup, topology: ClusterTopology | None) -> list[Problem]:
    """All cross-field rules; topology rules only when the named topology is known."""
    problems = _check_roles(group) + _check_affinity(group) + _check_coordination(group)
    if topology is not None:
        problems += _check_against_topology(group, topology)
    return problems


def _check_roles(group: InferenceGroup) -> list[Problem]:
    problems: list[Problem] = []
    spec = group.spec
    first_index: dict[str, int] = {}
    for index, role in enumerate(spec.roles):
        path = f"spec.roles[{index}]"
        if role.name in first_index:
            problems.append(
                Problem(f"{path}.name", f"duplicate role name {role.name!r} (also spec.roles[{first_index[role.name]}])")
            )
        first_index.setdefault(role.name, index)
        if role.min_replicas is not None and role.min_replicas > role.replicas:
            problems.append(Problem(f"{path}.minReplicas", f"must be <= replicas ({role.replicas})"))
        if role.worker_template is not None and role.pods_per_replica == 1:
            problems.append(Problem(f"{path}.workerTemplate", "is only used when podsPerReplica > 1"))
        longest = pod_name(
            group.metadata.name, max(spec.replicas - 1, 0), role.name, max(role.replicas - 1, 0), role.pods_per_replica - 1
        )
        if len(longest) > MAX_POD_NAME:
            problems.append(
                Problem(
                    f"{path}.name",
                    f"generated pod name {longest!r} is {len(longest)} characters; at most {MAX_POD_NAME} "
                    "are allowed (shorten metadata.name or the role name)",
                )
            )
    return problems


def _check_affinity(group: InferenceGroup) -> list[Problem]:
    problems: list[Problem] = []
    names = {role.name for role in group.spec.roles}
    pairs: dict[tuple[str, str], int] = {}
    for index, rule in enumerate(group.spec.affinity):
        path = f"spec.affinity[{index}]"
        for field, value in (("from", rule.from_), ("to", rule.to)):
            if value not in names:
                problems.append(Problem(f"{path}.{field}", f"names no role of this group: {value!r} (roles: {', '.join(sorted(names))})"))
        if rule.from_ == rule.to:
            problems.append(Problem(f"{path}.to", f"must differ from 'from' ({rule.from_!r})"))
        pair = (rule.from_, rule.to)
        if pair in pairs:
            problems.append(Problem(path, f"duplicate affinity {rule.from_}->{rule.to} (also spec.affinity[{pairs[pair]}])"))
        pairs.setdefault(pair, index)
    return problems


def _check_coordination(group: InferenceGroup) -> list[Problem]:
    problems: list[Problem] = []
    names = [role.name for role in group.spec.roles]
    steps = group.spec.coordination.rollout.steps or {}
    for role_name in steps:
        if role_name not in names:
            problems.append(
                Problem(f"spec.coordination.rollout.steps{key_path(role_name)}", f"names no role of this group (roles: {', '.join(names)})")
            )
    update = group.spec.coordination.rolling_update
    if _is_zero(update.max_surge) and _is_zero(update.max_unavailable):
        problems.append(
            Problem("spec.coordination.rollingUpdate.maxUnavailable", "must not be 0 when maxSurge is 0 (the update could never start)")
        )
    return problems


def _is_zero(value: int | str) -> bool:
    return value == 0 or value == "0%"


def _check_against_topology(group: InferenceGroup, topology: ClusterTopology) -> list[Problem]:
    problems: list[Problem] = []
    levels = topology.level_names()
    known = f"levels of ClusterTopology {topology.metadata.name!r}: {', '.join(levels)}"

    def check_pack(path: str, pack: Pack) -> bool:
        ok = True
        for field in ("required", "preferred"):
            value = getattr(pack, field)
            if value is not None and value not in levels:
                problems.append(Problem(f"{path}.pack.{field}", f"unknown level {value!r} ({known})"))
                ok = False
        if ok and pack.required and pack.preferred and levels.index(pack.preferred) < levels.index(pack.required):
            problems.append(
                Problem(f"{path}.pack.preferred", f"{pack.preferred!r} is broader than required {pack.required!r}; it must be equal or narrower")
            )
        return ok

    unit_ok = check_pack("spec.topology", group.spec.topology.pack)
    unit_required = group.spec.topology.pack.required
    for index, role in enumerate(group.spec.roles):
        path = f"spec.roles[{index}].topology"
        if not check_pack(path, role.topology.pack) or not unit_ok or unit_required is None:
            continue
        for field in ("required", "preferred"):
            value = getattr(role.topology.pack, field)
            if value is not None and levels.index(value) < levels.index(unit_required):
                problems.append(
                    Problem(
                        f"{path}.pack.{field}",
                        f"{value!r} is broader than the unit's required pack {unit_required!r}; a replica must fit inside its unit",
                    )
                )
    for index, rule in enumerate(group.spec.affinity):
        if rule.level not in levels:
            problems.append(Problem(f"spec.affinity[{index}].level", f"unknown level {rule.level!r} ({known})"))
    return problems


def duplicate_names(keys: list[str]) -> list[str]:
    """Names that occur more than once, in first-seen order."""
    counts = Counter(keys)
    return [key for key in dict.fromkeys(keys) if counts[key] > 1]
