"""The operator's image: slim, pinned, non-root, and only the operator's extra installed."""

from __future__ import annotations

import re
import subprocess
import sys

from support.deploy import REPO


def test_the_dockerfile_installs_only_the_operator_and_runs_as_non_root():
    text = (REPO / "Dockerfile").read_text()
    bases = re.findall(r"^FROM (\S+)", text, re.M)
    assert bases and all(re.fullmatch(r"python:3\.11\.\d+-slim-\w+( AS \w+)?", b) or re.fullmatch(r"python:3\.11\.\d+-slim-\w+", b) for b in bases)
    installs = re.findall(r"pip install [^\n]*'(\.\[[^\]]*\])'", text)
    assert installs == [".[operator]"], "plotting, the solver and test tools stay out of the image"
    user = re.findall(r"^USER (\S+)", text, re.M)
    assert user and user[-1].split(":")[0].isdigit() and user[-1].split(":")[0] != "0"


def test_the_operator_runs_without_the_plotting_extra():
    code = "import sys; sys.modules['matplotlib'] = None; import tandem.cli.main, tandem.operator.process; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr
