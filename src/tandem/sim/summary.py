"""The figures of a simulated run, per group and for the cluster (the keys of summary.json).

- `time_to_first_functional_s`: from the group's arrival to its first functional unit.
- `time_to_target_s`: from arrival until every role of every unit is Ready at its desired
  count (null if never).
- `available_fraction`: share of the time since arrival with every unit functional.
- `max_ratio_deviation`: the largest gap, over time, between two roles' Ready fractions of
  their desired counts, each at most 1 (0 when the roles stay exactly in ratio).
- `partial_gpu_seconds`: GPU-seconds held by units that were partially placed: holding
  GPUs (pods bound, or assigned a node by the controller) while some role had fewer than
  its minimum replicas placed. Start-up time of a complete gang does not count.
- `stalls`: coordination steps that timed out (`stepTimeoutSeconds`), each counted once.
- `affinity_satisfied_fraction`: at the end, the share of `from` replicas that share their
  affinity level's domain with a `to` replica of the same unit (null without affinity).
- cluster: `gpu_allocation` as (time, GPUs held by bound pods) over the run.

`serving` (groups with request load, docs/serving.md), per group:
- `requests`, `completed`, `restarts` (requests that lost work to a leaving replica).
- `preempted` (requests a decode replica preempted for KV blocks at least once) and
  `preemptions` (all preemptions); `prefix_cache_hit_rate`: prompt tokens served from
  prefill replicas' prefix caches / prompt tokens prefilled (null before any prefill);
  `drained_replicas`: replicas that drained (scale-down, rolling update) instead of
  leaving at once; `drain_requeued`: requests sent back to the router because a draining
  replica's grace period ran out before they finished there.
- `ttft_s`, `itl_s`, `e2e_s`, `kv_transfer_s`: p50/p90/p99 over completed requests
  (ITL is the request's mean inter-token latency, TPOT).
- `slo_attainment`: share of ALL requests of the trace that completed within both the
  TTFT and the ITL target (an unfinished request misses).
- `goodput_rps_per_gpu`: requests meeting the SLO per second of load, per GPU the
  group held on average over that time (`mean_gpus`, bound pods, starting ones included).
- `gpu_utilisation`: GPU-seconds the serving replicas were computing / GPU-seconds they
  were Ready.
- `scale_events`: (time, desired replicas per role) for every autoscaler change.
- `gpu_utilisation_over_time`: (time, share of the Ready serving GPUs computing over
  the interval that ends then) at the serving model's samples, at most ~400 points.
- `replicas`: per replica that served — kind, GPUs, `ready_s` [from, until] (null while
  Ready at the end), tokens/s over its Ready time (prefill: prompt tokens; decode:
  generated), busy fraction, mean and max queue depth, mean and peak KV utilisation.

`across_seeds` (`tandem simulate` adds it to every run; the figures above are the first
seed's): `seeds`, `trace_offsets_s` (per group, where each seed's trace replay started),
and per serving group the figures that comparisons are judged on — `slo_attainment`,
`goodput_rps_per_gpu`, `mean_gpus`, `gpu_utilisation`, and `ttft_s` / `itl_s` /
`kv_transfer_s` p50/p90/p99 —
each as {n, mean, ci95: [low, high] (Student t, null for one seed), values}. A difference
between two runs holds across seeds when their intervals do not overlap.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tandem.api.naming import GROUP_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.cluster.ports import Reader
from tandem.errors import NotFound
from tandem.sim.runner import Result, Scenario
from tandem.sim.serving import ServingResults

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


def summarize(scenario: Scenario, result: Result, rules_from: Scenario | None = None) -> dict[str, Any]:
    """The figures of `result`; `rules_from` is the scenario whose groups' affinity rules
    the placement is judged by (the original one, when a comparison dropped them)."""
    original = {_key(g): g["spec"].get("affinity", []) for _, g in rules_from.arrivals} if rules_from else {}
    # A group due after the end never arrived: it has no figures.
    arrivals = {_key(g): at for at, g in scenario.arrivals if at <= scenario.duration_s}
    groups = {}
    samples = result.samples
    final = result.store.snapshot()  # the world at the end, read without copies
    nodes = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in final.list("Node")}
    for key, arrived in sorted(arrivals.items()):
        mine = [s for s in samples if key in s.functional]
        first = next((s.at for s in mine if s.functional[key] > 0), None)
        target = next((s.at for s in mine if s.desired.get(key) and all(s.ready[key][r] >= d for r, d in s.desired[key].items())), None)
        available = partial = 0.0
        deviation = 0.0
        units = _units(final, key)
        for current, following in zip(mine, mine[1:] + [None]):
            span = (following.at if following else scenario.duration_s) - current.at
            if units and current.functional[key] >= units:
                available += span
            partial += current.partial_gpus[key] * span
            # A role above its desired count (a scale-down or a surge not finished) counts as 1.
            fractions = [min(1.0, current.ready[key][r] / d) for r, d in current.desired[key].items() if d > 0]
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
            "affinity_satisfied_fraction": _affinity(final, nodes, key, original.get(key)),
        }
    allocation = [(s.at, s.allocated_gpus) for s in samples]
    out: dict[str, Any] = {"groups": groups, "cluster": {"gpu_allocation": _downsample(allocation, 400), "reconcile_passes": result.passes}}
    if result.serving:
        out["serving"] = {key: _serving(key, served, result, scenario.duration_s) for key, served in sorted(result.serving.items())}
    return out


def _serving(key: str, served: ServingResults, result: Result, end: float) -> dict[str, Any]:
    start = float(served.arrival_s[0]) if len(served.arrival_s) else 0.0
    period = max(end - start, 1e-9)
    held = 0.0
    mine = [s for s in result.samples if key in s.gpus]
    for current, following in zip(mine, mine[1:] + [None]):
        lo, hi = max(current.at, start), min(following.at if following else end, end)
        if hi > lo:
            held += current.gpus[key] * (hi - lo)
    mean_gpus = held / period
    met = int(served.slo_met().sum())
    busy, ready = _gpu_seconds(served, end)
    return {
        "requests": int(len(served.arrival_s)),
        "completed": int(served.completed.sum()),
        "restarts": int((served.restarts > 0).sum()),
        "preempted": int((served.preemptions > 0).sum()),
        "preemptions": int(served.preemptions.sum()),
        "prefix_cache_hit_rate": None if (rate := served.prefix_hit_rate()) is None else round(rate, 4),
        "drained_replicas": int((~np.isnan(served.replica_drain_s)).sum()),
        "drain_requeued": int((served.drain_requeued > 0).sum()),
        "ttft_s": _percentiles(served, "ttft_s"),
        "itl_s": _percentiles(served, "itl_s"),
        "e2e_s": _percentiles(served, "e2e_s"),
        "kv_transfer_s": _percentiles(served, "kv_transfer_s"),
        "slo": {"ttft_s": served.ttft_slo_s, "itl_s": served.itl_slo_s},
        "slo_attainment": round(met / max(len(served.arrival_s), 1), 4),
        "goodput_rps_per_gpu": None if mean_gpus <= 0 else round(met / period / mean_gpus, 5),
        "mean_gpus": round(mean_gpus, 2),
        "gpu_utilisation": None if ready <= 0 else round(busy / ready, 4),
        "scale_events": [[round(at, 3), dict(sorted(d.items()))] for at, d in result.scale_events.get(key, [])],
        "gpu_utilisation_over_time": _downsample(utilisation_over_time(served), 400),
        "replicas": _replicas(served, end),
    }


def utilisation_over_time(served: ServingResults) -> list[tuple[float, float]]:
    """(sample time, share of the Ready serving GPUs that computed since the sample before),
    at every sample of the serving model."""
    samples = served.samples
    if samples.at_s.size == 0:
        return []
    gpus = served.replica_gpus[samples.replica].astype(float)
    busy = np.nan_to_num(samples.busy_fraction) * gpus
    times, index = np.unique(samples.at_s, return_inverse=True)
    held = np.bincount(index, weights=gpus, minlength=times.size)
    used = np.bincount(index, weights=busy, minlength=times.size)
    return [(round(float(t), 3), round(float(u / h), 4)) for t, u, h in zip(times, used, held) if h > 0]


def _replicas(served: ServingResults, end: float) -> list[dict[str, Any]]:
    """Per replica that served: its life, throughput, busy share, queue and KV use."""
    samples = served.samples
    out = []
    for index, ident in enumerate(served.replica_ids):
        rows = np.flatnonzero(samples.replica == index)
        joined = float(served.replica_joined_s[index])
        left = served.replica_left_s[index]
        life = (end if np.isnan(left) else float(left)) - joined
        queue = samples.queue_depth[rows]
        kv = samples.kv_utilization[rows]
        busy = _busy_seconds(served, index, rows)
        out.append(
            {
                "id": ident,
                "kind": served.replica_kinds[index],
                "gpus": int(served.replica_gpus[index]),
                "ready_s": [round(joined, 3), None if np.isnan(left) else round(float(left), 3)],
                "tokens_per_s": None if life <= 0 else round(float(served.replica_tokens[index]) / life, 1),
                "busy_fraction": None if life <= 0 else round(busy / life, 4),
                "mean_queue_depth": None if rows.size == 0 else round(float(queue.mean()), 3),
                "max_queue_depth": None if rows.size == 0 else int(queue.max()),
                "peak_kv_utilization": None if np.isnan(served.replica_peak_kv_utilization[index]) else round(float(served.replica_peak_kv_utilization[index]), 4),
                "mean_kv_utilization": None if rows.size == 0 or np.all(np.isnan(kv)) else round(float(np.nanmean(kv)), 4),
            }
        )
    return out


def _busy_seconds(served: ServingResults, replica: int, rows: np.ndarray) -> float:
    """Seconds the replica was computing: each sample's busy share of the time since its previous one."""
    if rows.size == 0:
        return 0.0
    times = served.samples.at_s[rows]
    previous = np.concatenate(([served.replica_joined_s[replica]], times[:-1]))
    return float(np.sum(np.nan_to_num(served.samples.busy_fraction[rows]) * np.maximum(times - previous, 0.0)))


