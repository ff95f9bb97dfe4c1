"""The scenario's own events (arrivals, spec changes, faults, recoveries, controller outages)
in words, numbered in time order: what the report marks on every time plot.

Pure: a function of the Scenario. The numbers are the order of the events in time (ties in
the order the scenario file lists them), so the same scenario gives the same markers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tandem.api.merge import merge_patch
from tandem.sim.runner import Scenario


@dataclass(frozen=True)
class ScenarioEvent:
    number: int  # 1, 2, ... in time order: the marker's label on the plots
    at: float  # simulated seconds
    short: str  # a few words for a plot, e.g. "rack-5 fails"
    text: str  # the sentence for the page's list


def scenario_events(scenario: Scenario) -> list[ScenarioEvent]:
    """Every event the scenario file schedules within its duration, in time order."""
    found: list[tuple[float, int, str, str]] = []  # (at, order written, short, text)

    def add(at: float, short: str, text: str) -> None:
        if at <= scenario.duration_s:
            found.append((at, len(found), short, text))

    specs: dict[str, dict[str, Any]] = {}
    for at, group in scenario.arrivals:
        key = _key(group)
        specs[key] = group
        units = group["spec"].get("replicas", 1)
        add(at, f"{_name(key)} arrives", f"group {key} arrives ({_count(units, 'unit')})")
    for change in sorted(scenario.changes, key=lambda c: c.at):  # applied in time order, as the runner does
        key = f"{change.namespace}/{change.name}"
        before = specs.get(key, {})
        after = merge_patch(before, change.patch)
        specs[key] = after
        short, text = _describe_change(key, before.get("spec", {}), after.get("spec", {}))
        add(change.at, short, text)
    domains = _domains(scenario.cluster)
    for fault in scenario.faults:
        where = domains.get(frozenset(fault.nodes)) or _nodes(fault.nodes)
        add(fault.at, f"{where.split(' ', 1)[-1]} fails", f"{where} fails ({_count(len(fault.nodes), 'node')} NotReady, their pods lost)")
        if fault.recover_after is not None:
            add(fault.at + fault.recover_after, f"{where.split(' ', 1)[-1]} back", f"{where} recovers (after {fault.recover_after:g} s)")
    for start, end in scenario.controller_down:
        add(start, "controller down", "the controller stops (no pass runs)")
        add(end, "controller back", "the controller is back")
    found.sort(key=lambda event: (event[0], event[1]))
    return [ScenarioEvent(number, at, short, text) for number, (at, _, short, text) in enumerate(found, start=1)]


def _describe_change(key: str, before: dict[str, Any], after: dict[str, Any]) -> tuple[str, str]:
    """(short, sentence) for a spec change: a scale, a rolling update, or another edit."""
    name = _name(key)
    parts: list[str] = []
    short = "spec change"
    old_units, new_units = before.get("replicas", 1), after.get("replicas", 1)
    if old_units != new_units:
        short = f"{name} scale-{'up' if new_units > old_units else 'down'}"
        parts.append(f"scaled from {_count(old_units, 'unit')} to {new_units}")
    old_roles = {r.get("name"): r for r in before.get("roles", [])}
    new_roles = {r.get("name"): r for r in after.get("roles", [])}
    updated = sorted(n for n, r in new_roles.items() if n in old_roles and r.get("template") != old_roles[n].get("template"))
    if updated:
        short = f"{name} rolling update"
        parts.append(f"rolling update (new template for {', '.join(updated)})")
    resized = sorted(n for n, r in new_roles.items() if n in old_roles and r.get("replicas") != old_roles[n].get("replicas"))
    if resized:
        parts.append(f"role replicas changed ({', '.join(resized)})")
    if not parts:
        short = f"{name} spec change"
        parts.append("spec changed")
    return short, f"group {key}: {'; '.join(parts)}"


def _domains(cluster: list[dict[str, Any]]) -> dict[frozenset[str], str]:
    """'level name' of every topology domain, keyed by its set of nodes; where two levels
    hold the same nodes (a block of one rack), the narrower level names them."""
    levels = [
        (level["name"], level["nodeLabel"])
        for obj in cluster
        if obj.get("kind") == "ClusterTopology"
        for level in obj["spec"]["levels"]
    ]
    nodes = [obj for obj in cluster if obj.get("kind") == "Node"]
    out: dict[frozenset[str], str] = {}
    for level, label in levels:  # widest first: a narrower level overwrites
        members: dict[str, set[str]] = {}
        for node in nodes:
            value = node["metadata"].get("labels", {}).get(label)
            if value is not None:
                members.setdefault(value, set()).add(node["metadata"]["name"])
        for value, names in sorted(members.items()):
            out[frozenset(names)] = f"{level} {value}"
    return out


def _nodes(nodes: tuple[str, ...]) -> str:
    shown = ", ".join(sorted(nodes)[:3])
    return f"nodes {shown}{', …' if len(nodes) > 3 else ''}"


def _key(group: dict[str, Any]) -> str:
    return f"{group['metadata'].get('namespace', 'default')}/{group['metadata']['name']}"


def _name(key: str) -> str:
    return key.split("/", 1)[1]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
