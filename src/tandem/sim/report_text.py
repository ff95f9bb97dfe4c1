"""Figures in words for the report: column names with units, numbers formatted for people
(milliseconds for latencies, percent for shares), and why a figure is missing.

summary.json keeps its keys and units (seconds, fractions); this is only the human view.
"""

from __future__ import annotations

from typing import Any

from tandem.sim.runner import Result

# Placement and coordination, per group: (summary key, column header).
PLACEMENT_COLUMNS = (
    ("time_to_first_functional_s", "First unit functional (s after arrival)"),
    ("time_to_target_s", "All units Ready (s after arrival)"),
    ("available_fraction", "Available: all units functional (% of time since arrival)"),
    ("max_ratio_deviation", "Largest gap between roles' Ready shares (points)"),
    ("partial_gpu_seconds", "GPU·s held by non-functional units"),
    ("stalls", "Rollout steps stalled"),
    ("affinity_satisfied_fraction", "Affinity satisfied at the end (% of from-replicas)"),
)

# What each headline figure means, for the "How to read this" block: (term, definition).
DEFINITIONS = (
    ("Functional unit", "a copy of the deployment with every role at its minimum Ready replicas: it can serve."),
    ("First unit functional", "seconds from the group's arrival until its first unit was functional."),
    ("All units Ready", "seconds from the group's arrival until every role of every unit had its desired Ready replicas; “not reached” when that never happened before the end."),
    (
        "Available",
        "the share of the time since arrival during which every unit of the group was functional at once. It measures completeness, not uptime: a group "
        "that serves all hour with some of its units, but never with all of them, is 0% available.",
    ),
    ("Largest gap between roles", "the largest difference, over the run, between two roles' Ready share of their desired count, in percentage points (0: the roles stayed exactly in ratio; 100: one role fully Ready while another had none)."),
    ("GPU·s held by non-functional units", "GPU-seconds held by units with a role below its minimum placed: GPUs that cannot serve. tandem places a unit whole or not at all; a role-by-role scheduler strands GPUs here."),
    ("Rollout steps stalled", "steps of a rolling update that did not finish within the group's stepTimeoutSeconds."),
    ("Affinity satisfied", "at the end, the share of the from-role's replicas that share their affinity level's domain (rack, block, …) with a to-role replica of the same unit."),
    ("SLO met", "the share of all requests of the load (unfinished ones count as missed) whose time to first token and inter-token latency both met the group's targets."),
    ("Goodput per GPU", "requests that met the SLO, per second of load, per GPU the group held on average (starting pods included)."),
    ("TTFT, ITL", "time to first token, and a request's mean inter-token latency (time per output token), in milliseconds; p50/p90/p99 are over the completed requests."),
    ("GPU busy", "the share of the Ready serving GPUs' time spent computing a batch."),
)


def seconds(value: float) -> str:
    return f"{value:,.0f} s" if value >= 100 else f"{value:.3g} s"


def milliseconds(value_s: float) -> str:
    """A latency given in seconds, as milliseconds: 458, 15.5, 4.42."""
    ms = value_s * 1000.0
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


def percent(fraction: float) -> str:
    """A share as percent, with the decimals that tell 99.96% from 99.97% (and 0.04% from 0)."""
    value = 100.0 * fraction
    if 0 < value < 1 or 99 < value < 100:
        digits = 2
        while digits < 4 and f"{value:.{digits}f}" in ("0." + "0" * digits, "100." + "0" * digits):
            digits += 1
        return f"{value:.{digits}f}%"
    return f"{value:.1f}%"


def count(value: float) -> str:
    return f"{value:,.0f}"


def placement_cell(key: str, value: Any, why_missing: str) -> tuple[str, str | None]:
    """(text, reason) of a placement figure; the reason says why a missing figure is missing."""
    if value is None:
        return ("not reached" if key.startswith("time_to") else "n/a"), why_missing
    if key.endswith("_fraction"):
        return percent(value), None
    if key == "max_ratio_deviation":
        return f"{100.0 * value:.0f}", None
    if key.endswith("_s"):
        return seconds(value), None
    return count(value), None


def missing_reason(key: str, group: str, result: Result, duration_s: float) -> str:
    """Why a placement figure of `group` is null in summary.json, from the run's own samples."""
    final = result.store.snapshot()
    namespace, name = group.split("/")
    present = any(g["metadata"]["name"] == name for g in final.list("InferenceGroup", namespace))
    if key == "affinity_satisfied_fraction":
        if not present:
            return "the group was deleted during the run"
        spec = next(g for g in final.list("InferenceGroup", namespace) if g["metadata"]["name"] == name)["spec"]
        return "no affinity rule" if not spec.get("affinity") else "no from-replica placed at the end"
    last = next((s for s in reversed(result.samples) if group in s.desired), None)
    if key == "time_to_first_functional_s":
        return f"no unit had every role at its minimum Ready by the end ({seconds(duration_s)})"
    if last is None:
        return "the group never had desired replicas"
    short = ", ".join(f"{role} {last.ready[group].get(role, 0)}/{wanted}" for role, wanted in sorted(last.desired[group].items()))
    return f"at the end, Ready/desired replicas: {short}"


def latency_triple(percentiles: dict[str, float | None]) -> tuple[str, str | None]:
    """`p50 / p90 / p99` in ms, or why there is none."""
    if all(percentiles.get(q) is None for q in ("p50", "p90", "p99")):
        return "not reached", "no request completed"
    return " / ".join("–" if percentiles.get(q) is None else milliseconds(percentiles[q] or 0.0) for q in ("p50", "p90", "p99")), None


def interval(stat: dict[str, Any], scale: float, digits: int, suffix: str = "") -> tuple[str, str | None]:
    """`mean ± half the 95% interval` of a `mean_ci` figure, scaled (percent, ms)."""
    if stat["mean"] is None:
        return "not reached", "no seed measured it"
    mean = stat["mean"] * scale
    if stat["ci95"] is None:
        return f"{mean:,.{digits}f}{suffix}", None
    half = (stat["ci95"][1] - stat["ci95"][0]) / 2 * scale
    return f"{mean:,.{digits}f} ± {half:,.{digits}f}{suffix}", None