def _percentiles(served: ServingResults, metric: str) -> dict[str, float | None]:
    values = served.percentiles(metric, (50, 90, 99))
    return {f"p{int(q)}": (None if math.isnan(v) else round(v, 5)) for q, v in values.items()}


def _gpu_seconds(served: ServingResults, end: float) -> tuple[float, float]:
    """(busy, Ready) GPU-seconds of the serving replicas over the run."""
    left = np.where(np.isnan(served.replica_left_s), end, served.replica_left_s)
    ready = float(np.sum((np.minimum(left, end) - served.replica_joined_s) * served.replica_gpus))
    busy = 0.0
    for replica in range(len(served.replica_ids)):
        rows = np.flatnonzero(served.samples.replica == replica)
        busy += _busy_seconds(served, replica, rows) * int(served.replica_gpus[replica])
    return busy, ready


def _units(final: Reader, key: str) -> int:
    namespace, name = key.split("/")
    try:
        return int(final.get("InferenceGroup", namespace, name)["spec"].get("replicas", 1))
    except NotFound:  # a group deleted during the run has no units left
        return 0


def _key(group: dict[str, Any]) -> str:
    return f"{group['metadata'].get('namespace', 'default')}/{group['metadata']['name']}"


def _affinity(store: Reader, nodes: dict[str, dict[str, str]], key: str, rules: list[dict[str, Any]] | None) -> float | None:
    """The share of the group's `from` replicas with a counterpart in their rule's domain
    at the end of the run; `nodes` are the nodes' labels by name."""
    namespace, name = key.split("/")
    try:
        group = store.get("InferenceGroup", namespace, name)
    except NotFound:  # deleted during the run: nothing left to judge
        return None
    if rules is None:
        rules = group["spec"].get("affinity", [])
    if not rules:
        return None
    wanted = group["spec"].get("topologyName") or "default"  # the model's default
    topology = next((t for t in store.list("ClusterTopology") if t["metadata"]["name"] == wanted), None)
    if topology is None:
        return None
    labels = {lv["name"]: lv["nodeLabel"] for lv in topology["spec"]["levels"]}
    pods = [p for p in store.list("Pod", namespace, {GROUP_LABEL: name}) if p["spec"].get("nodeName")]
    satisfied = total = 0
    for rule in rules:
        label = labels.get(rule["level"])
        for unit in {p["metadata"]["labels"][UNIT_LABEL] for p in pods}:
            unit_pods = [p for p in pods if p["metadata"]["labels"][UNIT_LABEL] == unit]
            near = {_domain(nodes, p, label) for p in unit_pods if p["metadata"]["labels"][ROLE_LABEL] == rule["to"]}
            replicas: dict[str, set[str | None]] = {}
            for p in unit_pods:
                if p["metadata"]["labels"][ROLE_LABEL] == rule["from"]:
                    replicas.setdefault(p["metadata"]["labels"]["tandem.dev/replica"], set()).add(_domain(nodes, p, label))
            total += len(replicas)
            satisfied += sum(1 for domains in replicas.values() if domains & near)
    return None if total == 0 else round(satisfied / total, 4)


