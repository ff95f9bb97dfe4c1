"""A ClusterTopology whose hostname level is above another level is refused by every
command that reads one (`validate`, `plan`, `simulate`), on one line naming the field
path, with exit status 2: a host names one node, so it cannot hold a rack."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

INVERTED = {
    "apiVersion": "tandem.dev/v1alpha1",
    "kind": "ClusterTopology",
    "metadata": {"name": "default"},
    "spec": {"levels": [{"name": "host", "nodeLabel": "kubernetes.io/hostname"}, {"name": "rack", "nodeLabel": "network.tandem.dev/rack"}]},
}
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n-0", "labels": {"kubernetes.io/hostname": "n-0", "network.tandem.dev/rack": "r-0"}},
    "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "8"}},
}
SCENARIO = """
apiVersion: tandem.dev/v1alpha1
kind: Scenario
metadata: {name: inverted}
spec:
  seed: 1
  durationSeconds: 60
  cluster: {files: [cluster.yaml]}
  groups:
    - {at: 0, file: group.yaml}
"""


@pytest.fixture
def files(tmp_path: Path, examples: Path) -> Path:
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([INVERTED, NODE]), encoding="utf-8")
    group = next(yaml.safe_load_all((examples / "llama-70b.yaml").read_text(encoding="utf-8")))
    group["spec"].pop("topology", None)
    for role in group["spec"]["roles"]:
        role.pop("topology", None)
    group["spec"].pop("affinity", None)
    (tmp_path / "group.yaml").write_text(yaml.safe_dump(group), encoding="utf-8")
    (tmp_path / "scenario.yaml").write_text(SCENARIO, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "cluster.yaml"],
        ["plan", "-c", "cluster.yaml", "group.yaml"],
        ["simulate", "scenario.yaml", "--out", "out"],
    ],
    ids=["validate", "plan", "simulate"],
)
def test_a_host_level_above_a_rack_is_refused_with_its_field_path(run_cli, files: Path, argv: list[str]) -> None:
    result = run_cli(*[str(files / a) if a.endswith(".yaml") or a == "out" else a for a in argv])
    assert result.exit_code == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "spec.levels[0].nodeLabel: kubernetes.io/hostname names a single node" in lines[0]
    assert "level 'host' would be broader than 'rack'" in lines[0]
    assert not (files / "out").exists(), "nothing half-done"

