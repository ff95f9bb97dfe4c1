"""tandem's own error hierarchy.

Every error a user can cause is an `InputError`: it names where (file, document, field
path) and what, on one line. The CLI turns it into exit status 2; nothing else should
ever reach the user as a traceback.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def key_path(key: str) -> str:
    """A mapping key as a field-path step: `.name`, or `["nvidia.com/gpu"]` (quoted, escaped)
    for any key that is not plain, so a path stays one unambiguous line."""
    return f".{key}" if _PLAIN_KEY.match(key) else f"[{json.dumps(key)}]"


class TandemError(Exception):
    """Base of every error tandem raises on purpose."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input: where it is and what is wrong."""

    path: str
    message: str
    source: str = ""

    def __str__(self) -> str:
        where = ": ".join(part for part in (self.source, self.path) if part)
        return f"{where}: {self.message}" if where else self.message


class InputError(TandemError):
    """The input is invalid. Carries every problem found; `str()` is one line."""

    def __init__(self, problems: list[Problem] | Problem):
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        if not self.problems:
            raise ValueError("InputError needs at least one problem")
        first = str(self.problems[0])
        more = len(self.problems) - 1
        super().__init__(first + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""))