def _domain(nodes: dict[str, dict[str, str]], pod: dict[str, Any], label: str | None) -> str | None:
    """The pod's domain: its node's value of `label`; None when the node has no such label
    or there is no label (a level the topology does not have)."""
    node_labels = nodes[pod["spec"]["nodeName"]]
    return node_labels.get(label) if label is not None else None


def _downsample(points: list[tuple[float, Any]], limit: int) -> list[tuple[float, Any]]:
    if len(points) <= limit:
        return points
    step = len(points) / limit
    return [points[int(i * step)] for i in range(limit)] + [points[-1]]


# The serving figures `across_seeds` summarises: the ones comparisons are judged on.
SEED_FIGURES = ("slo_attainment", "goodput_rps_per_gpu", "mean_gpus", "gpu_utilisation")
SEED_PERCENTILES = ("ttft_s", "itl_s", "kv_transfer_s")

# Student t's 97.5% quantile for 1..30 degrees of freedom (two-sided 95%); beyond, the
# Cornish-Fisher expansion below is within 1e-7 of it. numpy has no t distribution, and
# a table keeps the core free of scipy.
_T975 = (
    12.706204736, 4.302652730, 3.182446305, 2.776445105, 2.570581836, 2.446911851, 2.364624252, 2.306004135,
    2.262157163, 2.228138852, 2.200985160, 2.178812830, 2.160368656, 2.144786688, 2.131449546, 2.119905299,
    2.109815578, 2.100922040, 2.093024054, 2.085963447, 2.079613845, 2.073873068, 2.068657610, 2.063898562,
    2.059538553, 2.055529439, 2.051830516, 2.048407142, 2.045229642, 2.042272456,
)


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t with `df` degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z, v = 1.959963984540054, float(df)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
    )


