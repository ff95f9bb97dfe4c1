"""checkov scans what `kubectl apply -k` would install: no failed check; every suppression
sits beside its reason (a `checkov.io/skip` annotation whose value says why)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support.deploy import REPO, TARGETS, needs_kubectl, rendered_text, write_install
from tandem.backends.delegated_kinds import DELEGATED_BACKENDS

CHECKOV = os.environ.get("TANDEM_CHECKOV") or next(
    (str(p) for p in (REPO / ".venv-scan" / "bin" / "checkov",) if p.exists()), shutil.which("checkov")
)
needs_checkov = pytest.mark.skipif(CHECKOV is None, reason="checkov is not installed: `make scan-env` puts it in .venv-scan (CI does)")


@needs_kubectl
@needs_checkov
@pytest.mark.parametrize("target", [t for t in TARGETS if t != "deploy/overlays/local"])
def test_checkov_finds_no_failed_check(target, tmp_path: Path):
    _scan(rendered_text(target), tmp_path)


@needs_kubectl
@needs_checkov
@pytest.mark.parametrize("base", [".", "overlays/namespaced"], ids=["deploy", "namespaced"])
def test_checkov_finds_no_failed_check_with_every_backends_component(base, tmp_path: Path):
    """The operator's backend components (deploy/components/operator-<backend>) all at once."""
    install = tmp_path / "install"
    install.mkdir()
    _scan(rendered_text(write_install(install, base, [f"operator-{b}" for b in DELEGATED_BACKENDS])), tmp_path)


def _scan(rendered: str, tmp_path: Path) -> None:
    (tmp_path / "rendered.yaml").write_text(rendered)
    assert "checkov.io/skip" not in rendered or all(
        "=" in line.split(":", 1)[1] and len(line.split("=", 1)[1].strip()) > 10 for line in rendered.splitlines() if "checkov.io/skip" in line
    ), "every suppression names its check and says why"
    out = subprocess.run(
        [CHECKOV, "-f", str(tmp_path / "rendered.yaml"), "--framework", "kubernetes", "--output", "json", "--quiet"],
        capture_output=True, text=True, timeout=300,
    )
    report = json.loads(out.stdout)
    reports = report if isinstance(report, list) else [report]
    failed = [(c["check_id"], c["resource"]) for r in reports for c in r.get("results", {}).get("failed_checks", [])]
    assert failed == [], failed
    passed = sum(r.get("summary", {}).get("passed", 0) for r in reports)
    assert passed > 100, "the scan ran its checks"
