"""Rules that relate several fields, or a group to its ClusterTopology.

Each rule returns `Problem`s naming the exact field path, so a user sees
`spec.roles[1].minReplicas: must be <= replicas (4)` and not a generic failure.
"""

from __future__ import annotations

from collections import Counter

from tandem.api.autoscaling import FRACTION_METRICS, POLICY_FIELDS, MetricTarget, gpus_per_replica
from tandem.api.naming import HOSTNAME_LABEL, MAX_POD_NAME, pod_name
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
    narrowest = levels[-1].name
    for index in hostname_above_narrowest(topology):
        problems.append(
            Problem(
                f"spec.levels[{index}].nodeLabel",
                f"{HOSTNAME_LABEL} names a single node, so only the narrowest (last) level may use it; "
                f"level {levels[index].name!r} would be broader than {narrowest!r}",
            )
        )
    return problems


def hostname_above_narrowest(topology: ClusterTopology) -> list[int]:
    """Indexes of the levels that use the hostname label but are not the last: inverted,
    since a host cannot hold a rack. The one source of this rule; schedulers keyed by level
    labels (KAI, Kueue) word it their own way (backends/topology_levels.py)."""
    levels = topology.spec.levels
    return [index for index, level in enumerate(levels[:-1]) if level.node_label == HOSTNAME_LABEL]


def check_group(group: InferenceGroup, topology: ClusterTopology | None) -> list[Problem]:
    """All cross-field rules; topology rules only when the named topology is known."""
    problems = _check_roles(group) + _check_affinity(group) + _check_coordination(group) + _check_autoscaling(group) + _check_scheduler(group)
    if topology is not None:
        problems += _check_against_topology(group, topology)
    return problems


def _check_scheduler(group: InferenceGroup) -> list[Problem]:
    """Settings of one backend named with another (also a CEL rule in the CRD)."""
    scheduler = group.spec.scheduler
    if scheduler.qos_class is not None and scheduler.backend != "koordinator":
        return [Problem("spec.scheduler.qosClass", f"is Koordinator's QoS class: only for backend 'koordinator', not {scheduler.backend!r}")]
    return []


def _check_roles(group: InferenceGroup) -> list[Problem]:
    problems: list[Problem] = []
    spec = group.spec
    if not group.metadata.name[:1].isalpha():
        problems.append(
            Problem("metadata.name", f"{group.metadata.name!r} must start with a letter: it also names the group's headless Service (a DNS-1035 label)")
        )
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
    replicas = {role.name: role.replicas for role in group.spec.roles}
    pairs: dict[tuple[str, str], int] = {}
    for index, rule in enumerate(group.spec.affinity):
        path = f"spec.affinity[{index}]"
        for field, value in (("from", rule.from_), ("to", rule.to)):
            if value not in names:
                problems.append(Problem(f"{path}.{field}", f"names no role of this group: {value!r} (roles: {', '.join(sorted(names))})"))
        if rule.from_ == rule.to:
            problems.append(Problem(f"{path}.to", f"must differ from 'from' ({rule.from_!r})"))
        elif rule.mode == "Required" and replicas.get(rule.to) == 0 and replicas.get(rule.from_, 0) > 0:
            problems.append(
                Problem(
                    f"{path}.to",
                    f"Required affinity puts every {rule.from_} replica near a {rule.to} replica, "
                    f"but role {rule.to!r} has replicas: 0 (its {rule.from_} replicas could never be placed)",
                )
            )
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
    if _is_zero(group.spec.coordination.scaling.max_skew):
        problems.append(
            Problem(
                "spec.coordination.scaling.maxSkew",
                "must be at least 1 (or a percentage above 0%): with 0 no role may move ahead of another, so scaling could never start",
            )
        )
    update = group.spec.coordination.rolling_update
    if _is_zero(update.max_surge) and _is_zero(update.max_unavailable):
        problems.append(
            Problem("spec.coordination.rollingUpdate.maxUnavailable", "must not be 0 when maxSurge is 0 (the update could never start)")
        )
    return problems


