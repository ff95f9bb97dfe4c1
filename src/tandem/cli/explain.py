"""`tandem explain`: the step tables a user will see for rollout, scaling and update."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tandem.api.resources import InferenceGroup
from tandem.coordination.model import RoleSpec, UnitSpec
from tandem.coordination.walkthrough import Row, replicas_of, walk


def explain_group(group: InferenceGroup, scale_from: dict[str, int] | None, console: Console) -> None:
    """Print three tables for one unit of `group`, from an ideal world (every replica Ready at once)."""
    spec = UnitSpec.from_group(group, revision="new")
    name = f"{group.metadata.namespace}/{group.metadata.name}"
    c = group.spec.coordination

    steps = c.rollout.steps or {}
    title = f"{name}: rollout from nothing (minimums first, then steps {steps or 'to the target'}; {c.rollout.progression})"
    _print(console, title, walk(spec, []), spec, ["new"])

    start = scale_from or {r.name: r.minimum for r in spec.roles}
    scaled = UnitSpec.from_group(group, revision="new")
    title = f"{name}: scaling from {_fmt(start)} (maxSkew {c.scaling.max_skew}; {c.scaling.progression})"
    _print(console, title, walk(scaled, replicas_of({(role, "new"): n for role, n in start.items()})), scaled, ["new"])

    update = c.rolling_update
    old = replicas_of({(r.name, "old"): r.replicas for r in spec.roles})
    title = (
        f"{name}: rolling update to a new template (maxSurge {update.max_surge}, "
        f"maxUnavailable {update.max_unavailable}, maxSkew {update.max_skew})"
    )
    _print(console, title, walk(spec, old), spec, ["old", "new"])


def _print(console: Console, title: str, rows: list[Row], spec: UnitSpec, revisions: list[str]) -> None:
    console.print(f"\n[bold]{escape(title)}[/]", soft_wrap=True)
    table = Table(header_style="bold")
    table.add_column("step", justify="right")
    columns = [(r.name, rev) for rev in revisions for r in spec.roles]
    for role, revision in columns:
        table.add_column(f"{revision} {role}" if len(revisions) > 1 else role, justify="right")
    table.add_column("action")
    for row in rows:
        table.add_row(str(row.step), *(str(row.counts.get(col, 0)) for col in columns), row.action)
    console.print(table)


def _fmt(counts: dict[str, int]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in counts.items()) + "}"


__all__ = ["explain_group", "RoleSpec"]
