"""Every command that connects (`tandem operator`, `tandem topology-controller`, `tandem
topology from-hypernodes --kubeconfig`) says the same of a kubeconfig that cannot be used:
one `error:` line naming --kubeconfig and what is wrong, exit 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

COMMANDS = {
    "operator": ("operator", "--health-port", "0", "--metrics-port", "0"),
    "topology-controller": ("topology-controller", "--health-port", "0", "--metrics-port", "0"),
    "from-hypernodes": ("topology", "from-hypernodes"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "not found"),
        ("garbage: [\n", "while parsing"),
        ("apiVersion: v1\n", "not a kubeconfig: no 'clusters'"),
        ("clusters: 5\n", "not a kubeconfig: a field has the wrong type"),
        ("- a\n", "not a kubeconfig: a field has the wrong type"),
        ("hello\n", "not a kubeconfig: a field has the wrong type"),
        ("", "not a kubeconfig: a field has the wrong type"),
    ],
    ids=["missing", "not-yaml", "no-clusters", "clusters-not-a-list", "a-list", "a-string", "empty"],
)
def test_an_unusable_kubeconfig_is_one_error_line_and_exit_2(run_cli, tmp_path: Path, command: str, content: str | None, says: str) -> None:
    pytest.importorskip("lightkube", reason="--kubeconfig needs the operator extra")
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    result = run_cli(*COMMANDS[command], "--kubeconfig", path)
    assert result.exit_code == 2 and result.exception is None
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --kubeconfig: cannot connect: ") and says in lines[0], lines