def mean_ci(values: list[float | None]) -> dict[str, Any]:
    """{n, mean, ci95, values}: the mean and its two-sided 95% Student t interval over the
    seeds that measured the figure (a None is a seed that could not, e.g. no request done)."""
    measured = [float(v) for v in values if v is not None]
    n = len(measured)
    if n == 0:
        return {"n": 0, "mean": None, "ci95": None, "values": list(values)}
    mean = math.fsum(measured) / n
    interval = None
    if n > 1:
        sd = math.sqrt(math.fsum((v - mean) ** 2 for v in measured) / (n - 1))
        half = t_quantile_975(n - 1) * sd / math.sqrt(n)
        interval = [_round(mean - half), _round(mean + half)]
    return {"n": n, "mean": _round(mean), "ci95": interval, "values": list(values)}


def intervals_apart(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when two `mean_ci` intervals do not overlap: a difference that holds across seeds."""
    if not a.get("ci95") or not b.get("ci95"):
        return False
    return a["ci95"][1] < b["ci95"][0] or b["ci95"][1] < a["ci95"][0]


def across_seeds(runs: list[tuple[Scenario, dict[str, Any]]]) -> dict[str, Any]:
    """The `across_seeds` entry of one variant from its runs, one per seed, in seed order."""
    groups = sorted({g for _, figures in runs for g in figures.get("serving", {})})
    serving: dict[str, Any] = {}
    for group in groups:
        mine = [figures.get("serving", {}).get(group, {}) for _, figures in runs]
        entry: dict[str, Any] = {name: mean_ci([f.get(name) for f in mine]) for name in SEED_FIGURES}
        for metric in SEED_PERCENTILES:
            entry[metric] = {q: mean_ci([(f.get(metric) or {}).get(q) for f in mine]) for q in ("p50", "p90", "p99")}
        serving[group] = entry
    offsets = {g: [scenario.trace_offsets_s.get(g, 0.0) for scenario, _ in runs] for g in groups}
    return {"seeds": [scenario.seed for scenario, _ in runs], "trace_offsets_s": offsets, "serving": serving}


def _round(value: float) -> float:
    """Enough digits for any figure here (shares, requests/s per GPU, seconds), few enough to read."""
    return round(value, 6)
