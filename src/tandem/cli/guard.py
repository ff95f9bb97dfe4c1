"""The one place a user mistake becomes `error: ...` on stderr and exit status 2."""

from __future__ import annotations

from typing import Callable, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from tandem.errors import InputError

T = TypeVar("T")
INVALID_INPUT = 2


def guard(action: Callable[[], T]) -> T:
    """Run `action`; an InputError becomes one line on stderr and exit status 2."""
    try:
        return action()
    except InputError as exc:
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        # escape(): the message quotes user input, which must not be read as rich markup.
        err.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True)
        raise typer.Exit(INVALID_INPUT) from None
