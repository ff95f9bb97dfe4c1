"""Rendering plans for people (a rich table) and for programs (JSON, YAML)."""

from __future__ import annotations

import json

import yaml
from rich.console import Console
from rich.table import Table

from tandem.placement.from_inputs import PlanOutcome
from tandem.placement.plan import plan_to_dict

_STATE_STYLE = {"Placed": "green", "MinimumPlaced": "yellow", "Unschedulable": "red"}


def plan_document(outcome: PlanOutcome) -> dict:
    document = plan_to_dict(outcome.plan)
    document["unusableNodes"] = [
        {"topology": name, "node": node, "reason": reason}
        for name, view in outcome.views.items()
        for node, reason in view.exclusions
    ]
    return document


def render_json(outcome: PlanOutcome) -> str:
    return json.dumps(plan_document(outcome), indent=2, sort_keys=False)


def render_yaml(outcome: PlanOutcome) -> str:
    return yaml.safe_dump(plan_document(outcome), sort_keys=False, allow_unicode=True)


def print_table(outcome: PlanOutcome, console: Console) -> None:
    table = Table(title="tandem placement", header_style="bold")
    for column in ("unit", "state", "domain", "role", "replicas", "nodes"):
        table.add_column(column, overflow="fold", no_wrap=column in ("unit", "state", "domain"))
    messages = []
    for unit in outcome.plan.units:
        style = _STATE_STYLE[unit.state]
        for i, role in enumerate(unit.unit.roles):
            replicas = unit.replicas(role.name)
            nodes = sorted({pod.node for replica in replicas for pod in replica.pods})
            first = i == 0
            table.add_row(
                unit.unit.label if first else "",
                f"[{style}]{unit.state}[/]" if first else "",
                (unit.domain or "-") if first else "",
                role.name,
                f"{len(replicas)}/{role.desired} (min {role.minimum})",
                _compact(nodes),
                end_section=i == len(unit.unit.roles) - 1,
            )
        if unit.message:
            messages.append(f"[{style}]{unit.unit.label}[/] {unit.message}")
    console.print(table)
    for message in messages:
        console.print(message, highlight=False)
    excluded = sum(len(view.exclusions) for view in outcome.views.values())
    if excluded:
        console.print(f"{excluded} node(s) not usable (see -o json, unusableNodes)", style="dim")


def _compact(nodes: list[str], limit: int = 6) -> str:
    if len(nodes) <= limit:
        return ", ".join(nodes) or "-"
    return ", ".join(nodes[:limit]) + f", … (+{len(nodes) - limit})"
