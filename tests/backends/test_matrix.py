"""docs/capabilities.md is the matrix the code generates; the registry has exactly the allowed names."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from tandem.api.resources import Backend as BackendName
from tandem.backends.features import FEATURES
from tandem.backends.matrix import REGENERATE, capability_matrix
from tandem.backends.registry import BACKENDS, NAMES, get_backend, matrix_backends

DOC = Path(__file__).resolve().parents[2] / "docs" / "capabilities.md"


def test_docs_capabilities_is_the_generated_matrix() -> None:
    assert DOC.read_text(encoding="utf-8") == capability_matrix() + "\n", f"docs/capabilities.md is stale; regenerate: {REGENERATE}"


def test_the_matrix_has_a_row_per_feature_and_a_column_per_backend() -> None:
    text = capability_matrix()
    header = next(line for line in text.splitlines() if line.startswith("| feature |"))
    assert header.count("|") - 2 == len(matrix_backends())
    for feature in FEATURES:
        row = next(line for line in text.splitlines() if line.startswith(f"| {feature.title} |"))
        assert row.split(" | ")[1] == "full"  # native, the reference
    assert "| required cross-role affinity | full | **rejected** |" in text


def test_backend_names_are_exactly_what_spec_scheduler_backend_allows() -> None:
    assert NAMES == get_args(BackendName)
    assert set(BACKENDS) == set(NAMES)
    for name in NAMES:
        assert get_backend(name).name == name