def _check_autoscaling(group: InferenceGroup) -> list[Problem]:
    """`spec.autoscaling` against the group's roles: every map names the managed roles, bounds
    respect the roles' own minimums, and the chosen policy's block can be satisfied."""
    spec = group.spec.autoscaling
    if spec is None:
        return []
    path = "spec.autoscaling"
    names = [role.name for role in group.spec.roles]
    problems: list[Problem] = []
    for field, value in (("prefillRole", spec.prefill_role), ("decodeRole", spec.decode_role)):
        if value not in names:
            problems.append(Problem(f"{path}.{field}", f"names no role of this group: {value!r} (roles: {', '.join(names)})"))
    if spec.prefill_role == spec.decode_role:
        problems.append(Problem(f"{path}.decodeRole", f"must differ from prefillRole ({spec.prefill_role!r})"))
    for key in spec.roles:
        if key not in names:
            problems.append(Problem(f"{path}.roles{key_path(key)}", f"names no role of this group: {key!r} (roles: {', '.join(names)})"))
    if problems:
        return problems
    managed = spec.managed_roles
    if spec.policy == "SLO" and len(managed) > 2:
        extra = managed[2]
        problems.append(
            Problem(f"{path}.roles{key_path(extra)}", f"policy SLO sizes only prefillRole and decodeRole; {extra!r} needs FixedRatio, PreferredBand or Independent")
        )

    def role_keys(where: str, keys: list[str], required: bool = True) -> None:
        for key in keys:
            if key not in managed:
                problems.append(Problem(f"{where}{key_path(key)}", f"names no managed role (managed: {', '.join(managed)})"))
        for role_name in managed if required else ():
            if role_name not in keys:
                problems.append(Problem(f"{where}{key_path(role_name)}", "required field is missing (one entry per managed role)"))

    role_keys(f"{path}.roles", list(spec.roles))
    minimums: dict[str, int] = {}
    for role_name, bounds in spec.roles.items():
        if role_name not in managed:
            continue
        where = f"{path}.roles{key_path(role_name)}"
        role = group.role(role_name)
        own, minimum = role.minimum, bounds.minimum_for(role)
        minimums[role_name] = minimum
        if minimum < own:
            problems.append(Problem(f"{where}.minReplicas", f"must be >= the role's minReplicas ({own})"))
        elif minimum > bounds.max_replicas:
            field = "minReplicas" if bounds.min_replicas is not None else "maxReplicas"
            problems.append(Problem(f"{where}.{field}", f"minReplicas ({minimum}) must be <= maxReplicas ({bounds.max_replicas})"))

    block_field = POLICY_FIELDS[spec.policy]
    if spec.policy_block() is None:
        problems.append(Problem(f"{path}.{block_field}", f"required field is missing (policy is {spec.policy})"))

    def targets(where: str, chosen: dict[str, MetricTarget]) -> None:
        role_keys(where, list(chosen))
        for role_name, target in chosen.items():
            if target.metric in FRACTION_METRICS and target.value > 1:
                problems.append(Problem(f"{where}{key_path(role_name)}.value", f"must be <= 1 for {target.metric} (a fraction), got {target.value:g}"))

    if spec.fixed_ratio is not None:
        role_keys(f"{path}.fixedRatio.ratio", list(spec.fixed_ratio.ratio))
    if spec.independent is not None:
        targets(f"{path}.independent.targets", spec.independent.targets)
    if spec.preferred_band is not None:
        band_path = f"{path}.preferredBand.bands"
        targets(f"{path}.preferredBand.targets", spec.preferred_band.targets)
        role_keys(band_path, list(spec.preferred_band.bands), required=False)
        bands = spec.preferred_band.bands
        for role_name, band in bands.items():
            if band.min_percent > band.max_percent:
                problems.append(Problem(f"{band_path}{key_path(role_name)}.minPercent", f"must be <= maxPercent ({band.max_percent})"))
        low = sum(bands[r].min_percent if r in bands else 0 for r in managed)
        high = sum(bands[r].max_percent if r in bands else 100 for r in managed)
        if low > 100:
            problems.append(Problem(band_path, f"minPercent values sum to {low}%, over 100%: no split of any total satisfies them"))
        if high < 100:
            problems.append(Problem(band_path, f"maxPercent values sum to {high}%, under 100%: no split of any total satisfies them"))
    if spec.slo is not None and spec.slo.gpu_budget is not None and len(minimums) == len(managed):
        per_unit = sum(minimums[r] * gpus_per_replica(group.role(r)) for r in managed)
        needed = group.spec.replicas * per_unit
        if needed > spec.slo.gpu_budget:
            problems.append(
                Problem(
                    f"{path}.slo.gpuBudget",
                    f"must hold the minimums: {group.spec.replicas} unit(s) x {per_unit} GPUs = {needed}, more than {spec.slo.gpu_budget}",
                )
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
    exclusive = group.spec.topology.exclusive
    if exclusive is not None and exclusive not in levels:
        problems.append(Problem("spec.topology.exclusive", f"unknown level {exclusive!r} ({known})"))
    return problems


def duplicate_names(keys: list[str]) -> list[str]:
    """Names that occur more than once, in first-seen order."""
    counts = Counter(keys)
    return [key for key in dict.fromkeys(keys) if counts[key] > 1]
