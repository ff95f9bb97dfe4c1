"""The capability matrix (docs/capabilities.md), generated from the code so it cannot drift.

Rows are `features.FEATURES`, columns the backends (the Workload API once per version);
each cell is what `capabilities()` answers. The text is returned, not written: the CLI
(`tandem render --capabilities`) prints it.
"""

from __future__ import annotations

from tandem.backends.base import Approximate, Backend, Full, Support, Unsupported
from tandem.backends.delegated_kinds import DELEGATED_KINDS
from tandem.backends.features import FEATURES
from tandem.backends.registry import matrix_backends
from tandem.backends.workload_api import DEFAULT_VERSION

REGENERATE = ".venv/bin/tandem render --capabilities > docs/capabilities.md"


def _cell(support: Support) -> str:
    if isinstance(support, Full):
        return "full"
    if isinstance(support, Approximate):
        return "approximate"
    return "**rejected**"


def _why(support: Support) -> str:
    if isinstance(support, Full):
        return support.note
    if isinstance(support, Approximate):
        return support.warning
    assert isinstance(support, Unsupported)
    return support.reason


def _operator_table(backends: list[Backend]) -> list[str]:
    """What of each backend is live in `tandem operator` (docs/backends.md, delegated groups)."""
    live, objects, coordination = [], [], []
    for backend in backends:
        kinds = DELEGATED_KINDS.get(backend.name, ())
        if backend.name == "native":
            live.append("tandem's engine places")
            objects.append("none (pods with tandem's gate and a hostname selector)")
            coordination.append("full")
        elif backend.label != backend.name and backend.label != f"{backend.name} {DEFAULT_VERSION}":
            live.append(f"render only (the operator writes {DEFAULT_VERSION})")
            objects.append("-")
            coordination.append("-")
        else:
            changed = "merge-patched as steps go" if all(k.mutable for k in kinds) else "immutable: made once per gang"
            live.append(f"`--backends {backend.name}`, once its kinds are served")
            objects.append(", ".join(k.kind for k in kinds) + f" ({changed})")
            coordination.append("full: tandem's steps, the scheduler places")
    return [
        "## In the operator",
        "",
        "With `tandem operator --backends ...` a group is handed to its scheduler live: the operator writes its gang",
        "objects at each unit's step and its pods as the scheduler needs them, and keeps rollout steps, scaling,",
        "rolling updates (a change of backend among them), minimums first, the gang timeout and whole-replica",
        "replacement; the other rows above say what the scheduler then keeps of each placement promise.",
        "",
        "| | " + " | ".join(f"`{b.label}`" for b in backends) + " |",
        "|---|" + "---|" * len(backends),
        "| live | " + " | ".join(live) + " |",
        "| objects the operator writes | " + " | ".join(objects) + " |",
        "| coordinated rollout, scaling and updates | " + " | ".join(coordination) + " |",
    ]


def capability_matrix(backends: list[Backend] | None = None) -> str:
    backends = backends if backends is not None else matrix_backends()
    lines = [
        "# Scheduler backend capabilities",
        "",
        f"Generated from the code (`src/tandem/backends`); do not edit by hand. Regenerate with `{REGENERATE}`;",
        "a test fails when this file is stale.",
        "",
        "Which InferenceGroup promises each backend keeps: **full** (as tandem's own engine does), **approximate**",
        "(the group is accepted and `tandem validate` / `tandem render` print a warning saying what is weaker) or",
        "**rejected** (a group that relies on the feature gets an `error:` naming the field path, and nothing is",
        "rendered). A group is judged only on the features it uses: a pack a wider required pack already implies, a",
        "replica pack on single-pod replicas, or an affinity the unit's required pack guarantees are not uses.",
        "How each concept maps to each scheduler, with sources: [backends.md](backends.md).",
        "",
        "| feature | " + " | ".join(f"`{b.label}`" for b in backends) + " |",
        "|---|" + "---|" * len(backends),
    ]
    for feature in FEATURES:
        cells = [_cell(b.capabilities()[feature.id]) for b in backends]
        lines.append(f"| {feature.title} | " + " | ".join(cells) + " |")
    lines += ["", *_operator_table(backends)]
    lines += ["", "## The features", ""]
    for feature in FEATURES:
        lines.append(f"- **{feature.title}** (`{feature.id}`): {feature.promise}")
    lines += ["", "## Per backend", ""]
    for backend in backends:
        lines += [f"### `{backend.label}`", ""]
        capabilities = backend.capabilities()
        for feature in FEATURES:
            support = capabilities[feature.id]
            why = _why(support)
            lines.append(f"- {feature.title}: {_cell(support)}" + (f" ({why})" if why else ""))
        lines.append("")
    return "\n".join(lines)
