"""`tandem explain`: the step tables a user will see for rollout, scaling and update."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tandem.api.resources import InferenceGroup
from tandem.coordination.model import RoleSpec, UnitSpec
from tandem.coordination.planner import rolls_out
from tandem.coordination.walkthrough import Row, replicas_of, walk


def explain_group(group: InferenceGroup, scale_from: dict[str, int] | None, console: Console) -> None:
    """Print three tables for one unit of `group`, from an ideal world (every replica Ready at once)."""
    spec = UnitSpec.from_group(group, revision="new")
    name = f"{group.metadata.namespace}/{group.metadata.name}"
    c = group.spec.coordination

    title = f"{name}: {'rollout' if rolls_out(spec, {}) else 'scaling'} from nothing ({_how(spec, {})})"
    _print(console, title, walk(spec, []), spec, ["new"])

    start = scale_from or {r.name: r.minimum for r in spec.roles}
    scaled = UnitSpec.from_group(group, revision="new")
    title = f"{name}: scaling from {_fmt(start)} ({_how(scaled, start)})"
    _print(console, title, walk(scaled, replicas_of({(role, "new"): n for role, n in start.items()})), scaled, ["new"])

    update = c.rolling_update
    old = replicas_of({(r.name, "old"): r.replicas for r in spec.roles})
    title = (
        f"{name}: rolling update to a new template (maxSurge {update.max_surge}, "
        f"maxUnavailable {update.max_unavailable}, maxSkew {update.max_skew})"
    )
    _print(console, title, walk(spec, old), spec, ["old", "new"])


def _how(spec: UnitSpec, start: dict[str, int]) -> str:
    """How the planner grows from `start`, in words: the rule of `planner.rolls_out`."""
    if not rolls_out(spec, start):
        nothing = all(n == 0 for n in start.values())
        because = "no minimums and no steps, so no rollout: " if nothing else ""
        return f"{because}maxSkew {spec.scaling_max_skew}; {spec.scaling_progression}"
    steps = f"steps {_fmt(dict(spec.rollout_steps))}" if spec.rollout_steps else "to the target"
    if any(start.get(r.name, 0) < r.minimum for r in spec.roles):
        how = f"minimums first, then {steps}"
    else:
        how = f"no minimums, so {steps} from zero"
    return f"{'' if not start else 'a rollout: '}{how}; {spec.rollout_progression}"


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
