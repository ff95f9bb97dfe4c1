"""The one place a user mistake becomes `error: ...` on stderr and exit status 2."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from tandem.errors import InputError, Problem

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


@contextlib.contextmanager
def needs_extra(extra: str, command: str) -> Iterator[None]:
    """Imports of an optional extra: missing, they are an input error naming the install."""
    try:
        yield
    except ModuleNotFoundError as exc:
        raise InputError(Problem("", f"{command} needs the {extra} extra (no module {(exc.name or '?').split('.')[0]!r}): pip install 'tandem[{extra}]'")) from None
