"""Issue 29: the simulator and the operator run the same autoscaler code, one module.

`tandem simulate` (sim/runner.py) and `tandem operator`'s loop (operator/autoscaler_loop.py)
both call `tandem.controller.autoscaler.autoscale`: the pass that reads the groups and the
signals, decides with `tandem.autoscaling` and writes `spec.roles` and `status.autoscaling`.
Only where the signals come from differs (the serving model's measurements, or the engines'
metrics), so a figure the simulator reports is a figure of the code the cluster runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tandem.controller import autoscaler
from tandem.operator import autoscaler_loop
from tandem.sim import runner

SRC = Path(autoscaler.__file__).resolve().parents[1]


def test_both_call_the_one_pass() -> None:
    assert runner.autoscale is autoscaler.autoscale
    assert autoscaler_loop.autoscale is autoscaler.autoscale


def test_no_other_module_decides_counts_from_signals() -> None:
    """Only the pass and its loop call `scale` (the pure decision) outside `tandem.autoscaling`;
    a second caller would be a second autoscaler that the simulator does not measure."""
    callers = []
    for path in sorted(SRC.rglob("*.py")):
        if path.is_relative_to(SRC / "autoscaling"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "tandem.autoscaling.scaler" and any(a.name == "scale" for a in node.names):
                callers.append(path.relative_to(SRC).as_posix())
    assert callers == ["controller/autoscaler.py"], callers
