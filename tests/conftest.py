"""Fixtures shared by the test suites: the repository's examples and an in-process CLI."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import settings
from typer.testing import CliRunner

# Property tests: `ci` (the default) is reproducible, a seed fixed per test and no example
# database; `explore` (`make fuzz`, or TANDEM_HYPOTHESIS_PROFILE=explore) draws fresh
# seeds on every run, and TANDEM_FUZZ_SCALE multiplies every test's examples. Neither has a
# per-example deadline: that is a timed assertion, and on a busy 2-core machine it fails
# tests that are right (speed is measured in bench/, not asserted in tests).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("explore", derandomize=False, database=None, print_blob=True, deadline=None)
settings.load_profile(os.environ.get("TANDEM_HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class CliResult:
    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None


@pytest.fixture(scope="session")
def examples() -> Path:
    return EXAMPLES


@pytest.fixture(scope="session")
def run_cli() -> Callable[..., CliResult]:
    """Run `tandem ARGS...` in-process; stdout and stderr apart, colour codes stripped.

    Colour is switched off through the environment so that what a pipe would see is what
    the test sees, whatever the CI sets.
    """
    from tandem.cli.main import app

    runner = CliRunner(env={"FORCE_COLOR": None, "TTY_COMPATIBLE": None, "NO_COLOR": "1", "COLUMNS": "200"})

    def run(*args: str | Path) -> CliResult:
        result = runner.invoke(app, [str(arg) for arg in args], catch_exceptions=True)
        exception = result.exception if not isinstance(result.exception, SystemExit) else None
        return CliResult(
            exit_code=result.exit_code,
            stdout=_ANSI.sub("", result.stdout),
            stderr=_ANSI.sub("", result.stderr),
            exception=exception,
        )

    return run
