"""The figures of a simulated run, per group and for the cluster (the keys of summary.json).

- `time_to_first_functional_s`: from the group's arrival to its first functional unit.
- `time_to_target_s`: from arrival until every role of every unit is Ready at its desired
  count (null if never).
- `available_fraction`: share of the time since arrival with every unit functional.
- `max_ratio_deviation`: the largest gap, over time, between two roles' Ready fractions of
  their desired counts (0 when the roles stay exactly in ratio).
- `partial_gpu_seconds`: GPU-seconds held by units that were partially placed: holding
  GPUs (pods bound, or assigned a node by the controller) while some role had fewer than
  its minimum replicas placed. Start-up time of a complete gang does not count.
- `stalls`: coordination steps that timed out (`stepTimeoutSeconds`), each counted once.
- `affinity_satisfied_fraction`: at the end, the share of `from` replicas that share their
  affinity level's domain with a `to` replica of the same unit (null without affinity).
- cluster: `gpu_allocation` as (time, GPUs held by bound pods) over the run.
"""

from __future__ import annotations

from typing import Any

from tandem.api.naming import GROUP_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.sim.runner import Result, Scenario

# The per-group keys of summary.json, in the order reports show them.
GROUP_KEYS = (
    "time_to_first_functional_s",
    "time_to_target_s",
    "available_fraction",
    "max_ratio_deviation",
    "partial_gpu_seconds",
    "stalls",
    "affinity_satisfied_fraction",
)


def summarize(scenario: Scenario, result: Result) -> dict[str, Any]:
    arrivals = {f"{g['metadata'].get('namespace', 'default')}/{g['metadata']['name']}": at for at, g in scenario.arrivals}
    groups = {}
    samples = result.samples
    for key, arrived in sorted(arrivals.items()):
        mine = [s for s in samples if key in s.functional]
        first = next((s.at for s in mine if s.functional[key] > 0), None)
        target = next((s.at for s in mine if s.desired.get(key) and all(s.ready[key][r] >= d for r, d in s.desired[key].items())), None)
        available = partial = 0.0
        deviation = 0.0
        for current, following in zip(mine, mine[1:] + [None]):
            span = (following.at if following else scenario.duration_s) - current.at
            units = _units(result, key)
            if units and current.functional[key] >= units:
                available += span
            partial += current.partial_gpus[key] * span
            fractions = [current.ready[key][r] / d for r, d in current.desired[key].items() if d > 0]
            if len(fractions) > 1:
                deviation = max(deviation, max(fractions) - min(fractions))
        lifetime = max(scenario.duration_s - arrived, 1e-9)
        groups[key] = {
            "time_to_first_functional_s": None if first is None else round(first - arrived, 3),
            "time_to_target_s": None if target is None else round(target - arrived, 3),
            "available_fraction": round(available / lifetime, 4),
            "max_ratio_deviation": round(deviation, 4),
            "partial_gpu_seconds": round(partial, 1),
            "stalls": sum(1 for _, line in result.log if line.startswith(key) and "Stalled: step" in line and " within " in line),
            "affinity_satisfied_fraction": _affinity(result, key),
        }
    allocation = [(s.at, s.allocated_gpus) for s in samples]
    return {"groups": groups, "cluster": {"gpu_allocation": _downsample(allocation, 400), "reconcile_passes": result.passes}}


def _units(result: Result, key: str) -> int:
    namespace, name = key.split("/")
    try:
        return int(result.store.get("InferenceGroup", namespace, name)["spec"].get("replicas", 1))
    except Exception:  # noqa: BLE001 - a group deleted during the run has no units left
        return 0


def _affinity(result: Result, key: str) -> float | None:
    namespace, name = key.split("/")
    store = result.store
    group = store.get("InferenceGroup", namespace, name)
    rules = group["spec"].get("affinity", [])
    if not rules:
        return None
    topology = next(iter(store.list("ClusterTopology").items), None)
    if topology is None:
        return None
    labels = {lv["name"]: lv["nodeLabel"] for lv in topology["spec"]["levels"]}
    nodes = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in store.list("Node").items}
    pods = [p for p in store.list("Pod", namespace, {GROUP_LABEL: name}).items if p["spec"].get("nodeName")]
    satisfied = total = 0
    for rule in rules:
        label = labels.get(rule["level"])
        for unit in {p["metadata"]["labels"][UNIT_LABEL] for p in pods}:
            unit_pods = [p for p in pods if p["metadata"]["labels"][UNIT_LABEL] == unit]
            near = {nodes[p["spec"]["nodeName"]].get(label) for p in unit_pods if p["metadata"]["labels"][ROLE_LABEL] == rule["to"]}
            replicas: dict[str, set] = {}
            for p in unit_pods:
                if p["metadata"]["labels"][ROLE_LABEL] == rule["from"]:
                    replicas.setdefault(p["metadata"]["labels"]["tandem.dev/replica"], set()).add(nodes[p["spec"]["nodeName"]].get(label))
            total += len(replicas)
            satisfied += sum(1 for domains in replicas.values() if domains & near)
    return None if total == 0 else round(satisfied / total, 4)


def _downsample(points: list[tuple[float, int]], limit: int) -> list[tuple[float, int]]:
    if len(points) <= limit:
        return points
    step = len(points) / limit
    return [points[int(i * step)] for i in range(limit)] + [points[-1]]
